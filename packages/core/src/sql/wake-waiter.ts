/**
 * Wake-ups on MySQL/MariaDB without polling (`@jobs/mysql`, and `@jobs/typeorm` on MySQL; the
 * mysql2 connection is theirs to open, `mysqlWakeWaits`): an idle store waits on the server on a connection
 * of its own, one statement per `waitMs` — `SELECT SLEEP(IF(<a job is due>, 0, waitMs))`, named
 * by an alias every waiter of these tables shares: the read of whether a waiting job is due (one
 * dive into `ix_jobs_due`) is the SLEEP's argument, so it runs before each wait, and a due job
 * ends the statement at once. A store that enqueued (committed, not in your transaction) ends
 * the waits of a few waiters with `KILL QUERY` (`ringWaiters`): a bounded number of statements
 * per enqueue however many nodes wait, and an interrupted wait wakes its subscribers at once.
 * The read before each wait sees every commit (out-of-order ones, jobs enqueued in your
 * transaction, released or retried jobs, stores that may not kill the waiters' queries): a due
 * job wakes the subscribers within one wait — and a job the woken engines already took wakes
 * nobody else. After a wake-up the next wait reads nothing (a plain `SLEEP`), so a due job
 * nobody here can take wakes the subscribers once per wait, never in a loop.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  type ConnectionTimeouts,
  destroySocket,
  outcome,
  type Query,
  type QueryOutcome,
  type SocketHolder,
  withDeadline,
} from './executor.js';
import type { SqlRow } from './rows.js';
import type { StoreNotifier } from './sql-store.js';

/** How one waiter runs statements on its own connection. */
export interface WaitConnection {
  /** Runs `query` on the waiter's connection within `deadlineMs`; rejects when it fails. */
  run(query: Query, deadlineMs: number): Promise<QueryOutcome>;
  /**
   * Drops the connection; with `endWait`, also ends its statement on the server (a SLEEP
   * goes on after its client left), through a short connection of its own.
   */
  destroy(endWait?: boolean): Promise<void>;
}

/** MySQL's "Query execution was interrupted": a KILL QUERY landed on a statement. */
const ER_QUERY_INTERRUPTED = 1317;

const FIRST_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 5_000;

export class WakeWaiter implements StoreNotifier {
  private readonly listeners = new Set<() => void>();
  private running: Promise<void> | null = null;
  private closed = false;
  private count = 0;
  private connection: WaitConnection | null = null;
  /** Rejects once the waiter is closed: a statement under way is not waited for. */
  private readonly closing: Promise<never>;
  private stop = (): void => {};
  /** This waiter's alias: the shared prefix, then its own id. */
  readonly alias: string;

  constructor(
    /** The alias prefix all waiters on these tables share (`jobs_wait_<hash>_`). */
    readonly prefix: string,
    /** Opens the waiter's connection. */
    private readonly open: () => WaitConnection,
    /** Whether a waiting job is due: a boolean SQL expression without parameters. */
    private readonly due: string,
    private readonly waitMs: number,
    private readonly queryTimeoutMs: number,
    private readonly errno: (error: unknown) => number | undefined,
  ) {
    this.alias = `${prefix}${randomBytes(6).toString('hex')}`;
    this.closing = new Promise<never>((_resolve, reject) => {
      this.stop = () => reject(new Error('the waiter is closed'));
    });
    this.closing.catch(() => {});
  }

  /** Statements the waiter sent so far (one per wait): the idle cost. */
  get statements(): number {
    return this.count;
  }

  subscribe(listener: () => void): () => void {
    const entry = (): void => listener();
    this.listeners.add(entry);
    this.running ??= this.loop();
    return () => {
      this.listeners.delete(entry);
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stop();
    const ending = this.connection?.destroy(true);
    this.connection = null;
    await Promise.all([this.running, ending]);
  }

  private wake(): void {
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch {
        // A subscriber's error is its own.
      }
    }
  }

  private async send(query: Query, deadlineMs: number): Promise<QueryOutcome> {
    this.connection ??= this.open();
    this.count++;
    return Promise.race([this.connection.run(query, deadlineMs), this.closing]);
  }

  /**
   * The next wait: one that first reads whether a job is due (and then does not wait), or,
   * right after a wake-up (`plain`), a wait alone. Both start `SELECT SLEEP(` and carry the
   * alias, as `ringWaiters` finds them.
   */
  private waitQuery(plain: boolean): Query {
    const seconds = this.waitMs / 1_000;
    return plain
      ? { sql: `SELECT SLEEP(?) AS \`${this.alias}\``, params: [seconds] }
      : {
          sql: `SELECT SLEEP(IF(${this.due}, 0, ?)) AS \`${this.alias}\`, ${this.due} AS v`,
          params: [seconds],
        };
  }

  /** Waits while anyone subscribes; wakes on a KILL QUERY, or when a job is due before a wait. */
  private async loop(): Promise<void> {
    let backoffMs = FIRST_BACKOFF_MS;
    let plain = false;
    while (!this.closed && this.listeners.size > 0) {
      try {
        const { rows } = await this.send(this.waitQuery(plain), this.waitMs + this.queryTimeoutMs);
        const row = rows[0] ?? {};
        // SLEEP answers 1 when a KILL QUERY ended it; `v` is 1 when a job was due (read before
        // the wait, or after it: the server may evaluate it either side of the SLEEP).
        const woken = Number(row[this.alias]) === 1 || Number(row.v) === 1;
        if (woken && !this.closed) this.wake();
        plain = woken;
        backoffMs = FIRST_BACKOFF_MS;
      } catch (error) {
        if (this.closed) break;
        // A KILL QUERY of a wait that also reads: the statement fails instead of answering 1.
        if (this.errno(error) === ER_QUERY_INTERRUPTED) {
          this.wake();
          plain = true;
          continue;
        }
        // The connection is gone (server restart, network): a new one, after a pause. Waking
        // after each pause lets the engines look for jobs themselves while the waits fail.
        void this.connection?.destroy();
        this.connection = null;
        await new Promise((resolve) => setTimeout(resolve, backoffMs).unref());
        backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
        if (!this.closed) this.wake();
        plain = true;
      }
    }
    this.running = null;
    // Nobody listens: the connection is not kept.
    if (this.listeners.size === 0) {
      void this.connection?.destroy();
      this.connection = null;
    }
  }
}

/**
 * The statements that end up to `limit` waits of `prefix` (random ones): one read of the
 * process list, then one `KILL QUERY` per waiter found. `sameDatabase`: only waiters whose
 * connection's database is this one's (tables named without their database).
 */
export function* ringWaiters(
  prefix: string,
  limit: number,
  sameDatabase: boolean,
): Generator<Query, number, QueryOutcome> {
  const { rows } = yield {
    sql: `SELECT ID AS id FROM information_schema.PROCESSLIST
      WHERE COMMAND = 'Query' AND INFO LIKE ?${sameDatabase ? ' AND DB = DATABASE()' : ''}
      ORDER BY RAND() LIMIT ${Math.max(1, Math.trunc(limit))}`,
    params: [`SELECT SLEEP(% AS \`${prefix}%`],
  };
  let rung = 0;
  for (const row of rows) {
    const id = Number(row.id);
    if (!Number.isSafeInteger(id)) continue;
    try {
      yield { sql: `KILL QUERY ${id}`, params: [] };
      rung++;
    } catch {
      // Gone meanwhile (1094), or another user's (1095): its wait ends on its own.
    }
  }
  return rung;
}

/**
 * The alias prefix shared by the waiters on `table` (the dialect's quoted, maybe qualified
 * name): `jobs_wait_` and the first 16 hex digits of its SHA-1. The SQL enqueue procedure ends
 * the waits it names too.
 */
export function waiterPrefix(table: string): string {
  return `jobs_wait_${createHash('sha1').update(table).digest('hex').slice(0, 16)}_`;
}

/**
 * What a wait needs of a mysql2 promise connection (`mysql2/promise`'s `createConnection`, or
 * `createConnectionPromise` of the callback module TypeORM loads).
 */
export interface WaitDriverConnection {
  readonly threadId: number | null;
  query(sql: string, params?: unknown[]): Promise<[unknown, unknown]>;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  destroy(): void;
}

/**
 * A `WaitConnection` on a mysql2 connection `connect` opens on first use: each statement
 * within its deadline (past it, the socket is destroyed and the statement fails). `connect`
 * also opens the short connection that ends a wait under way when the waiter closes.
 */
export function waitConnection(
  connect: () => Promise<WaitDriverConnection>,
  timeouts: ConnectionTimeouts,
): WaitConnection {
  let opening: Promise<WaitDriverConnection> | null = null;
  let opened: WaitDriverConnection | null = null;
  let destroyed = false;
  const drop = (): void => {
    destroyed = true;
    if (opened) {
      opened.destroy();
      destroySocket(opened as unknown as SocketHolder);
    }
    opening?.then(
      (late) => {
        late.destroy();
        destroySocket(late as unknown as SocketHolder);
      },
      () => {},
    );
  };
  const destroy = async (endWait = false): Promise<void> => {
    const threadId = opened?.threadId;
    drop();
    if (!endWait || typeof threadId !== 'number') return;
    try {
      const killer = await withDeadline(
        connect(),
        timeouts.connectTimeoutMs,
        'connectTimeoutMs',
        () => {},
        (late) => late.destroy(),
      );
      try {
        await withDeadline(
          killer.query(`KILL QUERY ${threadId}`),
          timeouts.queryTimeoutMs,
          'queryTimeoutMs',
          () => killer.destroy(),
        );
      } finally {
        killer.destroy();
      }
    } catch {
      // Gone already, or unreachable: the SLEEP ends on its own.
    }
  };
  return {
    async run(query, deadlineMs) {
      if (destroyed) throw new Error('the wait connection is closed');
      opening ??= connect();
      const connection = await withDeadline(
        opening,
        timeouts.connectTimeoutMs,
        'connectTimeoutMs',
        drop,
      );
      if (opened !== connection) {
        opened = connection;
        // A dead connection answers 'error' events; the failing statement reports it.
        connection.on('error', () => {});
      }
      if (destroyed) throw new Error('the wait connection is closed');
      const [rows] = await withDeadline(
        connection.query(query.sql, query.params as unknown[]),
        deadlineMs,
        'queryTimeoutMs',
        drop,
      );
      return outcome(Array.isArray(rows) ? (rows as SqlRow[]) : [], 0);
    },
    destroy,
  };
}

/** Waiters one enqueue wakes: at least this many, one more per 16 jobs, at most `MAX_RUNG`. */
const MIN_RUNG = 2;
const MAX_RUNG = 8;

/**
 * Whether a waiting job of `jobsTable` (the dialect's quoted name) is due: the read a wait
 * makes before it sleeps, one dive into `ix_jobs_due`.
 */
export function dueBeforeWait(jobsTable: string): string {
  return `EXISTS(SELECT 1 FROM ${jobsTable} FORCE INDEX (ix_jobs_due) WHERE waiting = 1 AND due_at <= UTC_TIMESTAMP(3))`;
}

/**
 * After an enqueue of a store's own commit: ends the waits of a few waiters on the same tables
 * (`ringWaiters`), a number that grows with the batch, not with the nodes waiting; `drained()`
 * for `close()`. `run` runs the statements through the store, outside any transaction.
 */
export class WaiterRing {
  private readonly ringing = new Set<Promise<number>>();

  constructor(
    private readonly run: (ring: () => Generator<Query, number, QueryOutcome>) => Promise<number>,
    private readonly prefix: string,
    private readonly sameDatabase: boolean,
  ) {}

  /** Rings for an enqueue of `jobs` jobs; failures only leave the waits to end on their own. */
  ring(jobs: number): void {
    if (jobs <= 0) return;
    const limit = Math.min(MAX_RUNG, Math.max(MIN_RUNG, Math.ceil(jobs / 16)));
    const ring = this.run(() => ringWaiters(this.prefix, limit, this.sameDatabase))
      .catch(() => 0)
      .finally(() => this.ringing.delete(ring));
    this.ringing.add(ring);
  }

  /** Resolves once the rings under way are done. */
  async drained(): Promise<void> {
    await Promise.all([...this.ringing]);
  }
}

/** How long an idle store waits on the server between reads of whether a job is due. */
export const DEFAULT_WAKE_WAIT_MS = 4_000;

/**
 * Engines' default `pollIntervalMs` on a store that waits (`capabilities.pollIntervalMs`): the
 * waits already read whether a job is due every `notifyWaitMs`, so the engine's own poll is a
 * fallback of a fallback.
 */
export const WAITING_POLL_MS = 30_000;

/**
 * Settings mysql2 derives from the others when it opens a connection: given again, they are
 * rejected with a warning, so a pool's settings are copied without them.
 */
const DERIVED_CONNECTION_SETTINGS = ['maxPacketSize', 'clientFlags', 'pool', 'isServer'];

/** A mysql2 pool's `connectionConfig` as settings a new connection of the same server takes. */
export function copiedConnectionSettings(connectionConfig: object): Record<string, unknown> {
  const settings: Record<string, unknown> = { ...connectionConfig };
  for (const key of DERIVED_CONNECTION_SETTINGS) delete settings[key];
  return settings;
}

/** What `mysqlWakeWaits` needs from the store it serves. */
export interface MysqlWakeWaitsOptions {
  /** The dialect's quoted jobs table. */
  jobsTable: string;
  /** Opens a connection of the waiter's own (not one of the pool's). */
  connect: () => Promise<WaitDriverConnection>;
  /** `notifyWaitMs`. */
  waitMs: number;
  timeouts: ConnectionTimeouts;
  /** Tables named without their database: ring only waiters on this connection's database. */
  sameDatabase: boolean;
  /** Runs the ring's statements through the store, outside any transaction. */
  run: (ring: () => Generator<Query, number, QueryOutcome>) => Promise<number>;
  errno: (error: unknown) => number | undefined;
}

/**
 * A MySQL/MariaDB store's wake-ups without polling: the waiter its engines subscribe to, and
 * the ring its own commits of enqueues sound (`@jobs/mysql`, and `@jobs/typeorm` on MySQL).
 */
export function mysqlWakeWaits(options: MysqlWakeWaitsOptions): {
  waiter: WakeWaiter;
  ring: WaiterRing;
} {
  const prefix = waiterPrefix(options.jobsTable);
  const waiter = new WakeWaiter(
    prefix,
    () => waitConnection(options.connect, options.timeouts),
    dueBeforeWait(options.jobsTable),
    options.waitMs,
    options.timeouts.queryTimeoutMs,
    options.errno,
  );
  return { waiter, ring: new WaiterRing(options.run, prefix, options.sameDatabase) };
}
