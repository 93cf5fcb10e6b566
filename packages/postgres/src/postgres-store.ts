/**
 * The PostgreSQL store: `PostgresJobStore` (the SQL core's store on the PostgreSQL dialect, its
 * pool, its notifications), the executor that runs the core's operations on `pg`, and the
 * wake-up targeting that notifies a few idle nodes that can run a new job, not all.
 *
 * Each section below keeps its own header.
 */

import { createHash, randomBytes } from 'node:crypto';
import {
  type AcquireRequest,
  assertIdentifier,
  type ConnectionReservation,
  type EnqueueResult,
  type Job,
  type JobCompletion,
  StoreError,
  ValidationError,
} from '@jobs/core';
import {
  type BoundedSession,
  type ConnectionTimeouts,
  checkStoreOptions,
  DEFAULT_CONNECTION_TIMEOUTS,
  DEFAULT_POOL_SIZE,
  type Dialect,
  destroySocket,
  endWithin,
  LazyPool,
  NETWORK_TIMEOUT_OPTIONS,
  NetworkExecutor,
  type NetworkTimeoutOptions,
  NotifyingSqlJobStore,
  OpenConnections,
  type Operation,
  outcome,
  PoolSizing,
  PROBE_PAYLOAD,
  postgresDialect,
  type Query,
  type QueryOutcome,
  type ReconnectingListener,
  type RunOptions,
  resolveConnectionTimeouts,
  type SqlEnv,
} from '@jobs/core/sql';
import type { Client, ClientConfig, Pool } from 'pg';
import pg from 'pg';
import { notificationListener } from './listener.js';

// ─── PostgresJobStore ────────────────────────────────────────────────────────────────────────────

/** How long a test notification may take to come back before the listener is called deaf. */
const PROBE_MS = 3_000;

const OPTION_KEYS = [
  'connectionString',
  'pool',
  'max',
  'schema',
  'notifyChannel',
  'pooler',
  'listenConnectionString',
  'onWarning',
  'wakeUps',
];

/**
 * The store's options; `connectTimeoutMs`, `queryTimeoutMs` and `keepAliveDelayMs` bound its
 * calls (`NetworkTimeoutOptions`). On your own `pool`, set pg's `connectionTimeoutMillis` too.
 */
export interface PostgresJobStoreOptions extends NetworkTimeoutOptions {
  /** A `postgres://` URL; the store opens (and closes) its own pool. */
  connectionString?: string;
  /** Your pool; the store uses it and leaves closing it to you. */
  pool?: Pool;
  /**
   * Pool size when the store opens its own pool. Default: 10, grown when an engine starts to
   * what its engines may use at once (`concurrency + 6` each: every handler in
   * `ctx.transaction`, plus the engine's own calls). A size given here is kept; an engine that
   * may need more logs one warning naming both numbers.
   */
  max?: number;
  /** Schema holding the tables. Default `jobs`. */
  schema?: string;
  /** LISTEN/NOTIFY channel. Default `<schema>_jobs`. */
  notifyChannel?: string;
  /**
   * What sits between the store and PostgreSQL. `'transaction'`: a pooler in transaction mode
   * (PgBouncer's `pool_mode = transaction`): the store prepares no named statements, keeps no
   * session state (the server's timeouts are `SET LOCAL` in every transaction, and every call
   * runs in one) and LISTENs only on `listenConnectionString` — without it, engines poll
   * (a warning says so). `'session'` (default): a direct connection, or a pooler in session mode.
   */
  pooler?: Pooler;
  /**
   * A `postgres://` URL for the LISTEN connection, straight to PostgreSQL (not through a
   * transaction pooler, which hands the LISTEN's server connection to someone else: nothing is
   * heard). Default: the pool's connection settings.
   */
  listenConnectionString?: string;
  /**
   * Where the store's warnings go (a listener that hears nothing, acquisitions slowed by a long
   * transaction…). Default `console.warn`.
   */
  onWarning?: (message: string) => void;
  /**
   * Whom an enqueue wakes. `'targeted'` (default): for each (type, queue, tenant) of the jobs, a
   * few idle nodes that run such jobs — as many as jobs, at most 8 — or, when no idle node runs
   * them, every node; an idle node is one whose last acquisition came back short, and it names
   * what it acquires (handler types, queues, tenants) in a 128-bit Bloom filter, so mixed pools
   * are safe. A filter's false positive (rare: see `docs/deployment.md`) wakes a node that
   * cannot run the job, which then starts at the latest on the next poll (`pollIntervalMs`) of
   * a node that runs it. An enqueue inside your transaction, and jobs given back or recovered,
   * wake every node (the NOTIFY in the transaction does not know the jobs); so does a wake-up
   * for more than 16 distinct (type, queue, tenant). `'broadcast'`: every enqueue wakes every
   * listening node.
   */
  wakeUps?: WakeUps;
}

/** Whom an enqueue wakes: a few idle nodes, or every node. */
export type WakeUps = 'targeted' | 'broadcast';

/** How long `close()` waits for a wake-up under way. */
const WAKE_DRAIN_MS = 1_000;

/** pg's pool keeps its settings, `max` filled in, as `options`; it reads `max` on each connect. */
function poolOptions(pool: Pool): { max: number } {
  return (pool as unknown as { options: { max: number } }).options;
}

/**
 * A `JobStore` on PostgreSQL (10+) through `pg`: batch acquisition with `FOR UPDATE SKIP LOCKED`,
 * fencing tokens, leases on the database clock, wake-ups by LISTEN/NOTIFY (to a few idle nodes
 * that run the jobs, after commit; see `postgres-store.ts`), and enqueue inside your own
 * transaction. The SQL is
 * `@jobs/core/sql`'s PostgreSQL dialect; this package adds the pools, prepared statements and
 * the listening connection. Tables: `<schema>.jobs`, `<schema>.schedules`,
 * `<schema>.jobs_migrations`.
 *
 * @example
 * import { JobEngine } from '@jobs/core';
 * import { PostgresJobStore } from '@jobs/postgres';
 *
 * const store = new PostgresJobStore({ connectionString: process.env.DATABASE_URL });
 * await store.migrate();
 * const engine = new JobEngine({ store, handlers: { email: async (job) => send(job.payload) } });
 * await engine.start();
 *
 * // enqueue inside your transaction: the job exists only if you commit
 * const client = await pool.connect();
 * await client.query('BEGIN');
 * await client.query('INSERT INTO orders ...');
 * await engine.enqueue('email', { order: 1 }, { tx: client });
 * await client.query('COMMIT');
 */
export class PostgresJobStore extends NotifyingSqlJobStore {
  /** The validated schema name. */
  readonly schema: string;
  /** The LISTEN/NOTIFY channel. */
  readonly channel: string;
  /** The pool the store queries through. */
  readonly pool: Pool;
  protected readonly notifier: ReconnectingListener<Client>;
  private readonly poolSizing: PoolSizing;
  private readonly warn: (message: string) => void;
  private probed = false;
  /** Whom wake-ups go to (see `postgres-store.ts`). */
  readonly wakeUps: WakeUps;
  private readonly targets: WakeTargets;
  /** Wake-ups after enqueues that committed, coalesced. */
  private readonly wakes: CoalescedWakes;
  /** The context of enqueues outside the caller's transaction: no NOTIFY in them. */
  private readonly quietContext: SqlEnv;
  /** Each distinct acquisition request here, and whether its last acquisition came back short. */
  private readonly requests = new Map<string, { request: AcquireRequest; room: boolean }>();
  /** Subscribers now (engines, `engine.result` waits). */
  private subscribers = 0;
  /** The filter the listening connection's name carries, null while busy (`postgres-store.ts`). */
  private named: string | null = null;

  constructor(options: PostgresJobStoreOptions) {
    checkStoreOptions(options, '@jobs/postgres', [...OPTION_KEYS, ...NETWORK_TIMEOUT_OPTIONS], {
      oneOf: ['connectionString', 'pool'],
      positiveIntegers: ['max'],
    });
    const pooler = options.pooler ?? 'session';
    if (pooler !== 'session' && pooler !== 'transaction') {
      throw new ValidationError(
        'pooler',
        `[@jobs/postgres] must be 'transaction' (a pooler in transaction mode) or 'session' (a direct connection, or a pooler in session mode), not ${JSON.stringify(pooler)}`,
      );
    }
    const warn = options.onWarning ?? ((message: string) => console.warn(message));
    // LISTEN through a transaction pooler hears nothing: without a direct URL, engines poll.
    const listens = pooler === 'session' || options.listenConnectionString !== undefined;
    if (!listens) {
      warn(
        "[@jobs/postgres] pooler: 'transaction' without listenConnectionString: LISTEN through a transaction pooler hears no notifications, so engines poll for new jobs (pollIntervalMs). Pass listenConnectionString, a URL straight to PostgreSQL, for wake-ups.",
      );
    }
    const timeouts = resolveConnectionTimeouts(options, '@jobs/postgres');
    const settings = connectionSettings(timeouts);
    const schema = assertIdentifier(options.schema ?? 'jobs', 'schema', { max: 48 });
    const channel = assertIdentifier(options.notifyChannel ?? `${schema}_jobs`, 'notifyChannel', {
      max: 63,
    });
    const pool =
      options.pool ??
      new pg.Pool({
        connectionString: options.connectionString,
        max: options.max ?? DEFAULT_POOL_SIZE,
        ...settings,
      });
    // A pool emits 'error' when an idle client dies (server restart); without a listener that
    // would crash the process. The next query simply gets a fresh connection.
    if (!options.pool) pool.on('error', () => {});
    // The pool's own settings (pg keeps them as `options`), with the store's timeouts, open
    // the extra connections (heartbeat, LISTEN): they are the store's even on your pool.
    const connection = {
      ...(pool as unknown as { options: ClientConfig }).options,
      ...settings,
    };
    const wakeUps = options.wakeUps ?? 'targeted';
    if (wakeUps !== 'targeted' && wakeUps !== 'broadcast') {
      throw new ValidationError(
        'wakeUps',
        `[@jobs/postgres] must be 'targeted' (a few idle nodes) or 'broadcast' (every node), not ${JSON.stringify(wakeUps)}`,
      );
    }
    const targets = new WakeTargets(channel);
    const dialect = postgresDialect({
      tablePrefix: '',
      schema,
      notifyChannel: channel,
      onSlowWalks: warn,
    });
    super({
      label: '@jobs/postgres',
      name: 'postgres',
      dialect,
      executor: new PgExecutor(pool, connection, !options.pool, dialect, timeouts, pooler),
      capabilities: {
        notifications: listens,
        transactionalEnqueue: true,
        multiProcess: true,
        // Completions beside acquisitions, on another pooled connection (not one fused call).
        concurrentCalls: poolOptions(pool).max > 1,
      },
      // In the enqueuing transaction (yours), or giving jobs back: every node.
      notify: dialect.wakeQuery?.(channel),
    });
    this.wakeUps = wakeUps;
    this.targets = targets;
    this.quietContext = { ...this.context, notify: null };
    // On the store's own connection (the lease renewals'), not a pooled one: a wake-up sent on
    // the pool while the next enqueue runs moves that enqueue to another pooled connection,
    // and alternating connections cost a bulk enqueue ~18 % (batches of 5,000, measured); on a
    // connection of its own, ~3 %. A renewal waits behind at most one wake-up (coalesced: one
    // in flight), a statement of a millisecond or two.
    this.wakes = new CoalescedWakes((combinations) => {
      const query =
        wakeUps === 'targeted' && combinations !== null
          ? targets.notifyQuery(combinations, true)
          : { sql: "SELECT pg_notify(?, '')", params: [channel] };
      return this.closed
        ? Promise.resolve()
        : this.run(
            'wake',
            function* () {
              yield query;
            },
            { transaction: false, purpose: 'heartbeat' },
          );
    });
    this.schema = schema;
    this.channel = channel;
    this.pool = pool;
    this.warn = warn;
    const listenConnection: ClientConfig =
      options.listenConnectionString === undefined
        ? connection
        : { ...settings, connectionString: options.listenConnectionString };
    this.notifier =
      wakeUps === 'targeted'
        ? notificationListener(
            listenConnection,
            [channel, targets.ownChannel],
            timeouts.queryTimeoutMs,
            () => targets.applicationName(this.named),
          )
        : notificationListener(listenConnection, channel, timeouts.queryTimeoutMs);
    // Lease renewals and LISTEN have connections of their own: the pool serves the engines' calls.
    this.poolSizing = new PoolSizing({
      size: () => poolOptions(pool).max,
      own: 0,
      ...(options.pool || options.max !== undefined
        ? { sizeOption: options.pool ? "your pool's `max`" : '`max`' }
        : {
            sizeOption: '`max`',
            resize: (size: number) => {
              poolOptions(pool).max = size;
            },
          }),
    });
  }

  /** Enqueues outside the caller's transaction send no NOTIFY: they wake after commit. */
  protected override enqueueEnv(inCallerTx: boolean): SqlEnv {
    return inCallerTx ? this.context : this.quietContext;
  }

  /** Wakes nodes for the jobs an enqueue created, coalesced with other enqueues' wake-ups. */
  protected override enqueueCommitted(results: readonly EnqueueResult[]): void {
    this.wakes.request(results.filter((r) => r.created).map((r) => r.job));
  }

  override async acquire(request: AcquireRequest): Promise<Job[]> {
    const jobs = await super.acquire(request);
    this.noteAcquisition(request, jobs.length);
    return jobs;
  }

  override async completeAndAcquire(
    done: readonly JobCompletion[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }> {
    const result = await super.completeAndAcquire(done, request);
    this.noteAcquisition(request, result.jobs.length);
    return result;
  }

  /** An acquisition for `request` returned `jobs`: its engine has room unless it was full. */
  private noteAcquisition(request: AcquireRequest, jobs: number): void {
    const key = JSON.stringify([request.types, request.queues, request.tenants]);
    this.requests.set(key, { request, room: jobs < request.limit });
    this.rename();
  }

  /**
   * A wake-up target is a store with subscribers where some acquisition request's last
   * acquisition came back short (an engine here has room; a store that never acquired, such as
   * one only waiting for `engine.result`, is none): the listening connection's
   * `application_name` says so, with the filter of what those requests acquire, set once per
   * change, so wake-ups find the idle nodes that run their jobs.
   */
  private rename(): void {
    if (this.wakeUps !== 'targeted') return;
    // The last subscriber left (engines stopped): their requests go with them.
    if (this.subscribers === 0) this.requests.clear();
    const roomy = [...this.requests.values()].filter((r) => r.room).map((r) => r.request);
    const filter = roomy.length > 0 ? acquisitionFilter(roomy) : null;
    if (filter === this.named) return;
    this.named = filter;
    const name = this.targets.applicationName(filter);
    void this.notifier
      .ready()
      .then((client) => client?.query("SELECT set_config('application_name', $1, false)", [name]))
      .catch(() => undefined); // a lost connection reconnects under the current name
  }

  /** Sends the wake-ups under way (for at most a second), then closes. */
  override async close(): Promise<void> {
    if (this.closed) return;
    await Promise.race([
      this.wakes.drained(),
      new Promise((resolve) => setTimeout(resolve, WAKE_DRAIN_MS).unref()),
    ]);
    await super.close();
  }

  /**
   * An engine starting with `connections` calls at once: the store's own pool (no `max` given)
   * grows to fit every engine on it; a given `max`, or your pool, is kept (the engine warns
   * when it is smaller).
   */
  reserveConnections(connections: number): ConnectionReservation {
    return this.poolSizing.reserve(connections);
  }

  /**
   * Adds a subscriber (see `NotifyingSqlJobStore.subscribe`); the first one also sends one test
   * notification once the listener is up, and warns when it is not heard (a LISTEN through a
   * transaction pooler, or a listener on another database than the pool's).
   */
  override subscribe(listener: () => void): () => void {
    if (!this.capabilities.notifications) {
      throw new StoreError(
        "[@jobs/postgres] subscribe: no notifications behind pooler: 'transaction' without listenConnectionString",
      );
    }
    const unsubscribe = super.subscribe(listener);
    this.subscribers++;
    this.rename();
    let subscribed = true;
    const leave = (): void => {
      if (!subscribed) return;
      subscribed = false;
      this.subscribers--;
      this.rename();
      unsubscribe();
    };
    if (!this.probed) {
      this.probed = true;
      void this.probe();
    }
    return leave;
  }

  /** Sends a notification through the pool and warns unless the listener hears it in time. */
  private async probe(): Promise<void> {
    try {
      if ((await this.notifier.ready()) === null || this.closed) return;
      const before = this.notifier.heard;
      const heard = () => this.notifier.heard > before;
      await this.pool.query('SELECT pg_notify($1, $2)', [this.channel, PROBE_PAYLOAD]);
      for (let waited = 0; !heard() && !this.closed && waited < PROBE_MS; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50).unref());
      }
      if (!heard() && !this.closed) {
        this.warn(
          `[@jobs/postgres] the listening connection heard no notification ${PROBE_MS / 1000} s after one was sent on "${this.channel}": engines wake only by polling. A LISTEN through a transaction pooler hears nothing: set pooler: 'transaction' and listenConnectionString to a URL straight to PostgreSQL.`,
        );
      }
    } catch {
      // The store closed, or the server went away: the listener reconnects on its own.
    }
  }

  /**
   * Resolves when the listening connection is up, so a notification sent after this is heard.
   * Useful in tests and before measuring pickup latency.
   */
  async listening(): Promise<void> {
    await this.notifier.ready();
  }

  /** Backend pid of the listening connection, or null when nobody subscribed. */
  async listenerBackendPid(): Promise<number | null> {
    const client = await this.notifier.ready();
    const result = await client?.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    return result?.rows[0]?.pid ?? null;
  }
}

// ─── PgExecutor ──────────────────────────────────────────────────────────────────────────────────
/*
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

// ─── wake targets ────────────────────────────────────────────────────────────────────────────────
/*
 * Wake-ups that cost O(1) per job, not O(nodes): an enqueue NOTIFYs a few idle nodes that can
 * run its jobs, not all.
 *
 * Each store that listens also LISTENs on a channel of its own, `jobs_<hash>_<id>`, and names its
 * listening connection `jobs:idle:<hash>:<id>:<filter>` while its engines have room (the last
 * acquisition came back short) or `jobs:busy:<hash>:<id>` while they are full (`application_name`,
 * set once per change on that connection). `<filter>` is a 128-bit Bloom filter (3 hashes, 32 hex
 * digits) of what the idle engines acquire: `t:<type>` for each handler type, `q:*` (every queue)
 * or `q:<queue>` for each queue, `n:*` (every tenant) or `n:<tenant>` for each tenant. A wake-up
 * reads `pg_stat_activity` once — no table, nothing to clean up: a node that dies leaves with its
 * session — and, for each distinct (type, queue, tenant) of the jobs it is for, notifies at most
 * `k` random idle nodes whose filter may accept such a job; when some combination has no such
 * node, it notifies the store's shared channel instead (every node LISTENs there: a busy node that
 * frees up, the SQL `enqueue` function, `wakeUps: 'broadcast'` stores).
 *
 * A Bloom filter has false positives, never false negatives: a node woken for a job it cannot run
 * acquires nothing, and the job waits at most for the next poll (`pollIntervalMs`) of a node that
 * runs it — the bound a lost notification already has. The odds, per entry a job needs, are
 * about (1 − e^(−3n/128))³ for a node with `n` entries: 0.3 % with 7, 1.5 % with 12, 9 % with 25.
 *
 * Enqueues outside a caller's transaction send no NOTIFY in their own transaction: the commit of
 * a transaction that NOTIFYs takes PostgreSQL's server-wide notify lock, so concurrent enqueuers
 * would queue on it. They are woken after commit by `CoalescedWakes`: one statement at a time
 * per store, covering every enqueue that committed while the previous one was under way.
 * Enqueues inside the caller's transaction (and jobs given back or recovered) NOTIFY the shared
 * channel in that transaction: the statement does not know the jobs, so it wakes every node.
 */

/** Idle nodes one wake-up notifies at most, per (type, queue, tenant) of its jobs. */
export const MAX_WAKE_TARGETS = 8;
/** Distinct (type, queue, tenant) one wake-up targets; past it, it wakes every node. */
export const MAX_WAKE_COMBINATIONS = 16;
/** Bits in a node's filter. */
const FILTER_BITS = 128;
/** Bits each entry sets. */
const FILTER_HASHES = 3;

/** FNV-1a of `text`, 8 hex digits: the store's channel, short enough for a channel name. */
function hash8(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** `entryBits` of recent entries (a node's own types, queues and tenants, mostly). */
const bitsCache = new Map<string, number[]>();

/** The filter bits of one entry (`t:<type>`, `q:*`…): the first bytes of its SHA-256. */
function entryBits(entry: string): number[] {
  let bits = bitsCache.get(entry);
  if (!bits) {
    const digest = createHash('sha256').update(entry).digest();
    bits = Array.from({ length: FILTER_HASHES }, (_, i) => (digest[i] as number) % FILTER_BITS);
    if (bitsCache.size >= 1_024) bitsCache.clear();
    bitsCache.set(entry, bits);
  }
  return bits;
}

/** A 128-bit set as 32 hex digits (`('x' || hex)::bit(128)` in SQL). */
function toHex(entries: Iterable<string>): string {
  const bytes = new Uint8Array(FILTER_BITS / 8);
  for (const entry of entries) {
    for (const bit of entryBits(entry))
      bytes[bit >> 3] = (bytes[bit >> 3] as number) | (1 << (bit & 7));
  }
  return Buffer.from(bytes).toString('hex');
}

/** What an acquisition request accepts, as filter entries. */
function requestEntries(request: Pick<AcquireRequest, 'types' | 'queues' | 'tenants'>): string[] {
  return [
    ...request.types.map((type) => `t:${type}`),
    ...(request.queues === null ? ['q:*'] : request.queues.map((queue) => `q:${queue}`)),
    ...(request.tenants === null ? ['n:*'] : request.tenants.map((tenant) => `n:${tenant}`)),
  ];
}

/** The Bloom filter (32 hex digits) of everything `requests` acquire. */
export function acquisitionFilter(
  requests: Iterable<Pick<AcquireRequest, 'types' | 'queues' | 'tenants'>>,
): string {
  const entries: string[] = [];
  for (const request of requests) entries.push(...requestEntries(request));
  return toHex(entries);
}

/** One (type, queue, tenant) of enqueued jobs, with how many jobs have it. */
export interface WakeCombination {
  type: string;
  queue: string;
  tenantId: string | null;
  jobs: number;
}

/**
 * The masks a node's filter must contain one of to accept a job of `c`: its type, and the queue
 * unrestricted or this queue, and the tenant unrestricted or this tenant (a job without tenant:
 * only unrestricted nodes take it).
 */
export function acceptMasks(c: Pick<WakeCombination, 'type' | 'queue' | 'tenantId'>): string[] {
  const queues = ['q:*', `q:${c.queue}`];
  const tenants = c.tenantId === null ? ['n:*'] : ['n:*', `n:${c.tenantId}`];
  const masks = new Set<string>();
  for (const q of queues) for (const n of tenants) masks.add(toHex([`t:${c.type}`, q, n]));
  return [...masks];
}

/** The names one listening store goes by. */
export class WakeTargets {
  /** The node's own channel. */
  readonly ownChannel: string;
  private readonly hash: string;
  /** 10 hex digits: the idle name, filter included, fits `application_name`'s 63 bytes. */
  private readonly id = randomBytes(5).toString('hex');

  constructor(
    /** The store's shared channel. */
    readonly sharedChannel: string,
  ) {
    this.hash = hash8(sharedChannel);
    this.ownChannel = `jobs_${this.hash}_${this.id}`;
  }

  /**
   * The listening connection's `application_name`: idle (a wake-up target for jobs its
   * `filter`, from `acquisitionFilter`, may accept) when `filter` is given, else busy.
   */
  applicationName(filter: string | null): string {
    return filter === null
      ? `jobs:busy:${this.hash}:${this.id}`
      : `jobs:idle:${this.hash}:${this.id}:${filter}`;
  }

  /**
   * A SELECT that, for each of `combinations`, notifies at most `min(jobs, 8)` random idle nodes
   * of this channel whose filter may accept such a job — or the shared channel alone when some
   * combination has no such node (an idle name without a filter accepts everything). One row per
   * notification. `others`: not this node (after an enqueue through this store: an engine here
   * that can run the job woke itself).
   */
  notifyQuery(combinations: readonly WakeCombination[], others = false): Query {
    const want = combinations.flatMap((c, i) =>
      acceptMasks(c).map((m) => ({ c: i, k: wakeTargetsFor(c.jobs), m })),
    );
    return {
      sql: `WITH nodes AS (
  SELECT split_part(application_name, ':', 4) AS id,
    CASE WHEN split_part(application_name, ':', 5) ~ '^[0-9a-f]{32}$'
      THEN ('x' || split_part(application_name, ':', 5))::bit(128)
      ELSE ('x' || repeat('f', 32))::bit(128) END AS f
  FROM pg_stat_activity WHERE application_name LIKE ? AND split_part(application_name, ':', 4) <> ?),
want AS (SELECT w.c, w.k, ('x' || w.m)::bit(128) AS m
  FROM jsonb_to_recordset(?::jsonb) AS w(c int, k int, m text)),
matches AS (SELECT DISTINCT want.c, want.k, nodes.id FROM want JOIN nodes ON (nodes.f & want.m) = want.m),
unmatched AS (SELECT DISTINCT c FROM want WHERE c NOT IN (SELECT c FROM matches)),
picked AS (SELECT DISTINCT id FROM (SELECT id, k, row_number() OVER (PARTITION BY c ORDER BY random()) AS r
  FROM matches) ranked WHERE r <= k)
SELECT pg_notify(? || picked.id, '') FROM picked WHERE NOT EXISTS (SELECT 1 FROM unmatched)
UNION ALL SELECT pg_notify(?, '') WHERE EXISTS (SELECT 1 FROM unmatched)`,
      params: [
        `jobs:idle:${this.hash}:%`,
        others ? this.id : '',
        JSON.stringify(want),
        `jobs_${this.hash}_`,
        this.sharedChannel,
      ],
    };
  }
}

/** How many nodes a wake-up for `jobs` new jobs of one combination notifies. */
export function wakeTargetsFor(jobs: number): number {
  return Math.max(1, Math.min(jobs, MAX_WAKE_TARGETS));
}

/**
 * The jobs one wake-up is for: their distinct (type, queue, tenant), or null past
 * `MAX_WAKE_COMBINATIONS` of them (wake every node).
 */
export type WakeRequest = WakeCombination[] | null;

/**
 * Wake-ups sent after commit, coalesced: at most one statement in flight per store; enqueues
 * that commit meanwhile are covered by one more, for all of their jobs' combinations.
 */
export class CoalescedWakes {
  private pending = new Map<string, WakeCombination>();
  /** More combinations are pending than one wake-up targets. */
  private overflow = false;
  private flushing: Promise<void> | null = null;

  constructor(private readonly send: (request: WakeRequest) => Promise<unknown>) {}

  /** Jobs of `combinations` were committed: wake nodes for them soon. */
  request(jobs: readonly Pick<WakeCombination, 'type' | 'queue' | 'tenantId'>[]): void {
    if (jobs.length === 0) return;
    // A batch mostly repeats one combination: the previous job's is counted without a key.
    let last: WakeCombination | undefined;
    for (const job of jobs) {
      if (this.overflow) break;
      if (
        last !== undefined &&
        last.type === job.type &&
        last.queue === job.queue &&
        last.tenantId === job.tenantId
      ) {
        last.jobs++;
        continue;
      }
      const key = JSON.stringify([job.type, job.queue, job.tenantId]);
      last = this.pending.get(key);
      if (last) last.jobs++;
      else if (this.pending.size >= MAX_WAKE_COMBINATIONS) this.overflow = true;
      else {
        last = { type: job.type, queue: job.queue, tenantId: job.tenantId, jobs: 1 };
        this.pending.set(key, last);
      }
    }
    this.flushing ??= this.flush();
  }

  /** Resolves once no wake-up is pending or in flight. */
  async drained(): Promise<void> {
    await this.flushing;
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.size > 0 || this.overflow) {
        const request = this.overflow ? null : [...this.pending.values()];
        this.pending = new Map();
        this.overflow = false;
        // A lost wake-up costs latency, never a job: engines also poll.
        await this.send(request).catch(() => undefined);
      }
    } finally {
      this.flushing = null;
    }
  }
}
