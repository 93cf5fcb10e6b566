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
  checkStoreOptions,
  DEFAULT_POOL_SIZE,
  NETWORK_TIMEOUT_OPTIONS,
  type NetworkTimeoutOptions,
  NotifyingSqlJobStore,
  PoolSizing,
  PROBE_PAYLOAD,
  postgresDialect,
  type ReconnectingListener,
  resolveConnectionTimeouts,
  type SqlEnv,
} from '@jobs/core/sql';
import pg, { type Client, type ClientConfig, type Pool } from 'pg';
import { notificationListener } from './listener.js';
import { connectionSettings, PgExecutor, type Pooler } from './pg-executor.js';
import { acquisitionFilter, CoalescedWakes, WakeTargets } from './wake-targets.js';

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
 * that run the jobs, after commit; see `wake-targets.ts`), and enqueue inside your own
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
  /** Whom wake-ups go to (see `wake-targets.ts`). */
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
  /** The filter the listening connection's name carries, null while busy (`wake-targets.ts`). */
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
