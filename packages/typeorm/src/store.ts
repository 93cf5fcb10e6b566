import {
  type AcquireRequest,
  assertKnownOptions,
  assertPositiveInteger,
  type Job,
  StoreError,
  ValidationError,
} from '@jobs/core';
import {
  type MysqlDialect,
  type NetworkTimeoutOptions,
  NotifyingSqlJobStore,
  parseServerVersion,
  readWakeSignal,
  resolveConnectionTimeouts,
  SQLITE_LOCAL_WAKE,
  SqliteCommitWatcher,
  type StoreNotifier,
  WakeSignalWatcher,
} from '@jobs/core/sql';
import type { DataSource, QueryRunner } from 'typeorm';
import { dialectFor, migrateOn } from './migration.js';
import { postgresListener } from './notifier.js';
import { TypeormExecutor, TypeormSqliteExecutor } from './runner.js';

/** DataSource types the store runs on. `mariadb` uses the MySQL dialect. */
export type TypeormJobsDriver = 'postgres' | 'mysql' | 'mariadb' | 'better-sqlite3';

/**
 * The store's options. On PostgreSQL and MySQL, `connectTimeoutMs` (taking a connection from
 * the DataSource's pool) and `queryTimeoutMs` (each statement) bound every call the store
 * makes (`NetworkTimeoutOptions`); keepalive is the DataSource's to set.
 */
export interface TypeormJobStoreOptions
  extends Pick<NetworkTimeoutOptions, 'connectTimeoutMs' | 'queryTimeoutMs'> {
  /** The app's DataSource (postgres, mysql, mariadb or better-sqlite3). Initialized on first use if it is not yet. */
  dataSource: DataSource;
  /**
   * Prefix of the tables (`<prefix>jobs`, `<prefix>schedules`, `<prefix>jobs_migrations`), so
   * they never clash with an app's own: default `jobs_` on MySQL/MariaDB and SQLite, `''` on
   * PostgreSQL (see `schema`). It was `''` everywhere (0.1): with the defaults, `migrate()`
   * adopts the tables under those names; `''` keeps using them where they are.
   */
  tablePrefix?: string;
  /**
   * PostgreSQL schema of the tables. Default: the DataSource's `schema`, else `jobs` (as
   * `@jobs/postgres`) — or with a `tablePrefix` given, the search path, as in 0.1.
   */
  schema?: string;
  /** `close()` also destroys the DataSource. Default false: the app owns it. */
  destroyDataSourceOnClose?: boolean;
  /** SQLite: how long a call waits while the app holds a transaction on TypeORM's one connection. Default 10 000 ms. */
  sqliteTransactionWaitMs?: number;
  /**
   * MySQL/MariaDB and SQLite: how often `subscribe` checks whether another connection added
   * jobs (the end of the jobs' key; SQLite's `PRAGMA data_version`). Default 20 ms on
   * MySQL/MariaDB, 10 ms on SQLite.
   */
  notifyIntervalMs?: number;
  /** @deprecated `notifyIntervalMs` (SQLite only). */
  sqliteNotifyIntervalMs?: number;
}

const OPTIONS = 'dataSource tablePrefix schema destroyDataSourceOnClose sqliteTransactionWaitMs';
const OPTION_KEYS = `${OPTIONS} notifyIntervalMs sqliteNotifyIntervalMs connectTimeoutMs queryTimeoutMs`;

/**
 * A `JobStore` over a TypeORM DataSource: jobs live in the app's database, next to its own
 * tables, and `enqueue` can join the app's transaction so a job commits or rolls back with the
 * rows that caused it. The SQL is `@jobs/core/sql`'s, the same as the native stores'.
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
  /**
   * Wakes subscribers when jobs may have been enqueued by another connection or process:
   * PostgreSQL LISTEN/NOTIFY, MySQL's wake signal, SQLite's `PRAGMA data_version`.
   */
  protected readonly notifier: StoreNotifier;
  private readonly destroyOnClose: boolean;
  private readonly ready: () => Promise<void>;
  private readonly prefix: string;

  constructor(options: TypeormJobStoreOptions) {
    if (!options || typeof options.dataSource?.createQueryRunner !== 'function') {
      throw new ValidationError('dataSource', '[@jobs/typeorm] must be a TypeORM DataSource');
    }
    assertKnownOptions(options, OPTION_KEYS.split(' '), '@jobs/typeorm');
    const dataSource = options.dataSource;
    const { dialect, prefix, schema } = dialectFor(dataSource.options, options);
    // `@jobs/postgres`'s channel for the same tables: either store wakes the other's engines.
    const channel = `${schema ?? 'public'}_${prefix}jobs`;
    const waitMs = options.sqliteTransactionWaitMs ?? 10_000;
    assertPositiveInteger(waitMs, 'sqliteTransactionWaitMs', '@jobs/typeorm');
    for (const key of ['notifyIntervalMs', 'sqliteNotifyIntervalMs'] as const) {
      if (options[key] !== undefined) assertPositiveInteger(options[key], key, '@jobs/typeorm');
    }
    const intervalMs =
      options.notifyIntervalMs ??
      options.sqliteNotifyIntervalMs ??
      (dialect.name === 'mysql' ? 20 : 10);
    const timeouts = resolveConnectionTimeouts(options, '@jobs/typeorm');
    let watcher: SqliteCommitWatcher | null = null;
    const executor =
      dialect.name === 'sqlite'
        ? new TypeormSqliteExecutor(dataSource, dialect, {
            source: '@jobs/typeorm',
            maxStatements: 200,
            onWake: () => watcher?.wakeSoon(),
            foreignTransactionWaitMs: waitMs,
            foreignTransactionHint:
              'A store call from inside dataSource.transaction() must pass { tx: manager }.',
          })
        : new TypeormExecutor(dataSource, dialect, timeouts, () => {
            // TypeORM read the server's version when it connected, so the dialect need not
            // ask; the text leaves out the flavour, which only the `mariadb` type states.
            const version = (dataSource.driver as { version?: string }).version;
            if (dataSource.options.type === 'mariadb' && version) {
              (dialect as MysqlDialect).useServer(parseServerVersion(`${version}-MariaDB`));
            }
          });
    super({
      label: '@jobs/typeorm',
      name: `typeorm-${dialect.name}`,
      dialect,
      executor,
      capabilities: {
        notifications: true,
        skipLocked: dialect.name !== 'sqlite',
        transactionalEnqueue: true,
        multiProcess: true,
      },
      notify:
        dialect.name === 'postgres'
          ? { sql: "SELECT pg_notify(?, '')", params: [channel] }
          : dialect.name === 'sqlite'
            ? SQLITE_LOCAL_WAKE
            : null,
    });
    this.dataSource = dataSource;
    this.ready = executor.ready;
    this.prefix = prefix;
    this.destroyOnClose = options.destroyDataSourceOnClose ?? false;
    if (executor instanceof TypeormSqliteExecutor) {
      // Until TypeORM's connection is open it reads 0 (its first real reading then wakes
      // subscribers once, harmlessly).
      const read = () => (dataSource.isInitialized ? executor.dataVersion() : 0);
      this.notifier = watcher = new SqliteCommitWatcher(read, intervalMs);
    } else if (dialect.name === 'postgres') {
      // The listener retries until the DataSource is connected.
      this.notifier = postgresListener(dataSource, channel, timeouts.queryTimeoutMs);
    } else {
      const signal = dialect.wakeSignal as NonNullable<typeof dialect.wakeSignal>;
      const read = () =>
        this.closed
          ? null
          : this.run('subscribe', () => readWakeSignal(signal), { transaction: false });
      this.notifier = new WakeSignalWatcher(read, intervalMs);
    }
  }

  /**
   * Creates or upgrades the tables (see `SqlJobStore.migrate`); on MySQL/MariaDB also describes
   * the generated columns to TypeORM, so its schema diff of `jobsEntities` comes out empty.
   */
  override async migrate(): Promise<void> {
    if (this.dialect.name !== 'mysql') return super.migrate();
    if (this.closed) throw new StoreError('[@jobs/typeorm] migrate: the store is closed');
    let runner: QueryRunner | undefined;
    try {
      await this.ready();
      runner = this.dataSource.createQueryRunner();
      await migrateOn(runner, this.dialect, this.prefix);
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
    await super.close();
    if (this.destroyOnClose && this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}
