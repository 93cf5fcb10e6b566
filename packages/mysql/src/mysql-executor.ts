/**
 * Runs `@jobs/core/sql` operations on a mysql2 promise pool (core's `NetworkExecutor` does the
 * sessions, transactions and deadlines): every statement of one operation on one pooled
 * connection (named locks are per session), or on the caller's connection inside its open
 * transaction. Rows are read with `dateStrings` whatever the pool's settings (the dialect
 * reads times as text anyway). Lease renewals run on a connection of their own.
 */
import { ValidationError } from '@jobs/core';
import {
  type BoundedSession,
  type ConnectionTimeouts,
  DEFAULT_CONNECTION_TIMEOUTS,
  destroySocket,
  endWithin,
  LazyPool,
  NetworkExecutor,
  OpenConnections,
  type Operation,
  outcome,
  type Query,
  type QueryOutcome,
  type RunOptions,
  type SocketHolder,
  type SqlRow,
} from '@jobs/core/sql';
import type { Pool, PoolConnection, ResultSetHeader } from 'mysql2/promise';

/** A core (callback) mysql2 connection, as far as following its socket goes. */
interface CoreConnection {
  stream?: { destroy(): void; once(event: 'close', listener: () => void): unknown };
}

/**
 * How the sessions of the store's own pool are set up on their first use: UTC, and READ
 * COMMITTED (no gap locks, fresh reads per statement); a row lock is waited for 3 s, not the
 * server's 50 — the store's statements hold row locks for milliseconds, so a longer wait is
 * someone else's long transaction, better reported than waited out (and retried within
 * core's `RETRY_BUDGET_MS`). On a caller's pool each transaction sets its isolation instead.
 */
const SESSION_SETUP = [
  'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED',
  "SET SESSION time_zone = '+00:00', SESSION innodb_lock_wait_timeout = 3",
];

/** The open connections of `pool`, kept so closing it can destroy those that linger. */
function trackConnections(pool: Pool): OpenConnections<CoreConnection> {
  const open = new OpenConnections<CoreConnection>(destroySocket);
  pool.on('connection', (connection) => {
    // The event hands out the core connection (mysql2 emits it before wrapping).
    const core = connection as unknown as CoreConnection;
    open.add(core);
    core.stream?.once('close', () => open.delete(core));
  });
  return open;
}

/** What to pass as `tx` instead, for the messages that refuse one. */
const PASS_CONNECTION =
  'so the job would commit on its own, outside your transaction: pass the connection of your transaction (const connection = await pool.getConnection(); await connection.beginTransaction(); … { tx: connection })';

/** The server's status flags in an OK packet (MySQL protocol `SERVER_STATUS_*`). */
const SERVER_STATUS_IN_TRANS = 0x0001;
const SERVER_STATUS_AUTOCOMMIT = 0x0002;

export class MysqlExecutor extends NetworkExecutor<PoolConnection> {
  /** Awaited before every operation (the store's server check). */
  override beforeRun: () => Promise<void> = async () => {};
  /**
   * Lease renewals get a connection of their own, so a heartbeat never queues behind a busy
   * pool (slow acquisitions, handlers holding connections): a late heartbeat is a lost lease
   * and a job run twice.
   */
  private readonly heartbeat: LazyPool<Pool, CoreConnection> | null;
  private readonly open: OpenConnections<CoreConnection> | null;
  /** Connections of the store's own pool whose session is set up (`SESSION_SETUP`). */
  private readonly setUp = new WeakSet<object>();

  /**
   * `ownsPool`: the store created the pool (and ends it on `close()`) and set READ COMMITTED
   * on each of its sessions; on a caller's pool each transaction sets it for itself (`SET
   * TRANSACTION`: that one only). `openHeartbeatPool` opens the one-connection pool lease
   * renewals run on, on first use.
   */
  constructor(
    private readonly pool: Pool,
    private readonly ownsPool: boolean,
    openHeartbeatPool: (() => Pool) | null = null,
    timeouts: ConnectionTimeouts = DEFAULT_CONNECTION_TIMEOUTS,
  ) {
    super(timeouts);
    this.heartbeat = openHeartbeatPool && new LazyPool(openHeartbeatPool, trackConnections);
    this.open = ownsPool ? trackConnections(pool) : null;
  }

  /** Ends the heartbeat pool, and the main pool when the store owns it. */
  async close(): Promise<void> {
    await Promise.all([
      this.heartbeat?.close(),
      this.open && endWithin(() => this.pool.end(), this.open),
    ]);
  }

  protected async take(purpose: 'main' | 'heartbeat'): Promise<PoolConnection> {
    const heartbeat = purpose === 'heartbeat' && this.heartbeat;
    const connection = await (heartbeat ? heartbeat.get() : this.pool).getConnection();
    if (this.ownsPool && !heartbeat && !this.setUp.has(connection.connection)) {
      try {
        for (const sql of SESSION_SETUP) await connection.query(sql);
      } catch (error) {
        connection.release(); // set up again on its next use
        throw error;
      }
      this.setUp.add(connection.connection);
    }
    return connection;
  }

  protected release(connection: PoolConnection, broken: boolean): void {
    if (broken) this.destroy(connection);
    else connection.release();
  }

  /**
   * Drops a connection from its pool and destroys its socket at once: mysql2's own `destroy()`
   * only half-closes it, which never ends on a silent network.
   */
  protected destroy(connection: PoolConnection): void {
    connection.destroy();
    destroySocket(connection as unknown as SocketHolder);
  }

  protected async execute(connection: PoolConnection, query: Query): Promise<QueryOutcome> {
    const [result] = await connection.query(
      query.params.length > 0
        ? { sql: query.sql, values: [...query.params], dateStrings: true }
        : { sql: query.sql, dateStrings: true },
    );
    if (Array.isArray(result)) return outcome(result as SqlRow[], result.length);
    const header = result as ResultSetHeader;
    return outcome([], header.affectedRows, header.insertId);
  }

  /** The caller's `tx`: a mysql2 connection with an open transaction. */
  protected callerConnection(tx: unknown): PoolConnection {
    // A pool (or pool cluster) runs each query on whichever connection is free: never inside
    // your transaction.
    if (typeof (tx as { getConnection?: unknown } | null)?.getConnection === 'function') {
      throw new ValidationError('tx', `[@jobs/mysql] is a mysql2 pool, ${PASS_CONNECTION}`);
    }
    if (typeof (tx as Partial<PoolConnection> | null)?.query === 'function') {
      // A callback-style mysql2 connection (`mysql2`, not `mysql2/promise`) has `.promise()`,
      // which wraps the same session, so the open transaction is kept.
      const wrap = (tx as { promise?: unknown }).promise;
      return (typeof wrap === 'function' ? wrap.call(tx) : tx) as PoolConnection;
    }
    throw new ValidationError('tx', `[@jobs/mysql] is no mysql2 connection: ${PASS_CONNECTION}`);
  }

  /**
   * A caller's `tx` runs the operation only inside its transaction: a connection in autocommit
   * mode would commit the job on its own. mysql2 keeps no transaction status between queries,
   * so one `DO 0` reads it from the server's reply (its status flags: in a transaction, or
   * autocommit off) — one round trip more per enqueue with `tx`.
   */
  override async run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    if (options.tx !== undefined) {
      const connection = this.callerConnection(options.tx);
      const [reply] = await connection.query('DO 0');
      const status = (reply as ResultSetHeader).serverStatus ?? 0;
      if ((status & SERVER_STATUS_IN_TRANS) === 0 && (status & SERVER_STATUS_AUTOCOMMIT) !== 0) {
        throw new ValidationError(
          'tx',
          `[@jobs/mysql] is a connection outside a transaction (no beginTransaction()), ${PASS_CONNECTION}`,
        );
      }
    }
    return super.run(op, options);
  }

  protected async begin(
    session: BoundedSession<PoolConnection>,
    purpose?: RunOptions['purpose'],
  ): Promise<void> {
    // Only the store's own main pool has READ COMMITTED set on every session.
    if (!this.ownsPool || purpose === 'heartbeat') {
      await session.send({ sql: 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED', params: [] });
    }
    await session.send({ sql: 'START TRANSACTION', params: [] });
  }
}
