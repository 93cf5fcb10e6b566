/**
 * The driver-independent half of an executor for a database behind a network (pg, mysql2, a
 * TypeORM DataSource): each operation on one pooled connection, in a transaction when asked;
 * every connect and statement under its deadline (`withDeadline`, invariant 16), and a
 * connection that missed one destroyed instead of pooled; lease renewals on a connection kept
 * for them; the caller's `tx` without deadlines (its connection's bounds are the caller's).
 * A store's executor supplies the driver glue: how to take, give back, destroy and query a
 * connection, and how to open a transaction on one.
 */
import { type ConnectionTimeouts, withDeadline } from './deadline.js';
import {
  driveAsync,
  type Executor,
  type Operation,
  type Query,
  type QueryOutcome,
  type RunOptions,
} from './executor.js';

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
