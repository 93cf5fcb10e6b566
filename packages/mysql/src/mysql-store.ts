import { assertIdentifier, JobsError, StoreError } from '@jobs/core';
import {
  checkStoreOptions,
  driverErrno,
  type LockRetries,
  type LockRetryEvent,
  type LockRetryStats,
  MysqlServerCheck,
  mysqlDialect,
  NETWORK_TIMEOUT_OPTIONS,
  type NetworkTimeoutOptions,
  NotifyingSqlJobStore,
  resolveConnectionTimeouts,
  type ServerVersion,
  type WakeSignalWatcher,
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
  /** Pool size when the store creates the pool. Default 10. */
  connectionLimit?: number;
  /**
   * Use MariaDB's `DELETE … RETURNING` to complete jobs in one round trip. Default: on for
   * MariaDB, off for MySQL (which lacks it). Tests turn it off to run the MySQL path on MariaDB.
   */
  deleteReturning?: boolean;
  /**
   * How often, while an engine listens (`subscribe`), the store reads whether another
   * connection added jobs — one primary-key read, not an acquisition. Default 20.
   */
  notifyIntervalMs?: number;
}

const OPTION_KEYS = [
  ...'uri pool database tablePrefix connectionLimit deleteReturning notifyIntervalMs'.split(' '),
  ...NETWORK_TIMEOUT_OPTIONS,
];
/**
 * Settings mysql2 derives from the others when it opens a pool: given again, they are
 * rejected with a warning, so a caller's pool's settings are copied without them.
 */
const DERIVED_CONNECTION_SETTINGS = ['maxPacketSize', 'clientFlags', 'pool', 'isServer'];

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
   * Wakes subscribers when another connection adds jobs: it reads the end of the jobs' primary
   * key every `notifyIntervalMs` while anyone listens (MySQL has no LISTEN/NOTIFY).
   */
  protected readonly notifier: WakeSignalWatcher;
  private readonly server: MysqlServerCheck;

  constructor(options: MysqlJobStoreOptions) {
    checkStoreOptions(options, '@jobs/mysql', OPTION_KEYS, {
      oneOf: ['uri', 'pool'],
      positiveIntegers: ['connectionLimit', 'notifyIntervalMs'],
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
      connectionLimit: options.connectionLimit ?? 10,
      timezone: 'Z',
      dateStrings: true,
      supportBigNumbers: true,
      ...network,
    };
    const pool = options.pool ?? mysql.createPool(ownPool);
    // Lease renewals get a connection of their own, on your pool's settings when it is yours.
    const heartbeatPool = (): Pool => {
      if (options.pool === undefined) return mysql.createPool({ ...ownPool, connectionLimit: 1 });
      const settings: Record<string, unknown> = {
        ...(options.pool as unknown as { pool: { config: { connectionConfig: object } } }).pool
          .config.connectionConfig,
      };
      for (const key of DERIVED_CONNECTION_SETTINGS) delete settings[key];
      return mysql.createPool({ ...(settings as PoolOptions), ...network, connectionLimit: 1 });
    };
    const executor = new MysqlExecutor(pool, options.pool === undefined, heartbeatPool, timeouts);
    super({
      label: '@jobs/mysql',
      name: 'mysql',
      dialect,
      executor,
      capabilities: {
        // Not pushed by the server: `subscribe` reads the dialect's wake signal (see below).
        notifications: true,
        skipLocked: true,
        transactionalEnqueue: true,
        multiProcess: true,
        concurrentCalls:
          ((options.pool as unknown as { pool?: { config?: { connectionLimit?: number } } })?.pool
            ?.config?.connectionLimit ??
            ownPool.connectionLimit ??
            10) > 1,
      },
    });
    this.notifier = this.watchWakeSignal(options.notifyIntervalMs ?? 20);
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

  /** Wake-signal reads so far: what idle engines on this store cost the database. */
  get wakeSignalReads(): number {
    return this.notifier.reads;
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
