import { assertIdentifier, type ConnectionReservation, JobsError, StoreError } from '@jobs/core';
import {
  checkStoreOptions,
  copiedConnectionSettings,
  DEFAULT_POOL_SIZE,
  DEFAULT_WAKE_WAIT_MS,
  driverErrno,
  type LockRetries,
  type LockRetryEvent,
  type LockRetryStats,
  MysqlServerCheck,
  mysqlDialect,
  mysqlWakeWaits,
  NETWORK_TIMEOUT_OPTIONS,
  type NetworkTimeoutOptions,
  NotifyingSqlJobStore,
  PoolSizing,
  resolveConnectionTimeouts,
  type ServerVersion,
  WAITING_POLL_MS,
  type WaiterRing,
  type WakeSignalWatcher,
  WakeWaiter,
} from '@jobs/core/sql';
import type { Pool, PoolOptions } from 'mysql2/promise';
import mysql from 'mysql2/promise';
import { MysqlExecutor } from './mysql-executor.js';

/**
 * The store's options; `connectTimeoutMs`, `queryTimeoutMs` and `keepAliveDelayMs` bound its
 * calls (`NetworkTimeoutOptions`). On your own `pool`, set mysql2's `connectTimeout` too.
 */
export interface MysqlJobStoreOptions extends NetworkTimeoutOptions {
  /** Connection URI, e.g. `mysql://user:pass@host:3306/app`. The store creates (and closes) a pool. */
  uri?: string;
  /**
   * Your own mysql2 promise pool. The store never closes it and leaves its sessions' settings
   * alone: it reads times as text and uses the server's UTC clock in SQL, so the pool's
   * `timezone` and session `time_zone` do not matter.
   */
  pool?: Pool;
  /** Database holding the tables. Default: the connection's database. */
  database?: string;
  /**
   * Prefix of the table names (`<prefix>jobs`, `<prefix>schedules`, `<prefix>jobs_migrations`).
   * Default `jobs_`.
   */
  tablePrefix?: string;
  /**
   * Pool size when the store creates the pool. Default: 10, grown when an engine starts to what
   * its engines may use at once (`concurrency + 6` each: every handler in `ctx.transaction`,
   * plus the engine's own calls) and one for the wake-signal reads. A size given here is kept;
   * an engine that may need more logs one warning naming both numbers.
   */
  connectionLimit?: number;
  /**
   * Use MariaDB's `DELETE … RETURNING` to complete jobs in one round trip. Default: on for
   * MariaDB, off for MySQL (which lacks it). Tests turn it off to run the MySQL path on MariaDB.
   */
  deleteReturning?: boolean;
  /**
   * How long, while an engine listens (`subscribe`), the store waits on the server for a
   * wake-up before it reads again whether a job is due. The wait is a `SELECT SLEEP(…)` on a
   * connection of the store's own, which a store that enqueued ends (`KILL QUERY`, a few
   * waiters per enqueue); before each wait the same statement reads whether a job is due (jobs
   * enqueued in your transaction, released or retried ones) and then does not wait. An idle
   * store sends one statement per `notifyWaitMs`, and its engines poll every 30 s by default
   * (`capabilities.pollIntervalMs`). Default 4 000.
   */
  notifyWaitMs?: number;
  /**
   * Poll instead of waiting: read whether another connection added jobs every
   * `notifyIntervalMs` (one primary-key read, not an acquisition) — 50 statements a second
   * per idle store at 20. For a server where `KILL QUERY` of the store's own connections is
   * refused, or where waits must not hold a connection. Default: off (waits).
   */
  notifyIntervalMs?: number;
}

const OPTION_KEYS = [
  ...'uri pool database tablePrefix connectionLimit deleteReturning notifyIntervalMs notifyWaitMs'.split(
    ' ',
  ),
  ...NETWORK_TIMEOUT_OPTIONS,
];
/**
 * The settings of a mysql2 promise pool's core pool, which reads `connectionLimit` whenever it
 * needs a connection; null for a pool that does not keep them where mysql2 3.x does.
 */
function poolConfig(pool: Pool): { connectionLimit: number; maxIdle: number } | null {
  const config = (pool as unknown as { pool?: { config?: { connectionLimit?: unknown } } }).pool
    ?.config;
  return typeof config?.connectionLimit === 'number'
    ? (config as { connectionLimit: number; maxIdle: number })
    : null;
}

/**
 * `MysqlJobStore`: the `JobStore` contract on MySQL 8+ and MariaDB 10.6+ through mysql2 — the
 * SQL of `@jobs/core/sql` (its MySQL dialect) on a mysql2 pool. This package holds the driver
 * glue only: the pool and its sessions (UTC, READ COMMITTED), the server check, and
 * deadlock / lock-wait retries with backoff, reported through `onRetry` and `retryStats`.
 *
 * @example
 * import { JobEngine } from '@jobs/core';
 * import { MysqlJobStore } from '@jobs/mysql';
 *
 * const store = new MysqlJobStore({ uri: 'mysql://root@127.0.0.1:3306/app' });
 * await store.migrate();
 * const engine = new JobEngine({ store, handlers: { email: async (job) => send(job.payload) } });
 * await engine.start();
 * store.onRetry((e) => console.warn(`${e.operation}: ${e.reason}, retry ${e.attempt}`));
 */
export class MysqlJobStore extends NotifyingSqlJobStore {
  /** Qualified, quoted table names, e.g. `` `app`.`jobs_jobs` ``. */
  readonly tables: { jobs: string; schedules: string; migrations: string };

  /**
   * Wakes subscribers when another connection adds jobs (MySQL has no LISTEN/NOTIFY): a wait on
   * the server that enqueuers end (`WakeWaiter`), or, with `notifyIntervalMs`, a read of the end
   * of the jobs' primary key every `notifyIntervalMs` while anyone listens.
   */
  protected readonly notifier: WakeWaiter | WakeSignalWatcher;
  /** Ends a few waits after an enqueue of the store's own commit (null: polling). */
  private readonly ring: WaiterRing | null;
  private readonly server: MysqlServerCheck;
  private readonly poolSizing: PoolSizing;

  constructor(options: MysqlJobStoreOptions) {
    checkStoreOptions(options, '@jobs/mysql', OPTION_KEYS, {
      oneOf: ['uri', 'pool'],
      positiveIntegers: ['connectionLimit', 'notifyIntervalMs', 'notifyWaitMs'],
    });
    const tablePrefix = assertIdentifier(options.tablePrefix ?? 'jobs_', 'tablePrefix', {
      allowEmpty: true,
      max: 40,
    });
    const database =
      options.database === undefined ? null : assertIdentifier(options.database, 'database');
    const dialect = mysqlDialect({
      tablePrefix,
      database,
      deleteReturning: options.deleteReturning,
    });
    const timeouts = resolveConnectionTimeouts(options, '@jobs/mysql');
    // The store's own connections: connect timeout and TCP keepalive.
    const network: PoolOptions = {
      connectTimeout: timeouts.connectTimeoutMs,
      enableKeepAlive: true,
      keepAliveInitialDelay: timeouts.keepAliveDelayMs,
    };
    const ownPool: PoolOptions = {
      uri: options.uri,
      ...(database === null ? {} : { database }),
      connectionLimit: options.connectionLimit ?? DEFAULT_POOL_SIZE,
      timezone: 'Z',
      dateStrings: true,
      supportBigNumbers: true,
      ...network,
    };
    const pool = options.pool ?? mysql.createPool(ownPool);
    // Connections of the store's own (lease renewals, the wake-up wait), on your pool's
    // settings when it is yours.
    const ownSettings = (): PoolOptions => {
      if (options.pool === undefined) return ownPool;
      const settings = copiedConnectionSettings(
        (options.pool as unknown as { pool: { config: { connectionConfig: object } } }).pool.config
          .connectionConfig,
      );
      return { ...(settings as PoolOptions), ...network };
    };
    const heartbeatPool = (): Pool => mysql.createPool({ ...ownSettings(), connectionLimit: 1 });
    const executor = new MysqlExecutor(pool, options.pool === undefined, heartbeatPool, timeouts);
    super({
      label: '@jobs/mysql',
      name: 'mysql',
      dialect,
      executor,
      capabilities: {
        // Not pushed by the server: `subscribe` reads the dialect's wake signal (see below).
        notifications: true,
        transactionalEnqueue: true,
        multiProcess: true,
        concurrentCalls: (poolConfig(pool)?.connectionLimit ?? DEFAULT_POOL_SIZE) > 1,
        // The waits read whether a job is due every `notifyWaitMs`: engines poll rarely.
        ...(options.notifyIntervalMs === undefined ? { pollIntervalMs: WAITING_POLL_MS } : {}),
      },
    });
    if (options.notifyIntervalMs === undefined) {
      const waits = mysqlWakeWaits({
        jobsTable: dialect.table('jobs'),
        connect: () => mysql.createConnection({ ...ownSettings(), dateStrings: true }),
        waitMs: options.notifyWaitMs ?? DEFAULT_WAKE_WAIT_MS,
        timeouts,
        sameDatabase: database === null,
        run: (ring) => this.run('enqueue', ring, { transaction: false }),
        errno: driverErrno,
      });
      this.notifier = waits.waiter;
      this.ring = waits.ring;
    } else {
      this.notifier = this.watchWakeSignal(options.notifyIntervalMs);
      this.ring = null;
    }
    this.tables = {
      jobs: dialect.table('jobs'),
      schedules: dialect.table('schedules'),
      migrations: dialect.table('migrations'),
    };
    this.server = new MysqlServerCheck(() => executor.readServerVersion(), dialect, '@jobs/mysql');
    // Before every operation: the server checked once.
    executor.beforeRun = async () => {
      await this.server.serverVersion();
    };
    // Lease renewals have a connection of their own; the wake-signal reads take one of the pool's.
    this.poolSizing = new PoolSizing({
      size: () => poolConfig(pool)?.connectionLimit ?? null,
      // Polled wake-signal reads take one of the pool's connections; the wait has its own.
      own: options.notifyIntervalMs === undefined ? 0 : 1,
      ...(options.pool || options.connectionLimit !== undefined
        ? { sizeOption: options.pool ? "your pool's `connectionLimit`" : '`connectionLimit`' }
        : {
            sizeOption: '`connectionLimit`',
            resize: (size: number) => {
              const config = poolConfig(pool);
              if (!config) return;
              // Idle connections are kept up to `maxIdle`, which follows the limit by default.
              if (config.maxIdle === config.connectionLimit) config.maxIdle = size;
              config.connectionLimit = size;
            },
          }),
    });
  }

  /**
   * An engine starting with `connections` calls at once: the store's own pool (no
   * `connectionLimit` given) grows to fit every engine on it; a given `connectionLimit`, or
   * your pool, is kept (the engine warns when it is smaller).
   */
  reserveConnections(connections: number): ConnectionReservation {
    return this.poolSizing.reserve(connections);
  }

  /** Counts of transparent deadlock / lock-wait-timeout retries since the store was created. */
  get retryStats(): Readonly<LockRetryStats> {
    return (this.lockRetries as LockRetries).stats;
  }

  /**
   * Calls `listener` whenever a store operation hit a deadlock (1213) or lock wait timeout
   * (1205) and is being retried (jittered backoff, at most 9 retries within 10 s). Returns an
   * unsubscribe function. Keep listeners cheap and non-throwing: they run inside the
   * operation, and an error thrown by one fails it.
   *
   * @example
   * const off = store.onRetry((e) => metrics.increment(`jobs.mysql.${e.reason}`));
   */
  onRetry(listener: (event: LockRetryEvent) => void): () => void {
    return (this.lockRetries as LockRetries).onRetry(listener);
  }

  /** The server version, read once (and checked) on first use; it tells the dialect too. */
  serverVersion(): Promise<ServerVersion> {
    return this.server.serverVersion();
  }

  /**
   * Statements the wake-ups sent so far (the waits, each with its read, or the polled reads):
   * what idle engines on this store cost the database.
   */
  get wakeSignalReads(): number {
    return this.notifier instanceof WakeWaiter ? this.notifier.statements : this.notifier.reads;
  }

  /**
   * Jobs are due (an enqueue's own commit, no `tx`; a signal's waiters; released jobs): ends
   * the waits of a few idle stores on these tables so they acquire at once — a number that
   * grows with the jobs, not with the nodes waiting. Jobs enqueued in your transaction are seen
   * when the waits end (`notifyWaitMs`) or by the engines' own poll.
   */
  protected override jobsDue(count: number): void {
    if (!this.closed) this.ring?.ring(count);
  }

  override async close(): Promise<void> {
    await this.ring?.drained();
    await super.close();
  }

  /** Driver errors as `[@jobs/mysql] <operation>: <message> (errno N)`. */
  protected override wrap(what: string, error: unknown): JobsError {
    if (error instanceof JobsError) return error;
    const errno = driverErrno(error);
    const message = error instanceof Error ? error.message : String(error);
    const number = errno === undefined ? '' : ` (errno ${errno})`;
    return new StoreError(`[@jobs/mysql] ${what}: ${message}${number}`, { cause: error });
  }
}
