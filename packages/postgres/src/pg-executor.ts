/**
 * Runs `@jobs/core/sql` operations on `pg` (core's `NetworkExecutor` does the sessions,
 * transactions and deadlines): connections from the store's pool, or the caller's client
 * inside its `BEGIN`; lease renewals on a pool of one connection of their own; every statement
 * with parameters as a named prepared statement, so the hot path is parsed and planned once
 * per connection.
 */
import { createHash } from 'node:crypto';
import { ValidationError } from '@jobs/core';
import {
  type BoundedSession,
  type ConnectionTimeouts,
  DEFAULT_CONNECTION_TIMEOUTS,
  type Dialect,
  destroySocket,
  endWithin,
  LazyPool,
  NetworkExecutor,
  OpenConnections,
  outcome,
  type Query,
  type QueryOutcome,
  type RunOptions,
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
/** A migration may rightly run long: the server's bounds are lifted for its transaction. */
const BEGIN_UNBOUNDED = `${BEGIN}; SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0`;

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

/** The clients of `pool` that are open, kept so closing it can destroy those that linger. */
function trackClients(pool: pg.Pool): OpenConnections<pg.PoolClient> {
  const open = new OpenConnections<pg.PoolClient>(destroySocket);
  pool.on('connect', (client) => open.add(client));
  pool.on('remove', (client) => open.delete(client));
  return open;
}

/**
 * A connection that dies between two statements reports it as an 'error' event, which would
 * crash the process without a listener (the pool listens only while it is idle); the next
 * statement fails anyway.
 */
const ignoreError = (): void => {};

export class PgExecutor extends NetworkExecutor<pg.PoolClient> {
  private readonly statements = new Map<string, pg.QueryConfig>();
  /**
   * Lease renewals get a connection of their own, so a heartbeat never queues behind a busy
   * pool (slow acquisitions, big batches, handlers holding connections): a late heartbeat is a
   * lost lease and a job run twice.
   */
  private readonly heartbeat: LazyPool<pg.Pool, pg.PoolClient>;
  private readonly open: OpenConnections<pg.PoolClient> | null;

  constructor(
    private readonly pool: pg.Pool,
    /** Settings of the store's own connections (the heartbeat's), timeouts included. */
    connection: pg.ClientConfig,
    ownsPool: boolean,
    private readonly dialect: Dialect,
    timeouts: ConnectionTimeouts = DEFAULT_CONNECTION_TIMEOUTS,
  ) {
    super(timeouts);
    this.open = ownsPool ? trackClients(pool) : null;
    this.heartbeat = new LazyPool(() => {
      const heartbeat = new pg.Pool({ ...connection, max: 1, idleTimeoutMillis: 60_000 });
      // An idle heartbeat connection died; the next renewal opens a new one.
      heartbeat.on('error', () => {});
      return heartbeat;
    }, trackClients);
  }

  async close(): Promise<void> {
    await Promise.all([
      this.heartbeat.close(),
      this.open && endWithin(() => this.pool.end(), this.open),
    ]);
  }

  protected async take(purpose: 'main' | 'heartbeat'): Promise<pg.PoolClient> {
    const client = await (purpose === 'heartbeat' ? this.heartbeat.get() : this.pool).connect();
    client.on('error', ignoreError);
    return client;
  }

  protected release(client: pg.PoolClient, broken: boolean): void {
    client.off('error', ignoreError);
    client.release(broken);
  }

  /** Destroys the client's socket: its pending queries fail at once. */
  protected destroy(client: pg.PoolClient): void {
    destroySocket(client);
  }

  protected async execute(client: Queryable, query: Query): Promise<QueryOutcome> {
    const result = await client.query(this.prepared(query));
    return outcome(result.rows, result.rowCount ?? result.rows.length);
  }

  protected callerConnection(tx: unknown): pg.PoolClient {
    if (typeof (tx as Queryable | null)?.query === 'function') return tx as pg.PoolClient;
    throw new ValidationError(
      'tx',
      '[@jobs/postgres] expected a pg Client or PoolClient inside BEGIN',
    );
  }

  protected async begin(
    session: BoundedSession<pg.PoolClient>,
    purpose?: RunOptions['purpose'],
  ): Promise<void> {
    const text = purpose === 'migrate' ? BEGIN_UNBOUNDED : BEGIN;
    await session.bound(session.connection.query(text));
  }

  /**
   * The query as pg runs it. Names come from the text, so stores sharing a pool (and so its
   * connections) never give one name to two texts.
   */
  private prepared(query: Query): pg.QueryConfig {
    // `pg` types array rows apart (`QueryArrayConfig`); the executor reads rows either way.
    const rowMode = query.arrayRows ? 'array' : undefined;
    if (query.planEachTime) {
      const text = this.dialect.placeholders(query.sql);
      return { text, values: query.params as unknown[], rowMode } as pg.QueryConfig;
    }
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
    return { ...config, values: query.params as unknown[], rowMode } as pg.QueryConfig;
  }
}
