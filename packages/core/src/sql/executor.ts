/**
 * How the SQL core talks to a database: the executor contract every driver implements
 * (`SqlExecutor`, `Operation` generators driven by `driveAsync`/`driveSync`), the network
 * executor's bounded sessions, the deadline every network call runs under, a pool's lifecycle
 * (open, closing, closed), and the loop that keeps a notification listener connected.
 *
 * Each section below keeps its own header.
 */

import { ValidationError } from '../errors.js';
import { StoreSubscribers } from '../rules.js';
import type { SqlRow } from './rows.js';

// ─── the executor contract ───────────────────────────────────────────────────────────────────────
/*
 * How the SQL core talks to a driver. Store operations are generators that yield `Query`s and
 * receive `QueryOutcome`s (`Operation`), so one piece of code runs synchronously inside a
 * better-sqlite3 transaction and asynchronously on pg, mysql2 or a TypeORM query runner. An
 * `Executor` is the driver glue: it drives an operation on one connection, in a transaction or
 * statement by statement.
 */

/** One statement. `?` marks parameters; the dialect's `placeholders` rewrites them for its driver. */
export interface Query {
  sql: string;
  params: readonly unknown[];
  /**
   * Plan with this call's values every time: a driver that prepares statements (and so may
   * reuse a plan made when the table was empty) runs it unprepared. For statements whose best
   * plan depends on how many rows there are, off the hot path.
   */
  planEachTime?: boolean;
  /**
   * The driver may return each row as an array of its values in select-list order (`pg` does:
   * its named rows cost a store by column name per column). A dialect that sets it reads both
   * shapes: drivers without an array mode return named rows.
   */
  arrayRows?: boolean;
}

/** What a statement returned, the same shape for every driver. */
export interface QueryOutcome {
  rows: SqlRow[];
  /** Rows changed by an INSERT/UPDATE/DELETE (rows returned, for a read). */
  affected: number;
  /** AUTO_INCREMENT id of the first inserted row (MySQL), or null. */
  insertId: string | null;
}

/** A store operation: yields statements, gets their outcomes back, returns its result. */
export type Operation<T> = Generator<Query, T, QueryOutcome>;

export interface RunOptions {
  /** Run all statements in one transaction (READ COMMITTED where the database has levels). */
  transaction: boolean;
  /** The caller's open transaction, in the driver's terms: statements join it instead. */
  tx?: unknown;
  /**
   * `heartbeat`: a lease renewal. An executor with a connection kept for renewals runs it
   * there, so a heartbeat never queues behind a busy pool (DESIGN: heartbeats have their own
   * connection); others may ignore it. `migrate`: a schema change, which may rightly take
   * long on a big table (or wait for another process's migration): an executor that bounds
   * statements (`withDeadline`) leaves these unbounded.
   */
  purpose?: 'heartbeat' | 'migrate';
}

/**
 * Runs operations on a driver. Every statement of one operation goes to one connection, so
 * session state (MySQL `GET_LOCK`) holds across them.
 */
export interface Executor {
  run<T>(op: Operation<T>, options: RunOptions): Promise<T>;
  /**
   * Optional: opens a transaction on a connection of its own, gives `work` the driver's handle
   * for it (what a handler writes with) and `run`, which runs operations in the same
   * transaction; commits when `work` resolves, rolls back when it rejects. Backs
   * `JobStore.completeInTransaction`.
   */
  transaction?<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T>;
  /** Releases connections the executor owns. */
  close(): Promise<void>;
}

/**
 * Drives `op` with a synchronous statement runner (better-sqlite3). A driver error is thrown
 * into the operation, which may catch it (a duplicate key) or let it end the operation.
 */
export function driveSync<T>(op: Operation<T>, execute: (query: Query) => QueryOutcome): T {
  let step = op.next();
  while (!step.done) {
    let outcome: QueryOutcome;
    try {
      outcome = execute(step.value);
    } catch (error) {
      step = op.throw(error);
      continue;
    }
    step = op.next(outcome);
  }
  return step.value;
}

/** Drives `op` with an asynchronous statement runner (pg, mysql2, TypeORM). */
export async function driveAsync<T>(
  op: Operation<T>,
  execute: (query: Query) => Promise<QueryOutcome>,
): Promise<T> {
  let step = op.next();
  while (!step.done) {
    let outcome: QueryOutcome;
    try {
      outcome = await execute(step.value);
    } catch (error) {
      step = op.throw(error);
      continue;
    }
    step = op.next(outcome);
  }
  return step.value;
}

/** Maps a driver's result pieces to a `QueryOutcome`. */
export function outcome(rows: SqlRow[], affected: number, insertId: unknown = null): QueryOutcome {
  return {
    rows,
    affected,
    insertId: insertId === null || insertId === undefined ? null : String(insertId),
  };
}

/**
 * Runs work one piece at a time, in the order it came: an executor's transactions on a connection
 * that holds one at a time (a file's second connection, or TypeORM's one QueryRunner on SQLite).
 */
export class OneAtATime {
  private last: Promise<void> = Promise.resolve();

  async run<T>(work: () => Promise<T>): Promise<T> {
    const previous = this.last;
    let done = (): void => {};
    this.last = new Promise((resolve) => {
      done = resolve;
    });
    try {
      await previous;
      return await work();
    } finally {
      done();
    }
  }
}

// ─── NetworkExecutor ─────────────────────────────────────────────────────────────────────────────
/*
 * The driver-independent half of an executor for a database behind a network (pg, mysql2, a
 * TypeORM DataSource): each operation on one pooled connection, in a transaction when asked;
 * every connect and statement under its deadline (`withDeadline`, invariant 16), and a
 * connection that missed one destroyed instead of pooled; lease renewals on a connection kept
 * for them; the caller's `tx` without deadlines (its connection's bounds are the caller's).
 * A store's executor supplies the driver glue: how to take, give back, destroy and query a
 * connection, and how to open a transaction on one.
 */

const COMMIT: Query = { sql: 'COMMIT', params: [] };
const ROLLBACK: Query = { sql: 'ROLLBACK', params: [] };

/** One connection taken for one call, and how its statements are sent. */
export class BoundedSession<C> {
  /** It missed a deadline, or could not roll back: dropped instead of given back. */
  broken = false;
  /** An operation ended the transaction itself (MySQL's `Dialect.acquire` yields COMMIT). */
  committed = false;

  constructor(
    readonly connection: C,
    /** Deadline of each statement in ms; null for none (a migration). */
    private readonly deadlineMs: number | null,
    private readonly destroy: (connection: C) => void,
    private readonly execute: (connection: C, query: Query) => Promise<QueryOutcome>,
  ) {}

  /** Bounds `call` on this connection: past the deadline it fails and the connection is destroyed. */
  bound<T>(call: Promise<T>): Promise<T> {
    if (this.deadlineMs === null) return call;
    return withDeadline(call, this.deadlineMs, 'queryTimeoutMs', () => {
      this.broken = true;
      this.destroy(this.connection);
    });
  }

  /** Sends one statement under the deadline. */
  send = (query: Query): Promise<QueryOutcome> => {
    if (query.sql === COMMIT.sql) this.committed = true;
    return this.bound(this.execute(this.connection, query));
  };
}

export abstract class NetworkExecutor<C> implements Executor {
  constructor(protected readonly timeouts: ConnectionTimeouts) {}

  /** Takes a connection: from the main pool, or the one kept for lease renewals. */
  protected abstract take(purpose: 'main' | 'heartbeat'): Promise<C>;
  /** Gives `connection` back; a `broken` one is dropped from its pool instead. */
  protected abstract release(connection: C, broken: boolean): void | Promise<void>;
  /** Destroys the connection's socket, so whatever waits on it fails at once. */
  protected abstract destroy(connection: C): void;
  /** Runs one statement (no deadline: the session adds it). */
  protected abstract execute(connection: C, query: Query): Promise<QueryOutcome>;
  /** The caller's `tx` as a connection; throws a `ValidationError` when it is none. */
  protected abstract callerConnection(tx: unknown): C;

  /**
   * Opens a READ COMMITTED transaction on `session` (through `session.send` or
   * `session.bound`); `purpose` `migrate` may lift server-side bounds for it.
   */
  protected abstract begin(
    session: BoundedSession<C>,
    purpose?: RunOptions['purpose'],
  ): Promise<void>;

  protected async commit(session: BoundedSession<C>): Promise<void> {
    await session.send(COMMIT);
  }

  protected async rollback(session: BoundedSession<C>): Promise<void> {
    await session.send(ROLLBACK);
  }

  /** What a handler's `ctx.transaction` work writes with: the connection itself by default. */
  protected handle(connection: C): unknown {
    return connection;
  }

  /** Awaited before every call (a server check, a DataSource's initialisation). */
  protected async beforeRun(): Promise<void> {}

  abstract close(): Promise<void>;

  async run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    await this.beforeRun();
    if (options.tx !== undefined) {
      const connection = this.callerConnection(options.tx);
      return driveAsync(op, (query) => this.execute(connection, query));
    }
    const purpose = options.purpose === 'heartbeat' ? 'heartbeat' : 'main';
    // A migration may rightly run long (a big table, another process's migration first).
    const deadline = options.purpose === 'migrate' ? null : this.timeouts.queryTimeoutMs;
    return this.session(purpose, deadline, (session) =>
      options.transaction
        ? this.inTransaction(session, options.purpose, () => driveAsync(op, session.send))
        : driveAsync(op, session.send),
    );
  }

  /**
   * `ctx.transaction`: `work` gets the transaction's handle (`handle`) and `run` for the
   * store's operations in it; the deadlines bound the store's statements only.
   */
  async transaction<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T> {
    await this.beforeRun();
    return this.session('main', this.timeouts.queryTimeoutMs, (session) =>
      this.inTransaction(session, undefined, () =>
        work(this.handle(session.connection), (op) => driveAsync(op, session.send)),
      ),
    );
  }

  /**
   * The server's `SELECT VERSION()` on a pooled connection under the deadlines, without
   * `beforeRun` (a MySQL server check runs there: `MysqlServerCheck`).
   */
  readServerVersion(): Promise<string> {
    return this.session('main', this.timeouts.queryTimeoutMs, async (session) => {
      const { rows } = await session.send({ sql: 'SELECT VERSION() AS version', params: [] });
      return String(rows[0]?.version ?? '');
    });
  }

  /** A connection's session for `work`, taken within `connectTimeoutMs`, released after. */
  protected async session<T>(
    purpose: 'main' | 'heartbeat',
    deadline: number | null,
    work: (session: BoundedSession<C>) => Promise<T>,
  ): Promise<T> {
    const connection: C = await withDeadline<C>(
      this.take(purpose),
      this.timeouts.connectTimeoutMs,
      'connectTimeoutMs',
      () => {},
      (late) => void this.release(late, false),
    );
    const session = new BoundedSession<C>(
      connection,
      deadline,
      (c) => this.destroy(c),
      (c, query) => this.execute(c, query),
    );
    try {
      return await work(session);
    } finally {
      await this.release(connection, session.broken);
    }
  }

  private async inTransaction<T>(
    session: BoundedSession<C>,
    purpose: RunOptions['purpose'],
    body: () => Promise<T>,
  ): Promise<T> {
    await this.begin(session, purpose);
    try {
      const result = await body();
      if (!session.committed) await this.commit(session);
      return result;
    } catch (error) {
      // A broken connection cannot roll back (the server does on disconnect): it is dropped,
      // with any session lock it held, and the error that ended the operation is reported.
      await this.rollback(session).catch(() => {
        session.broken = true;
      });
      throw error;
    }
  }
}

// ─── deadlines ───────────────────────────────────────────────────────────────────────────────────
/*
 * Deadlines for the calls of a store that talks to its database over a network (invariant 16).
 * A server-side timeout (`statement_timeout`) never fires when the network drops packets
 * silently, and a pool hands out a dead socket as readily as a live one, so an executor bounds
 * each connect and each statement on the client and, when one passes its deadline, destroys
 * that connection: the call fails, and the pool never keeps a socket that will not answer.
 */

/** Deadlines and TCP keepalive of a network store's connections. */
export interface ConnectionTimeouts {
  /** Opening a connection, or waiting for a free one in the pool. */
  connectTimeoutMs: number;
  /** One statement, from sending it to its last row; also a server-side bound where it has one. */
  queryTimeoutMs: number;
  /** Idle time on a connection before the operating system starts TCP keepalive probes. */
  keepAliveDelayMs: number;
}

/** The defaults: a minute-long outage costs a few failed calls, never a hung one. */
export const DEFAULT_CONNECTION_TIMEOUTS: Readonly<ConnectionTimeouts> = Object.freeze({
  connectTimeoutMs: 10_000,
  queryTimeoutMs: 30_000,
  keepAliveDelayMs: 10_000,
});

/** The longest delay a Node timer keeps (a longer one fires at once). */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * The timeouts among a store's options, checked (whole milliseconds, 1 up to about 24 days)
 * and with the defaults filled in. `label` names the package in messages.
 *
 * @example
 * const timeouts = resolveConnectionTimeouts(options, '@jobs/postgres');
 */
export function resolveConnectionTimeouts(
  options: { [K in keyof ConnectionTimeouts]?: unknown },
  label: string,
): ConnectionTimeouts {
  const resolved = { ...DEFAULT_CONNECTION_TIMEOUTS };
  for (const field of Object.keys(resolved) as (keyof ConnectionTimeouts)[]) {
    const value = options[field];
    if (value === undefined) continue;
    if (
      typeof value !== 'number' ||
      !Number.isInteger(value) ||
      value < 1 ||
      value > MAX_TIMER_MS
    ) {
      throw new ValidationError(
        field,
        `[${label}] must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS}, got ${String(value)}`,
      );
    }
    resolved[field] = value;
  }
  return resolved;
}

/** A store call that passed its deadline; the connection it ran on was destroyed. */
export class CallTimeoutError extends Error {
  readonly code = 'ETIMEDOUT';

  constructor(
    /** The deadline, in ms. */
    readonly timeoutMs: number,
    /** The option that set it, e.g. `queryTimeoutMs`. */
    readonly option: string,
  ) {
    super(`no answer within ${timeoutMs} ms (${option}); the connection was closed`);
    this.name = 'CallTimeoutError';
  }
}

/**
 * Settles as `work` does, unless `timeoutMs` pass first: then rejects with a `CallTimeoutError`
 * and calls `onExpired` (destroy the connection, so `work` fails too and frees what it holds).
 * A result that arrives after the deadline goes to `onLate` (a pooled connection handed out
 * late is given back).
 *
 * @example
 * const client = await withDeadline(pool.connect(), 10_000, 'connectTimeoutMs', () => {}, (late) => late.release());
 */
export function withDeadline<T>(
  work: Promise<T>,
  timeoutMs: number,
  option: string,
  onExpired: () => void,
  onLate?: (value: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      reject(new CallTimeoutError(timeoutMs, option));
      onExpired();
    }, timeoutMs);
    work.then(
      (value) => {
        if (expired) onLate?.(value);
        else {
          clearTimeout(timer);
          resolve(value);
        }
      },
      (error: unknown) => {
        if (expired) return;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

// ─── a pool's lifecycle ──────────────────────────────────────────────────────────────────────────
/*
 * Closing a network store's connections in bounded time. A driver's goodbye (pg's `end()`,
 * mysql2's QUIT) waits for the server to answer, which never happens on a silent network and
 * would keep the process alive: past a grace the sockets still open are destroyed.
 */

/** How long a store's `close()` lets its connections say goodbye. */
export const CLOSE_GRACE_MS = 1_000;

/**
 * A driver connection's socket: pg's `Client` and mysql2's promise connection hold it at
 * `connection.stream`, mysql2's core connection at `stream`.
 */
export interface SocketHolder {
  stream?: { destroy(): void } | undefined;
  connection?: { stream?: { destroy(): void } | undefined } | undefined;
}

/** Destroys a driver connection's socket at once, without a goodbye: what waits on it fails. */
export function destroySocket(holder: SocketHolder): void {
  (holder.connection?.stream ?? holder.stream)?.destroy();
}

/**
 * A promise made on first use and shared by every caller — made again after it failed (a
 * server that was away is asked again): a DataSource's start, a server check, a pool.
 */
export class SharedUntilFailure<T> {
  private pending: Promise<T> | null = null;

  constructor(private readonly make: () => Promise<T>) {}

  get(): Promise<T> {
    if (!this.pending) {
      const pending = this.make();
      this.pending = pending;
      pending.catch(() => {
        if (this.pending === pending) this.pending = null;
      });
    }
    return this.pending;
  }

  /** The promise made, if any, forgotten (for closing what it made). */
  take(): Promise<T> | null {
    const pending = this.pending;
    this.pending = null;
    return pending;
  }
}

/**
 * The open connections of a pool, for destroying those that linger after its goodbye. A
 * store adds each connection its pool opens and deletes each one it closes.
 */
export class OpenConnections<C> extends Set<C> {
  constructor(private readonly destroyConnection: (connection: C) => void) {
    super();
  }

  /** Destroys every connection still open. */
  destroyAll(): void {
    for (const connection of this) this.destroyConnection(connection);
    this.clear();
  }
}

/**
 * Runs `end` (a pool's or a connection's goodbye) for at most `graceMs`, then destroys what
 * `open` still holds — at once when `end` failed or ran late, to be sure when it finished.
 *
 * @example
 * await endWithin(() => pool.end(), open);
 */
export async function endWithin<C>(
  end: () => Promise<unknown>,
  open: OpenConnections<C>,
  graceMs = CLOSE_GRACE_MS,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, graceMs);
  });
  // Errors of the goodbye (a connect that timed out meanwhile) do not matter: every socket is
  // gone after.
  await Promise.race([end().catch(() => {}), late]);
  clearTimeout(timer);
  open.destroyAll();
}

/**
 * A pool the store opens on first use and ends within the grace on `close()` — the
 * one-connection pool lease renewals run on, so a heartbeat never queues behind a busy pool.
 */
export class LazyPool<P extends { end(): Promise<unknown> }, C> {
  private opened: { pool: P; open: OpenConnections<C> } | null = null;

  /** `track` follows the connections the pool opens (see `OpenConnections`). */
  constructor(
    private readonly create: () => P,
    private readonly track: (pool: P) => OpenConnections<C>,
  ) {}

  get(): P {
    if (!this.opened) {
      const pool = this.create();
      this.opened = { pool, open: this.track(pool) };
    }
    return this.opened.pool;
  }

  async close(): Promise<void> {
    const opened = this.opened;
    this.opened = null;
    if (opened) await endWithin(() => opened.pool.end(), opened.open);
  }
}

// ─── the LISTEN loop ─────────────────────────────────────────────────────────────────────────────
/*
 * Wake-ups by LISTEN/NOTIFY (PostgreSQL, through `pg` or a TypeORM DataSource): one connection
 * LISTENs on the store's channel (and any of its own) while anyone subscribes, and every notification wakes the
 * subscribers. A lost connection (server restart, `pg_terminate_backend`, network) is replaced
 * with backoff, and subscribers are woken once then: notifications sent while nobody listened
 * are lost. The LISTEN has a deadline, so on a silent network it fails and is tried again.
 */

type Handler = (message?: { channel?: string; payload?: string }) => void;

/**
 * The payload of a test notification (`ReconnectingListener.heard`): counted, but it wakes
 * nobody.
 */
export const PROBE_PAYLOAD = 'jobs:probe';

/** What a connection needs to LISTEN: pg's `Client` has it. */
export interface ListeningConnection {
  query(sql: string): Promise<unknown>;
  on(event: 'notification' | 'error' | 'end', handler: Handler): unknown;
  removeListener(event: 'notification' | 'error' | 'end', handler: Handler): unknown;
}

/** A connection opened for listening, and how to let it go. */
export interface ListenSession<C extends ListeningConnection> {
  connection: C;
  /** Destroys its socket (a LISTEN past its deadline). */
  destroy(): void;
  /** Closes or gives back the connection; `lost` is why it ended, if it was lost. */
  close(lost: unknown): Promise<void>;
}

const FIRST_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 5_000;

export class ReconnectingListener<C extends ListeningConnection> {
  private readonly subscribers = new StoreSubscribers();
  private running: Promise<void> | null = null;
  private stopped = false;
  private current: C | null = null;
  /** Notifications heard on the channel, test ones included. */
  private notifications = 0;
  /** Cuts short a connection being opened when the listener is closed. */
  private readonly stopping = new AbortController();
  /** Ends the current wait: for the connection to be lost, or before the next attempt. */
  private interrupt = (): void => undefined;

  /** The channels listened to: the store's, and any of this listener's own. */
  private readonly channels: readonly string[];

  constructor(
    /** Opens a connection to listen on; `signal` aborts when the listener is closed. */
    private readonly open: (signal: AbortSignal) => Promise<ListenSession<C>>,
    /** The channel, or channels (the store's shared one and a node's own), to LISTEN on. */
    channel: string | readonly string[],
    private readonly queryTimeoutMs: number,
  ) {
    this.channels = typeof channel === 'string' ? [channel] : [...channel];
  }

  /** Adds a subscriber; the first one starts listening, until `close()`. */
  subscribe(listener: () => void): () => void {
    if (this.stopped) throw new Error('the listener is closed');
    const remove = this.subscribers.add(listener);
    this.running ??= this.listen();
    return remove;
  }

  /** Resolves with the listening connection once it is up (null once closed or unused). */
  async ready(): Promise<C | null> {
    while (!this.stopped && this.running && this.current === null) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return this.current;
  }

  /**
   * Notifications heard on the channel so far, test ones (payload `PROBE_PAYLOAD`) included: a
   * store sends one and sees whether this grows.
   */
  get heard(): number {
    return this.notifications;
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    this.interrupt();
    await this.running;
  }

  private wait(until: (done: () => void) => void): Promise<void> {
    return new Promise((resolve) => {
      this.interrupt = resolve;
      until(resolve);
    });
  }

  /** Keeps a connection listening until `close()`; every one after the first wakes subscribers. */
  private async listen(): Promise<void> {
    for (let first = true, backoffMs = FIRST_BACKOFF_MS; !this.stopped; first = false) {
      const listened = await this.listenOnce(!first).catch(() => false);
      backoffMs = listened ? FIRST_BACKOFF_MS : Math.min(backoffMs * 2, MAX_BACKOFF_MS);
      if (!this.stopped) await this.wait((done) => setTimeout(done, backoffMs).unref());
    }
  }

  /** LISTENs on one connection until it is lost or `close()`; says whether it listened. */
  private async listenOnce(wake: boolean): Promise<boolean> {
    const session = await this.open(this.stopping.signal);
    const client = session.connection;
    let listened = false;
    let lost: unknown;
    const handlers: ['notification' | 'error' | 'end', Handler][] = [
      [
        'notification',
        (message) => {
          if (message?.channel === undefined || !this.channels.includes(message.channel)) return;
          this.notifications++;
          if (message.payload !== PROBE_PAYLOAD) this.subscribers.wake();
        },
      ],
    ];
    const ended = this.wait((done) => {
      const end: Handler = (error) => {
        lost ??= error ?? new Error('the listening connection ended');
        done();
      };
      handlers.push(['error', end], ['end', end]);
    });
    for (const [event, handler] of handlers) client.on(event, handler);
    // Closing the listener cuts a LISTEN under way short (the wait ends here, whether or not
    // the driver notices its socket destroyed); a listening connection says goodbye instead.
    let cut = (): void => {};
    const closing = new Promise<never>((_resolve, reject) => {
      cut = () => {
        session.destroy();
        reject(new Error('the listener was closed'));
      };
    });
    closing.catch(() => {});
    try {
      this.stopping.signal.addEventListener('abort', cut);
      if (this.stopped) cut();
      const listen = client.query(
        this.channels.map((channel) => `LISTEN "${channel.replace(/"/g, '""')}";`).join(' '),
      );
      await Promise.race([
        withDeadline(listen, this.queryTimeoutMs, 'queryTimeoutMs', () => session.destroy()),
        closing,
      ]);
      this.stopping.signal.removeEventListener('abort', cut);
      listened = true;
      this.current = client;
      if (wake) this.subscribers.wake();
      if (!this.stopped) await ended;
    } catch (error) {
      lost ??= error;
    } finally {
      this.stopping.signal.removeEventListener('abort', cut);
      this.current = null;
      for (const [event, handler] of handlers) client.removeListener(event, handler);
      await session.close(lost);
    }
    return listened;
  }
}
