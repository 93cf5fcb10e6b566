/**
 * `MysqlJobStore`: the `JobStore` contract on MySQL 8+ and MariaDB 10.6+ through mysql2 — the
 * SQL of `@jobs/core/sql` (its MySQL dialect) on a mysql2 pool. This package holds the driver
 * glue only: the pool and its sessions (UTC, READ COMMITTED), the server check, and
 * deadlock / lock-wait retries with backoff, reported through `onRetry` and `retryStats`.
 */
import {
  type AcquireRequest,
  assertIdentifier,
  assertKnownOptions,
  assertPositiveInteger,
  type Job,
  type JobRef,
  JobsError,
  StoreError,
  ValidationError,
} from '@jobs/core';
import {
  ChangeWatcher,
  driverErrno,
  type MysqlDialect,
  mysqlDialect,
  resolveConnectionTimeouts,
  SqlJobStore,
} from '@jobs/core/sql';
import type { Pool, PoolOptions } from 'mysql2/promise';
import mysql from 'mysql2/promise';
import { endPool, MysqlExecutor, trackConnections } from './mysql-executor.js';
import {
  backoffMs,
  LOCK_WAIT_TIMEOUT_SECONDS,
  type MysqlRetryEvent,
  type MysqlRetryStats,
  mayRetry,
} from './retry.js';
import { assertSupportedServer, parseServerVersion, type ServerVersion } from './server-version.js';

export interface MysqlJobStoreOptions {
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
   * Opening a connection, or waiting for a free one in the pool, fails after this. Default
   * 10 000. On your own `pool` set mysql2's `connectTimeout` too: the store gives up waiting,
   * your pool decides when to give up connecting.
   */
  connectTimeoutMs?: number;
  /**
   * Deadline of each statement, kept by the client (a silent network never answers): past it
   * the call fails and its connection is destroyed (the server then rolls its transaction
   * back and frees its locks once it notices). `migrate()` is not bounded. Default 30 000.
   */
  queryTimeoutMs?: number;
  /** Idle time before TCP keepalive probes on the store's own connections. Default 10 000. */
  keepAliveDelayMs?: number;
  /**
   * How often, while an engine listens (`subscribe`), the store reads whether another
   * connection added jobs — one primary-key read, not an acquisition. Default 20.
   */
  notifyIntervalMs?: number;
}

const OPTION_KEYS: ReadonlySet<string> = new Set(
  'uri pool database tablePrefix connectionLimit deleteReturning connectTimeoutMs queryTimeoutMs keepAliveDelayMs notifyIntervalMs'.split(
    ' ',
  ),
);
/**
 * Settings mysql2 derives from the others when it opens a pool: given again, they are
 * rejected with a warning, so a caller's pool's settings are copied without them.
 */
const DERIVED_CONNECTION_SETTINGS = ['maxPacketSize', 'clientFlags', 'pool', 'isServer'];
const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : String(error);

/**
 * A job store on MySQL 8+ or MariaDB 10.6+.
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
export class MysqlJobStore extends SqlJobStore {
  /** Qualified, quoted table names, e.g. `` `app`.`jobs_jobs` ``. */
  readonly tables: { jobs: string; schedules: string; migrations: string };

  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly open: ReturnType<typeof trackConnections> | null;
  private readonly mysqlExecutor: MysqlExecutor;
  private readonly mysqlDialect: MysqlDialect;
  private readonly watcher: ChangeWatcher<string>;
  /** When an acquisition last started (`Date.now()`): the wake-up reads pause while engines acquire. */
  private lastAcquireAt = 0;
  private readonly retryListeners = new Set<(event: MysqlRetryEvent) => void>();
  private readonly counters: MysqlRetryStats = { deadlockRetries: 0, lockWaitRetries: 0 };
  private version: Promise<ServerVersion> | null = null;
  /** A failed session setup on a new pooled connection, reported by the next operation. */
  private sessionSetupError: unknown = null;

  constructor(options: MysqlJobStoreOptions) {
    if (!options || typeof options !== 'object') {
      throw new ValidationError('options', 'must be an object with `uri` or `pool`');
    }
    assertKnownOptions(options, OPTION_KEYS, '@jobs/mysql');
    if ((options.uri === undefined) === (options.pool === undefined)) {
      throw new ValidationError('options', 'give exactly one of `uri` or `pool`');
    }
    if (options.connectionLimit !== undefined) {
      assertPositiveInteger(options.connectionLimit, 'connectionLimit', '@jobs/mysql');
    }
    const tablePrefix = assertIdentifier(options.tablePrefix ?? 'jobs_', 'tablePrefix', {
      allowEmpty: true,
      max: 40,
    });
    const database =
      options.database === undefined ? null : assertIdentifier(options.database, 'database');
    const deleteReturning = options.deleteReturning;
    const dialect = mysqlDialect({ tablePrefix, database, deleteReturning });
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
      },
    });
    this.pool = pool;
    this.ownsPool = options.pool === undefined;
    this.open = this.ownsPool ? trackConnections(pool) : null;
    this.mysqlExecutor = executor;
    this.mysqlDialect = dialect;
    const signal = dialect.wakeSignal as NonNullable<typeof dialect.wakeSignal>;
    const notifyIntervalMs = assertPositiveInteger(
      options.notifyIntervalMs ?? 20,
      'notifyIntervalMs',
      '@jobs/mysql',
    );
    this.watcher = new ChangeWatcher<string>(
      () =>
        this.closed
          ? null
          : this.run(
              'subscribe',
              function* () {
                return String((yield signal).rows[0]?.v ?? '');
              },
              { transaction: false },
            ),
      notifyIntervalMs,
      // An engine that acquired within the interval is looking for jobs anyway.
      () => Date.now() - this.lastAcquireAt < notifyIntervalMs,
    );
    this.tables = {
      jobs: dialect.table('jobs'),
      schedules: dialect.table('schedules'),
      migrations: dialect.table('migrations'),
    };
    executor.beforeRun = () => this.ready();
    if (this.ownsPool) {
      // Sessions of our own pool run in UTC and READ COMMITTED (no gap locks, fresh reads per
      // statement), and wait seconds for a row lock, not 50 (see `retry.ts`); on a caller's
      // pool the executor sets the isolation per transaction instead.
      pool.on('connection', (connection) => {
        const core = connection as unknown as {
          query(sql: string, cb: (error: unknown) => void): void;
        };
        const remember = (error: unknown): void => {
          if (error) this.sessionSetupError = error;
        };
        core.query("SET SESSION time_zone = '+00:00'", remember);
        core.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED', remember);
        core.query(`SET SESSION innodb_lock_wait_timeout = ${LOCK_WAIT_TIMEOUT_SECONDS}`, remember);
      });
    }
  }

  /** Counts of transparent deadlock / lock-wait-timeout retries since the store was created. */
  get retryStats(): Readonly<MysqlRetryStats> {
    return { ...this.counters };
  }

  /**
   * Calls `listener` whenever a store operation hit a deadlock (1213) or lock wait timeout
   * (1205) and is being retried. Returns an unsubscribe function. Keep listeners cheap and
   * non-throwing: they run inside the operation, and an error thrown by one fails it.
   *
   * @example
   * const off = store.onRetry((e) => metrics.increment(`jobs.mysql.${e.reason}`));
   */
  onRetry(listener: (event: MysqlRetryEvent) => void): () => void {
    this.retryListeners.add(listener);
    return () => {
      this.retryListeners.delete(listener);
    };
  }

  /** The server version, read once (and checked) on first use; it tells the dialect too. */
  serverVersion(): Promise<ServerVersion> {
    if (!this.version) {
      const pending = this.mysqlExecutor.read('SELECT VERSION() AS version').then((rows) => {
        const version = parseServerVersion(String(rows[0]?.version ?? ''));
        assertSupportedServer(version);
        this.mysqlDialect.useServer(version);
        return version;
      });
      this.version = pending;
      // A failed check (server down) is tried again on the next call.
      pending.catch(() => {
        if (this.version === pending) this.version = null;
      });
    }
    return this.version;
  }

  /**
   * Wakes `listener` when another connection adds jobs: the store reads the end of the jobs'
   * primary key every `notifyIntervalMs` while anyone listens (MySQL has no LISTEN/NOTIFY).
   * Returns the unsubscribe function.
   */
  subscribe(listener: () => void): () => void {
    if (this.closed) throw new StoreError('[@jobs/mysql] subscribe: the store is closed');
    return this.watcher.subscribe(listener);
  }

  override acquire(request: AcquireRequest): Promise<Job[]> {
    this.lastAcquireAt = Date.now();
    return super.acquire(request);
  }

  override completeAndAcquire(
    done: readonly JobRef[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }> {
    this.lastAcquireAt = Date.now();
    return super.completeAndAcquire(done, request);
  }

  /** Wake-signal reads so far: what idle engines on this store cost the database. */
  get wakeSignalReads(): number {
    return this.watcher.reads;
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    this.watcher.stop(true);
    await super.close();
    // Within a second even when the server never answers the goodbye.
    if (this.open) await endPool(this.pool, this.open);
  }

  /** Before every operation: a failed session setup is reported, the server checked once. */
  private async ready(): Promise<void> {
    const error = this.sessionSetupError;
    if (error !== null) {
      this.sessionSetupError = null;
      throw new Error(`setting up a new connection's session failed: ${messageOf(error)}`, {
        cause: error,
      });
    }
    await this.serverVersion();
  }

  /**
   * Deadlocks and lock wait timeouts: jittered backoff, up to 9 retries within 10 s of the
   * operation's start (`mayRetry`), counted and reported.
   */
  protected override retryDelayMs(
    what: string,
    error: unknown,
    retry: number,
    _retries: number,
    elapsedMs: number,
  ): number | null {
    if (!mayRetry(retry, elapsedMs)) return null;
    const errno = driverErrno(error) ?? 0;
    const reason = errno === 1213 ? 'deadlock' : 'lock-wait-timeout';
    if (reason === 'deadlock') this.counters.deadlockRetries += 1;
    else this.counters.lockWaitRetries += 1;
    const delayMs = backoffMs(retry);
    const event: MysqlRetryEvent = { operation: what, reason, errno, attempt: retry, delayMs };
    for (const listener of [...this.retryListeners]) listener(event);
    return delayMs;
  }

  /** Driver errors as `[@jobs/mysql] <operation>: <message> (errno N)`. */
  protected override wrap(what: string, error: unknown): JobsError {
    if (error instanceof JobsError) return error;
    const errno = driverErrno(error);
    return new StoreError(
      `[@jobs/mysql] ${what}: ${messageOf(error)}${errno === undefined ? '' : ` (errno ${errno})`}`,
      { cause: error },
    );
  }
}
