/**
 * Runs `@jobs/core/sql` operations on a mysql2 promise pool: every statement of one operation
 * on one pooled connection (named locks are per session), in a READ COMMITTED transaction when
 * asked, or on the caller's connection inside its open transaction. Rows are read with
 * `dateStrings` whatever the pool's settings (the dialect reads times as text anyway). Lease
 * renewals run on a connection of their own, and every connect and statement has a deadline
 * (`withDeadline`): one that passes destroys its connection.
 */
import { ValidationError } from '@jobs/core';
import {
  type ConnectionTimeouts,
  DEFAULT_CONNECTION_TIMEOUTS,
  driveAsync,
  type Executor,
  type Operation,
  outcome,
  type Query,
  type QueryOutcome,
  type RunOptions,
  type SqlRow,
  withDeadline,
} from '@jobs/core/sql';
import type { Pool, PoolConnection, ResultSetHeader } from 'mysql2/promise';

/** A mysql2 promise connection (or pool) statements can run on. */
type Queryable = Pick<PoolConnection, 'query'>;
/** Runs one statement of an operation on its connection. */
type Statement = (query: Query) => Promise<QueryOutcome>;

/** How long `close()` lets connections say goodbye before it destroys their sockets. */
const CLOSE_GRACE_MS = 1_000;

async function execute(connection: Queryable, query: Query): Promise<QueryOutcome> {
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
function asConnection(tx: unknown): Queryable {
  if (typeof tx === 'object' && tx !== null && typeof (tx as Queryable).query === 'function') {
    // A callback-style mysql2 connection (`mysql2`, not `mysql2/promise`) has `.promise()`,
    // which wraps the same session, so the open transaction is kept.
    const wrap = (tx as { promise?: unknown }).promise;
    if (typeof wrap === 'function') return wrap.call(tx) as Queryable;
    return tx as Queryable;
  }
  throw new ValidationError(
    'tx',
    'must be a mysql2 connection with an open transaction (pool.getConnection() then beginTransaction())',
  );
}

/** A core (callback) mysql2 connection, as far as destroying its socket goes. */
interface CoreConnection {
  stream?: { destroy(): void; once(event: 'close', listener: () => void): unknown };
}

/**
 * Drops a connection from its pool and destroys its socket at once: mysql2's own `destroy()`
 * only half-closes it, which never ends on a silent network.
 */
function destroyConnection(connection: PoolConnection): void {
  connection.destroy();
  (connection.connection as unknown as CoreConnection).stream?.destroy();
}

/** The open connections of `pool`, kept so closing it can destroy those that linger. */
export function trackConnections(pool: Pool): Set<CoreConnection> {
  const open = new Set<CoreConnection>();
  pool.on('connection', (connection) => {
    // The event hands out the core connection (mysql2 emits it before wrapping).
    const core = connection as unknown as CoreConnection;
    open.add(core);
    core.stream?.once('close', () => open.delete(core));
  });
  return open;
}

/**
 * Ends `pool` within `CLOSE_GRACE_MS`: mysql2 waits for the server to answer each connection's
 * QUIT, which never happens on a silent network and would keep the process alive. Errors of
 * the goodbye (a connect that timed out meanwhile) do not matter: every socket is gone after.
 */
export async function endPool(pool: Pool, open: Set<CoreConnection>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, CLOSE_GRACE_MS);
  });
  await Promise.race([pool.end().catch(() => {}), late]);
  clearTimeout(timer);
  for (const connection of open) connection.stream?.destroy();
  open.clear();
}

export class MysqlExecutor implements Executor {
  /** Awaited before every operation (the store's server check). */
  beforeRun: () => Promise<void> = async () => {};
  private heartbeat: { pool: Pool; open: Set<CoreConnection> } | null = null;

  /**
   * `ownsPool`: the store created the pool and set READ COMMITTED on each of its sessions; on a
   * caller's pool each transaction sets it for itself (`SET TRANSACTION`: that one only).
   * `openHeartbeatPool` opens the one-connection pool lease renewals run on, on first use.
   */
  constructor(
    private readonly pool: Pool,
    private readonly ownsPool: boolean,
    private readonly openHeartbeatPool: (() => Pool) | null = null,
    private readonly timeouts: ConnectionTimeouts = DEFAULT_CONNECTION_TIMEOUTS,
  ) {}

  async run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    await this.beforeRun();
    // The caller owns the transaction (and its connection's deadlines): no commit or rollback.
    if (options.tx !== undefined) {
      const connection = asConnection(options.tx);
      return driveAsync(op, (query) => execute(connection, query));
    }
    const heartbeat = options.purpose === 'heartbeat' && this.openHeartbeatPool !== null;
    const pool = heartbeat ? this.heartbeatPool() : this.pool;
    // A migration may rightly run long (a big table, another process's migration lock).
    const deadline = options.purpose === 'migrate' ? null : this.timeouts.queryTimeoutMs;
    return this.onConnection(pool, deadline, async (statement, broken) => {
      if (!options.transaction) return driveAsync(op, statement);
      // Only the store's own main pool has READ COMMITTED set on every session.
      if (!this.ownsPool || pool !== this.pool) {
        await statement({ sql: 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED', params: [] });
      }
      await statement({ sql: 'START TRANSACTION', params: [] });
      try {
        let open = true; // an operation may end its transaction itself (`Dialect.acquire`)
        const result = await driveAsync(op, (query) => {
          if (query.sql === 'COMMIT') open = false;
          return statement(query);
        });
        if (open) await statement({ sql: 'COMMIT', params: [] });
        return result;
      } catch (error) {
        // A broken connection cannot roll back (the server does on disconnect): drop it from
        // the pool, and with it any named lock, and report the error that ended the operation.
        await statement({ sql: 'ROLLBACK', params: [] }).catch(broken);
        throw error;
      }
    });
  }

  /**
   * `ctx.transaction`: `work` gets the transaction's mysql2 `PoolConnection` (READ COMMITTED);
   * the store's deadlines apply to the store's statements only.
   */
  async transaction<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T> {
    await this.beforeRun();
    const deadline = this.timeouts.queryTimeoutMs;
    const connection = await withDeadline(
      this.pool.getConnection(),
      this.timeouts.connectTimeoutMs,
      'connectTimeoutMs',
      () => {},
      (late: PoolConnection) => late.release(),
    );
    const statement: Statement = (query) =>
      withDeadline(execute(connection, query), deadline, 'queryTimeoutMs', () =>
        destroyConnection(connection),
      );
    let healthy = true;
    try {
      await statement({ sql: 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED', params: [] });
      await statement({ sql: 'START TRANSACTION', params: [] });
      try {
        const result = await work(connection, (op) => driveAsync(op, statement));
        await statement({ sql: 'COMMIT', params: [] });
        return result;
      } catch (error) {
        await statement({ sql: 'ROLLBACK', params: [] }).catch(() => {
          healthy = false;
        });
        throw error;
      }
    } finally {
      if (healthy) connection.release();
      else destroyConnection(connection);
    }
  }

  /** Rows of one read on a pooled connection, with the deadlines (the store's server check). */
  read(sql: string): Promise<SqlRow[]> {
    return this.onConnection(this.pool, this.timeouts.queryTimeoutMs, async (statement) => {
      return (await statement({ sql, params: [] })).rows;
    });
  }

  /** Ends the heartbeat pool; the main pool is the store's to end (`MysqlJobStore.close`). */
  async close(): Promise<void> {
    const heartbeat = this.heartbeat;
    this.heartbeat = null;
    if (heartbeat) await endPool(heartbeat.pool, heartbeat.open);
  }

  /**
   * Runs `work` on a connection of `pool`, taken within `connectTimeoutMs`, each statement
   * within `deadline` ms (none when null); a connection that missed a deadline or could not
   * roll back (`broken`) is destroyed instead of going back to the pool.
   */
  private async onConnection<T>(
    pool: Pool,
    deadline: number | null,
    work: (statement: Statement, broken: () => void) => Promise<T>,
  ): Promise<T> {
    const connection = await withDeadline(
      pool.getConnection(),
      this.timeouts.connectTimeoutMs,
      'connectTimeoutMs',
      () => {},
      (late: PoolConnection) => late.release(),
    );
    let healthy = true;
    const broken = (): void => {
      healthy = false;
    };
    const statement: Statement = (query) =>
      deadline === null
        ? execute(connection, query)
        : withDeadline(execute(connection, query), deadline, 'queryTimeoutMs', () => {
            broken();
            destroyConnection(connection);
          });
    try {
      return await work(statement, broken);
    } finally {
      if (healthy) connection.release();
      else destroyConnection(connection);
    }
  }

  /**
   * Lease renewals get a connection of their own, so a heartbeat never queues behind a busy
   * pool (slow acquisitions, handlers holding connections): a late heartbeat is a lost lease
   * and a job run twice.
   */
  private heartbeatPool(): Pool {
    if (!this.heartbeat) {
      const pool = (this.openHeartbeatPool as () => Pool)();
      this.heartbeat = { pool, open: trackConnections(pool) };
    }
    return this.heartbeat.pool;
  }
}
