/**
 * Runs `@jobs/core/sql` operations on `pg`: each operation on one pooled connection (in a
 * transaction when asked), or on the caller's client inside its `BEGIN`; lease renewals on a
 * connection of their own; every statement with parameters as a named prepared statement, so
 * the hot path is parsed and planned once per connection. Every connect and statement has a
 * deadline (`withDeadline`): one that passes destroys its connection.
 */
import { createHash } from 'node:crypto';
import { ValidationError } from '@jobs/core';
import {
  type ConnectionTimeouts,
  DEFAULT_CONNECTION_TIMEOUTS,
  type Dialect,
  driveAsync,
  type Executor,
  type Operation,
  outcome,
  type Query,
  type RunOptions,
  withDeadline,
} from '@jobs/core/sql';
import pg from 'pg';

/** Anything with pg's `query`: a `pg.Client` or `pg.PoolClient` inside `BEGIN`. */
type Queryable = Pick<pg.ClientBase, 'query'>;

/**
 * Statement texts remembered (with a prepared name when they take parameters). The hot path
 * has a dozen; the bound keeps admin reads with many filter shapes from growing what every
 * connection keeps. Texts beyond it run unnamed.
 */
const MAX_STATEMENTS = 500;

const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED';

/** How long `close()` lets a connection say goodbye before it destroys the socket. */
const CLOSE_GRACE_MS = 1_000;

/**
 * Settings for connections the store opens: connect timeout, TCP keepalive, and the server's
 * own bounds on a statement and on a transaction left idle by a client that went away (its
 * locks are released then, even when the client's goodbye never arrives).
 */
export function connectionSettings(timeouts: ConnectionTimeouts): pg.ClientConfig {
  return {
    connectionTimeoutMillis: timeouts.connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: timeouts.keepAliveDelayMs,
    statement_timeout: timeouts.queryTimeoutMs,
    idle_in_transaction_session_timeout: timeouts.queryTimeoutMs,
  };
}

/** Destroys a client's socket: its pending queries fail at once, and the pool drops it. */
export function destroyConnection(client: Queryable): void {
  // A PoolClient is a Client at runtime; @types/pg only declares `connection` on Client.
  (client as Partial<pg.Client>).connection?.stream?.destroy();
}

/** The clients of `pool` that are open, kept so `close()` can destroy those that linger. */
function trackClients(pool: pg.Pool): Set<pg.PoolClient> {
  const open = new Set<pg.PoolClient>();
  pool.on('connect', (client) => open.add(client));
  pool.on('remove', (client) => open.delete(client));
  return open;
}

/**
 * Ends one of our pools within `CLOSE_GRACE_MS`: a connection whose server never answers the
 * goodbye (a silent network) would otherwise keep the process alive, and `pool.end()` waits for
 * connects under way (each ends by `connectTimeoutMs`).
 */
async function endPool(pool: pg.Pool, open: Set<pg.PoolClient>): Promise<void> {
  const until = Date.now() + CLOSE_GRACE_MS;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise((resolve) => {
    timer = setTimeout(resolve, CLOSE_GRACE_MS);
  });
  await Promise.race([pool.end().catch(() => {}), late]);
  clearTimeout(timer);
  while (open.size > 0 && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  for (const client of open) destroyConnection(client);
  open.clear();
}

export class PgExecutor implements Executor {
  private readonly statements = new Map<string, pg.QueryConfig>();
  private heartbeat: { pool: pg.Pool; open: Set<pg.PoolClient> } | null = null;
  private readonly open: Set<pg.PoolClient> | null;

  constructor(
    private readonly pool: pg.Pool,
    /** Settings of the store's own connections (the heartbeat's), timeouts included. */
    private readonly connection: pg.ClientConfig,
    ownsPool: boolean,
    private readonly dialect: Dialect,
    private readonly timeouts: ConnectionTimeouts = DEFAULT_CONNECTION_TIMEOUTS,
  ) {
    this.open = ownsPool ? trackClients(pool) : null;
  }

  async run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    if (options.tx !== undefined) {
      const tx = options.tx as Queryable | null;
      if (typeof tx?.query !== 'function') {
        throw new ValidationError(
          'tx',
          '[@jobs/postgres] expected a pg Client or PoolClient inside BEGIN',
        );
      }
      // The caller's connection and transaction: its deadlines are the caller's to set.
      return driveAsync(op, (query) => this.execute(tx, query, null));
    }
    const pool = options.purpose === 'heartbeat' ? this.heartbeatPool() : this.pool;
    // A migration may rightly run long (a big table, another process's migration first): no
    // deadline, and the server's bounds lifted for its transaction in the same round trip.
    const deadline = options.purpose === 'migrate' ? null : this.timeouts.queryTimeoutMs;
    return this.session(pool, deadline, options.transaction, (client) =>
      driveAsync(op, (query) => this.execute(client, query, deadline)),
    );
  }

  /**
   * `ctx.transaction`: `work` gets the transaction's pg `PoolClient` (statements it sends there
   * are the handler's own; the store's deadlines apply to the store's statements only).
   */
  transaction<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T> {
    const deadline = this.timeouts.queryTimeoutMs;
    return this.session(this.pool, deadline, true, (client) =>
      work(client, (op) => driveAsync(op, (query) => this.execute(client, query, deadline))),
    );
  }

  /** Runs `body` on a pooled connection, in a transaction when asked. */
  private async session<T>(
    pool: pg.Pool,
    deadline: number | null,
    transaction: boolean,
    body: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    const client = await withDeadline(
      pool.connect(),
      this.timeouts.connectTimeoutMs,
      'connectTimeoutMs',
      () => {},
      (late: pg.PoolClient) => late.release(),
    );
    // A connection that dies between two statements reports it as an 'error' event, which
    // would crash the process without a listener (the pool listens only while it is idle);
    // the next statement fails anyway.
    const ignore = (): void => {};
    client.on('error', ignore);
    const begin =
      deadline === null
        ? `${BEGIN}; SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0`
        : BEGIN;
    try {
      if (transaction) await this.query(client, { text: begin }, deadline);
      const result = await body(client);
      if (transaction) await this.query(client, { text: 'COMMIT' }, deadline);
      client.off('error', ignore);
      client.release();
      return result;
    } catch (error) {
      // The original error is what matters; the connection is discarded either way.
      if (transaction) {
        await this.query(client, { text: 'ROLLBACK' }, deadline).catch(() => {});
      }
      client.off('error', ignore);
      client.release(true);
      throw error;
    }
  }

  async close(): Promise<void> {
    const heartbeat = this.heartbeat;
    this.heartbeat = null;
    await Promise.all([
      heartbeat ? endPool(heartbeat.pool, heartbeat.open) : null,
      this.open ? endPool(this.pool, this.open) : null,
    ]);
  }

  private async execute(client: Queryable, query: Query, deadline: number | null) {
    const result = await this.query(client, this.prepared(query), deadline);
    return outcome(result.rows, result.rowCount ?? result.rows.length);
  }

  /** One statement; past `deadline` ms the connection is destroyed and the call fails. */
  private query(
    client: Queryable,
    config: pg.QueryConfig,
    deadline: number | null,
  ): Promise<pg.QueryResult> {
    const pending = client.query(config);
    if (deadline === null) return pending;
    return withDeadline(pending, deadline, 'queryTimeoutMs', () => destroyConnection(client));
  }

  /**
   * The query as pg runs it. Names come from the text, so stores sharing a pool (and so its
   * connections) never give one name to two texts.
   */
  private prepared(query: Query): pg.QueryConfig {
    let config = this.statements.get(query.sql);
    if (!config) {
      const text = this.dialect.placeholders(query.sql);
      config =
        query.params.length > 0
          ? { name: `jobs_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`, text }
          : { text };
      if (this.statements.size >= MAX_STATEMENTS) config = { text };
      else this.statements.set(query.sql, config);
    }
    return { ...config, values: query.params as unknown[] };
  }

  /**
   * Lease renewals get a connection of their own, so a heartbeat never queues behind a busy
   * pool (slow acquisitions, big batches, handlers holding connections): a late heartbeat is a
   * lost lease and a job run twice.
   */
  private heartbeatPool(): pg.Pool {
    if (!this.heartbeat) {
      const pool = new pg.Pool({ ...this.connection, max: 1, idleTimeoutMillis: 60_000 });
      pool.on('error', () => {
        // An idle heartbeat connection died; the next renewal opens a new one.
      });
      this.heartbeat = { pool, open: trackClients(pool) };
    }
    return this.heartbeat.pool;
  }
}
