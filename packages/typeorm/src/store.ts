import type { AcquireRequest, ConnectionReservation, Job, MigrationResult } from '@jobs/core';
import { StoreError, ValidationError } from '@jobs/core';
import {
  checkStoreOptions,
  copiedConnectionSettings,
  DEFAULT_WAKE_WAIT_MS,
  driverErrno,
  type ListenClient,
  mysqlWakeWaits,
  type NetworkTimeoutOptions,
  NotifyingSqlJobStore,
  ownConnectionListener,
  PoolSizing,
  resolveConnectionTimeouts,
  SqliteCommitWatcher,
  type StoreNotifier,
  WAITING_POLL_MS,
  type WaitDriverConnection,
  type WaiterRing,
} from '@jobs/core/sql';
import type { DataSource, QueryRunner } from 'typeorm';
import { dialectFor, migrateOn } from './migration.js';
import { TypeormExecutor, TypeormSqliteExecutor } from './runner.js';

/** TypeORM's PostgreSQL driver: the `pg` module it loaded, and its pool (with its settings). */
type PostgresDriver = {
  postgres: { Client: new (o: object) => ListenClient };
  master: { options: object };
};

/** TypeORM's MySQL driver: the mysql2 module it loaded, and its pool (with its settings). */
type MysqlDriver = {
  mysql: { createConnectionPromise(settings: object): Promise<WaitDriverConnection> };
  pool?: { config?: { connectionConfig?: object } };
};

/**
 * A connection of the wake-up wait's own, with the settings of the DataSource's pool (which
 * there is once the DataSource is up; a replication cluster has none: the wait fails and is
 * tried again, and the engines poll meanwhile).
 */
async function waitConnectionOf(
  dataSource: DataSource,
  ready: () => Promise<void>,
): Promise<WaitDriverConnection> {
  await ready();
  const driver = dataSource.driver as unknown as MysqlDriver;
  const config = driver.pool?.config?.connectionConfig;
  if (config === undefined) throw new Error('the DataSource has no pool (replication) to copy');
  return driver.mysql.createConnectionPromise({
    ...copiedConnectionSettings(config),
    dateStrings: true,
  });
}

/**
 * The size of the DataSource's pool as its driver opened it (pg's `max`, mysql2's
 * `connectionLimit`, whichever option set it); null before it is up, or for a replication
 * cluster.
 */
function dataSourcePoolSize(dataSource: DataSource): number | null {
  if (!dataSource.isInitialized) return null;
  const driver = dataSource.driver as unknown as {
    master?: { options?: { max?: unknown } };
    pool?: { config?: { connectionLimit?: unknown } };
  };
  const size = driver.master?.options?.max ?? driver.pool?.config?.connectionLimit;
  return typeof size === 'number' ? size : null;
}

/** DataSource types the store runs on. `mariadb` uses the MySQL dialect. */
export type TypeormJobsDriver = 'postgres' | 'mysql' | 'mariadb' | 'better-sqlite3';

/**
 * The store's options. On PostgreSQL and MySQL, `connectTimeoutMs` (taking a connection from
 * the DataSource's pool) and `queryTimeoutMs` (each statement) bound every call the store
 * makes (`NetworkTimeoutOptions`); keepalive is the DataSource's to set.
 */
export interface TypeormJobStoreOptions
  extends Pick<NetworkTimeoutOptions, 'connectTimeoutMs' | 'queryTimeoutMs'> {
  /** The app's DataSource (postgres, mysql, mariadb or better-sqlite3), initialized on first use. */
  dataSource: DataSource;
  /**
   * Prefix of the tables: default `jobs_` on MySQL/MariaDB and SQLite, `''` on PostgreSQL (see
   * `schema`). With the defaults, `migrate()` adopts 0.1's tables (no prefix); `''` keeps them.
   */
  tablePrefix?: string;
  /**
   * PostgreSQL schema of the tables: the DataSource's `schema`, else `jobs` (as
   * `@jobs/postgres`) — or with a `tablePrefix` given, the search path, as in 0.1.
   */
  schema?: string;
  /** `close()` also destroys the DataSource. Default false: the app owns it. */
  destroyDataSourceOnClose?: boolean;
  /** SQLite: how long a call waits for the app's transaction on TypeORM's one connection (10 s). */
  sqliteTransactionWaitMs?: number;
  /**
   * SQLite: how often `subscribe` checks for jobs other connections added (`PRAGMA
   * data_version`; default 10 ms). MySQL/MariaDB: poll instead of waiting — read the end of the
   * jobs' key every `notifyIntervalMs` (50 statements a second per idle store at 20), for a
   * server where `KILL QUERY` of the store's own connections is refused. Default on MySQL:
   * off (waits, see `notifyWaitMs`).
   */
  notifyIntervalMs?: number;
  /**
   * MySQL/MariaDB: how long, while an engine listens, the store waits on the server for a
   * wake-up before it reads again whether a job is due — as `@jobs/mysql` does: a `SELECT
   * SLEEP(…)` on a connection of the store's own (with the DataSource's settings), which a
   * store that enqueued ends (`KILL QUERY`, a few waiters per enqueue); before each wait the
   * same statement reads whether a job is due. An idle store sends one statement per
   * `notifyWaitMs`, and its engines poll every 30 s by default. Default 4 000.
   */
  notifyWaitMs?: number;
  /** @deprecated `notifyIntervalMs` (SQLite only). */
  sqliteNotifyIntervalMs?: number;
}

const INTEGERS = [
  'sqliteTransactionWaitMs',
  'notifyIntervalMs',
  'sqliteNotifyIntervalMs',
  'notifyWaitMs',
];
const OPTION_KEYS = `dataSource tablePrefix schema destroyDataSourceOnClose sqliteTransactionWaitMs
  notifyIntervalMs notifyWaitMs sqliteNotifyIntervalMs connectTimeoutMs queryTimeoutMs`.split(
  /\s+/,
);

/**
 * A `JobStore` over a TypeORM DataSource: jobs live in the app's database, next to its own
 * tables, and `enqueue` can join the app's transaction so a job commits or rolls back with the
 * rows that caused it. The SQL is `@jobs/core/sql`'s, the same as the native stores'; so are,
 * on MySQL/MariaDB, the server check and the deadlock retries.
 *
 * @example
 * const store = new TypeormJobStore({ dataSource });
 * await store.migrate();
 * const engine = new JobEngine({ store, handlers: { 'send-email': sendEmail } });
 * await dataSource.transaction(async (manager) => {
 *   await manager.save(Order, order);
 *   await engine.enqueue('send-email', { orderId: order.id }, { tx: manager });
 * });
 */
export class TypeormJobStore extends NotifyingSqlJobStore {
  readonly dataSource: DataSource;
  /** PostgreSQL LISTEN/NOTIFY, MySQL's waits (or its polled wake signal), SQLite's `PRAGMA data_version`. */
  protected readonly notifier: StoreNotifier;
  /** MySQL/MariaDB: ends a few waits after an enqueue of the store's own commit. */
  private readonly ring: WaiterRing | null = null;
  private readonly destroyOnClose: boolean;
  private readonly prefix: string;
  /** The app's pool is the app's to size: reservations are only compared with it. */
  private readonly poolSizing: PoolSizing;

  constructor(options: TypeormJobStoreOptions) {
    if (typeof options?.dataSource?.createQueryRunner !== 'function') {
      throw new ValidationError('dataSource', '[@jobs/typeorm] must be a TypeORM DataSource');
    }
    checkStoreOptions(options, '@jobs/typeorm', OPTION_KEYS, { positiveIntegers: INTEGERS });
    const dataSource = options.dataSource;
    const { dialect, prefix, schema } = dialectFor(dataSource.options, options);
    // `@jobs/postgres`'s channel for the same tables: either store wakes the other's engines.
    const channel = `${schema ?? 'public'}_${prefix}jobs`;
    const intervalMs = options.notifyIntervalMs ?? options.sqliteNotifyIntervalMs;
    const timeouts = resolveConnectionTimeouts(options, '@jobs/typeorm');
    let watcher: SqliteCommitWatcher | null = null;
    const executor =
      dialect.name === 'sqlite'
        ? new TypeormSqliteExecutor(dataSource, dialect, {
            label: '@jobs/typeorm',
            maxStatements: 200,
            onWake: () => watcher?.wakeSoon(),
            foreignTransactionWaitMs: options.sqliteTransactionWaitMs ?? 10_000,
            foreignTransactionHint:
              'A store call from inside dataSource.transaction() must pass { tx: manager }.',
          })
        : new TypeormExecutor(dataSource, dialect, timeouts);
    // MySQL/MariaDB waits on the server unless told to poll.
    const waits = dialect.name === 'mysql' && intervalMs === undefined;
    super({
      label: '@jobs/typeorm',
      name: `typeorm-${dialect.name}`,
      dialect,
      executor,
      capabilities: {
        notifications: true,
        transactionalEnqueue: true,
        multiProcess: true,
        concurrentCalls:
          dialect.name !== 'sqlite' && (dataSource.options as { poolSize?: number }).poolSize !== 1,
        // The waits read whether a job is due every `notifyWaitMs`: engines poll rarely.
        ...(waits ? { pollIntervalMs: WAITING_POLL_MS } : {}),
      },
      notify: dialect.wakeQuery?.(channel),
    });
    this.dataSource = dataSource;
    this.prefix = prefix;
    this.destroyOnClose = options.destroyDataSourceOnClose ?? false;
    const mysql = dialect.name === 'mysql';
    this.poolSizing = new PoolSizing({
      size: () => (dialect.name === 'sqlite' ? null : dataSourcePoolSize(dataSource)),
      // MySQL's polled wake-signal reads take a connection of the pool; waits and LISTEN have their own.
      own: mysql && !waits ? 1 : 0,
      sizeOption: `the DataSource's \`poolSize\` (or \`extra.${mysql ? 'connectionLimit' : 'max'}\`)`,
    });
    if (executor instanceof TypeormSqliteExecutor) {
      // Reads 0 until TypeORM's connection is open (its first real reading wakes once, harmlessly).
      const read = () => (dataSource.isInitialized ? executor.dataVersion() : 0);
      this.notifier = watcher = new SqliteCommitWatcher(read, intervalMs ?? 10);
    } else if (dialect.name === 'postgres') {
      // A connection of its own LISTENs, as `@jobs/postgres`'s does: a pg `Client` with the
      // settings of TypeORM's pool (which there is once the DataSource is up: tried again till then).
      const driver = dataSource.driver as unknown as PostgresDriver;
      const client = () => new driver.postgres.Client(driver.master.options);
      this.notifier = ownConnectionListener(client, channel, timeouts.queryTimeoutMs);
    } else if (waits) {
      const ready = () => (executor as TypeormExecutor).ready();
      const mysqlWaits = mysqlWakeWaits({
        jobsTable: dialect.table('jobs'),
        connect: () => waitConnectionOf(dataSource, ready),
        waitMs: options.notifyWaitMs ?? DEFAULT_WAKE_WAIT_MS,
        timeouts,
        // TypeORM's tables are named without their database.
        sameDatabase: true,
        run: (ring) => this.run('enqueue', ring, { transaction: false }),
        errno: driverErrno,
      });
      this.notifier = mysqlWaits.waiter;
      this.ring = mysqlWaits.ring;
    } else {
      this.notifier = this.watchWakeSignal(intervalMs ?? 20);
    }
  }

  /**
   * MySQL/MariaDB, jobs are due (an enqueue's own commit, no `tx`; a signal's waiters; released
   * jobs): ends the waits of a few idle stores on these tables so they acquire at once.
   */
  protected override jobsDue(count: number): void {
    if (!this.closed) this.ring?.ring(count);
  }

  /**
   * An engine starting with `connections` calls at once: compared with the DataSource's pool,
   * which the app sizes (the engine warns when it is smaller).
   */
  reserveConnections(connections: number): ConnectionReservation {
    return this.poolSizing.reserve(connections);
  }

  /**
   * Creates or upgrades the tables (see `SqlJobStore.migrate`); on MySQL/MariaDB also describes
   * the generated columns to TypeORM, so its schema diff of `jobsEntities` comes out empty.
   */
  override async migrate(): Promise<MigrationResult> {
    if (this.dialect.name !== 'mysql') return super.migrate();
    if (this.closed) throw new StoreError('[@jobs/typeorm] migrate: the store is closed');
    let runner: QueryRunner | undefined;
    try {
      await (this.executor as TypeormExecutor).ready();
      runner = this.dataSource.createQueryRunner();
      // Unbounded, as every migration (it may wait for another process's).
      const applied = await migrateOn(runner, this.dialect, this.prefix);
      return { applied, version: this.schemaVersion() };
    } catch (error) {
      throw this.wrap('migrate', error);
    } finally {
      await runner?.release();
    }
  }

  /** The first acquisition also opens the heartbeat's own DataSource, in the background. */
  override acquire(request: AcquireRequest): Promise<Job[]> {
    if (this.executor instanceof TypeormExecutor) this.executor.openHeartbeat();
    return super.acquire(request);
  }

  /** Does not close the app's DataSource unless `destroyDataSourceOnClose` was set. */
  override async close(): Promise<void> {
    if (this.closed) return;
    await this.ring?.drained();
    await super.close();
    if (this.destroyOnClose && this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}
