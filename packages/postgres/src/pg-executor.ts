/**
 * Runs `@jobs/core/sql` operations on `pg` (core's `NetworkExecutor` does the sessions,
 * transactions and deadlines): connections from the store's pool, or the caller's client
 * inside its `BEGIN`; lease renewals on a pool of one connection of their own; every statement
 * with parameters as a named prepared statement, so the hot path is parsed and planned once
 * per connection — unless the store runs behind a transaction pooler (`pooler: 'transaction'`),
 * where a prepared statement's server connection is not the next statement's.
 *
 * The session's settings (the server's own bounds `statement_timeout` and
 * `idle_in_transaction_session_timeout`, and `jit`: see `sessionSettings`) are never startup
 * parameters, which a stock PgBouncer refuses: the store `SET`s them once on each connection
 * it opens, or, behind a transaction pooler (no session survives a transaction), `SET LOCAL`s
 * them in every transaction and runs every call in one.
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
  type Operation,
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

/**
 * What sits between the store and PostgreSQL: `'transaction'` for a pooler in transaction mode
 * (PgBouncer's `pool_mode = transaction`: no named prepared statements, no session settings,
 * every call in a transaction that `SET LOCAL`s the server's bounds, no LISTEN through it);
 * `'session'` for one in session mode (or none at all): a connection is a session.
 */
export type Pooler = 'transaction' | 'session';

/**
 * The settings of a session of the store's own, as `SET` statements (`scope` `'LOCAL'` for the
 * current transaction only):
 * - the server's own bounds on a statement and on a transaction left idle by a client that
 *   went away (its locks are released then, even when the client's goodbye never arrives);
 *   `ms` 0 lifts them;
 * - no JIT compilation. The planner cannot read an acquisition's batch size (see the
 *   PostgreSQL dialect), so its cost estimate grows with the backlog and passes
 *   `jit_above_cost` on a large analysed table: every acquisition was then compiled first,
 *   ~450 ms for a batch that runs in ~10 ms at 200,000 waiting jobs.
 */
export function sessionSettings(ms: number, scope: 'SESSION' | 'LOCAL'): string {
  const bound = Math.max(0, Math.trunc(ms));
  return `SET ${scope} statement_timeout = ${bound}; SET ${scope} idle_in_transaction_session_timeout = ${bound}; SET ${scope} jit = off`;
}

/**
 * Settings for connections the store opens: connect timeout and TCP keepalive. The session's
 * settings are no startup parameters (a stock PgBouncer refuses the connection): see
 * `sessionSettings`.
 */
export function connectionSettings(timeouts: ConnectionTimeouts): pg.ClientConfig {
  return {
    connectionTimeoutMillis: timeouts.connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: timeouts.keepAliveDelayMs,
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

/** What to pass as `tx` instead, for the messages that refuse one. */
const PASS_CLIENT =
  "so the job would commit on its own, outside your transaction: pass the client of your transaction (const client = await pool.connect(); await client.query('BEGIN'); … { tx: client })";

/** pg's view of a client's session: its transaction status and its queued queries. */
interface ClientState {
  /**
   * pg 8.21+: `I` idle, `T` in a transaction, `E` in a failed one; null before connecting (and
   * always on pg-native).
   */
  getTransactionStatus?: () => string | null;
  _connected?: boolean;
  _connecting?: boolean;
  _queryQueue?: unknown[];
  _activeQuery?: unknown;
  /**
   * False from a query's send until the server's ReadyForQuery: pg rejects a failed query's
   * promise on the error, before the ReadyForQuery that moves the status to `E` arrives.
   */
  readyForQuery?: boolean;
}

/** Throws a `ValidationError` unless `client` is inside a transaction block (see `run`). */
async function assertInTransaction(client: pg.PoolClient): Promise<void> {
  const state = client as unknown as ClientState;
  const pending =
    (state._queryQueue?.length ?? 0) > 0 ||
    (state._activeQuery ?? null) !== null ||
    state.readyForQuery === false;
  const status =
    typeof state.getTransactionStatus === 'function' ? state.getTransactionStatus() : undefined;
  if (status === 'T' && !pending) return;
  if (status === 'E' && !pending) {
    throw new ValidationError(
      'tx',
      '[@jobs/postgres] its transaction failed (a statement in it raised an error): roll it back, then begin again',
    );
  }
  if (status === 'I' && !pending) {
    throw new ValidationError(
      'tx',
      `[@jobs/postgres] is a client outside a transaction (no BEGIN), ${PASS_CLIENT}`,
    );
  }
  // A JS client that never connected would hold the query below until someone connects it.
  if (state._connected === false && !state._connecting) {
    throw new ValidationError(
      'tx',
      `[@jobs/postgres] is a client that is not connected: ${PASS_CLIENT}`,
    );
  }
  // Queued queries may begin or end the transaction first, or pg keeps no status (pg-native,
  // pg before 8.21): ask the server.
  const savepoint = client.query('SAVEPOINT jobs_tx_check');
  const release = client.query('RELEASE SAVEPOINT jobs_tx_check');
  try {
    await savepoint;
  } catch (error) {
    await release.catch(() => {});
    // 25P02 in_failed_sql_transaction: a statement of the transaction raised an error.
    if ((error as { code?: unknown }).code === '25P02') {
      throw new ValidationError(
        'tx',
        '[@jobs/postgres] its transaction failed (a statement in it raised an error): roll it back, then begin again',
        { cause: error },
      );
    }
    // 25P01 no_active_sql_transaction: SAVEPOINT outside a transaction block.
    if ((error as { code?: unknown }).code === '25P01') {
      throw new ValidationError(
        'tx',
        `[@jobs/postgres] is a client outside a transaction (no BEGIN), ${PASS_CLIENT}`,
        { cause: error },
      );
    }
    throw error;
  }
  await release;
}

export class PgExecutor extends NetworkExecutor<pg.PoolClient> {
  private readonly statements = new Map<string, pg.QueryConfig>();
  /**
   * Lease renewals get a connection of their own, so a heartbeat never queues behind a busy
   * pool (slow acquisitions, big batches, handlers holding connections): a late heartbeat is a
   * lost lease and a job run twice.
   */
  private readonly heartbeat: LazyPool<pg.Pool, pg.PoolClient>;
  private readonly open: OpenConnections<pg.PoolClient> | null;
  /** Behind a transaction pooler: no names, `SET LOCAL` in every transaction, every call in one. */
  private readonly transactionPooler: boolean;
  /** Connections of the store's own that have their session's settings `SET` already. */
  private readonly bounded = new WeakSet<pg.ClientBase>();
  private readonly ownsPool: boolean;
  private readonly begins: { bounded: string; unbounded: string };

  constructor(
    private readonly pool: pg.Pool,
    /** Settings of the store's own connections (the heartbeat's). */
    connection: pg.ClientConfig,
    ownsPool: boolean,
    private readonly dialect: Dialect,
    timeouts: ConnectionTimeouts = DEFAULT_CONNECTION_TIMEOUTS,
    pooler: Pooler = 'session',
  ) {
    super(timeouts);
    this.ownsPool = ownsPool;
    this.transactionPooler = pooler === 'transaction';
    this.begins = {
      bounded: this.transactionPooler
        ? `${BEGIN}; ${sessionSettings(timeouts.queryTimeoutMs, 'LOCAL')}`
        : BEGIN,
      // A migration may rightly run long: the server's bounds are lifted for its transaction.
      unbounded: `${BEGIN}; ${sessionSettings(0, 'LOCAL')}`,
    };
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
    // A connection of the store's own is its session (no transaction pooler): its settings are
    // set once. Your pool's sessions are left as you made them.
    if (
      !this.transactionPooler &&
      (purpose === 'heartbeat' || this.ownsPool) &&
      !this.bounded.has(client)
    ) {
      try {
        await client.query(sessionSettings(this.timeouts.queryTimeoutMs, 'SESSION'));
      } catch (error) {
        this.release(client, true);
        throw error;
      }
      this.bounded.add(client);
    }
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
    const given = tx as Partial<pg.Pool> | null;
    // A pool runs each query on whichever connection is free: never inside your transaction.
    if (typeof given?.connect === 'function' && typeof given.totalCount === 'number') {
      throw new ValidationError('tx', `[@jobs/postgres] is a pg Pool, ${PASS_CLIENT}`);
    }
    if (typeof given?.query === 'function') return tx as pg.PoolClient;
    throw new ValidationError('tx', `[@jobs/postgres] is no pg client: ${PASS_CLIENT}`);
  }

  /**
   * A caller's `tx` runs the operation only inside its transaction: a client without `BEGIN`
   * would commit the job on its own. pg keeps the transaction status of the last ReadyForQuery
   * (`getTransactionStatus()`, pg 8.21+), so the check costs no round trip. When queries are
   * still queued on the client (a `BEGIN` or `COMMIT` not awaited yet), or pg keeps no status
   * (pg-native, older pg), a `SAVEPOINT` (refused outside a transaction block) asks the server.
   */
  override async run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    if (options.tx !== undefined) await assertInTransaction(this.callerConnection(options.tx));
    // Behind a transaction pooler the server's bounds hold only inside a transaction that sets
    // them: every call of the store's own runs in one (two more round trips for a lone statement).
    if (this.transactionPooler && options.tx === undefined && !options.transaction) {
      return super.run(op, { ...options, transaction: true });
    }
    return super.run(op, options);
  }

  protected async begin(
    session: BoundedSession<pg.PoolClient>,
    purpose?: RunOptions['purpose'],
  ): Promise<void> {
    const text = purpose === 'migrate' ? this.begins.unbounded : this.begins.bounded;
    await session.bound(session.connection.query(text));
  }

  /**
   * The query as pg runs it. Names come from the text, so stores sharing a pool (and so its
   * connections) never give one name to two texts.
   */
  private prepared(query: Query): pg.QueryConfig {
    // `pg` types array rows apart (`QueryArrayConfig`); the executor reads rows either way.
    const rowMode = query.arrayRows ? 'array' : undefined;
    // A transaction pooler hands each transaction whichever server connection is free: a name
    // prepared on one is unknown on the next (PgBouncer before 1.21, or without
    // `max_prepared_statements`).
    if (query.planEachTime || this.transactionPooler) {
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
