import { assertKnownOptions, assertPositiveInteger, StoreError, ValidationError } from '@jobs/core';
import {
  type MysqlDialect,
  parseServerVersion,
  SqliteCommitWatcher,
  type SqliteConnection,
  SqliteSyncRunner,
  SqlJobStore,
} from '@jobs/core/sql';
import type { DataSource, QueryRunner } from 'typeorm';
import { dialectFor, migrateOn } from './migration.js';
import { type Notifier, PostgresNotifier } from './notifier.js';
import { TypeormExecutor } from './runner.js';

/** DataSource types the store runs on. `mariadb` uses the MySQL dialect. */
export type TypeormJobsDriver = 'postgres' | 'mysql' | 'mariadb' | 'better-sqlite3';

export interface TypeormJobStoreOptions {
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
  /** SQLite: how often `subscribe` checks `PRAGMA data_version` (a shared-memory read). Default 10 ms. */
  sqliteNotifyIntervalMs?: number;
}

const OPTIONS = 'dataSource tablePrefix schema destroyDataSourceOnClose sqliteTransactionWaitMs';
const OPTION_KEYS = new Set(`${OPTIONS} sqliteNotifyIntervalMs`.split(' '));

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
export class TypeormJobStore extends SqlJobStore {
  readonly dataSource: DataSource;
  private readonly destroyOnClose: boolean;
  private readonly notifier: Notifier | null;
  private readonly typeorm: TypeormExecutor;
  private readonly prefix: string;
  /**
   * Calls `listener` when jobs may have been enqueued by another connection or process
   * (PostgreSQL LISTEN/NOTIFY, SQLite `PRAGMA data_version`). Absent on MySQL.
   */
  readonly subscribe?: (listener: () => void) => () => void;

  constructor(options: TypeormJobStoreOptions) {
    if (!options || typeof options.dataSource?.createQueryRunner !== 'function') {
      throw new ValidationError('dataSource', '[@jobs/typeorm] must be a TypeORM DataSource');
    }
    assertKnownOptions(options, OPTION_KEYS, '@jobs/typeorm');
    const dataSource = options.dataSource;
    const { dialect, prefix, schema } = dialectFor(dataSource.options, options);
    // `@jobs/postgres`'s channel for the same tables: either store wakes the other's engines.
    const channel = `${schema ?? 'public'}_${prefix}jobs`;
    const connection = (): SqliteConnection =>
      (dataSource.driver as unknown as { databaseConnection: SqliteConnection }).databaseConnection;
    const sqlite = dialect.name === 'sqlite' ? new SqliteSyncRunner(connection, 200) : null;
    const waitMs = options.sqliteTransactionWaitMs ?? 10_000;
    const intervalMs = options.sqliteNotifyIntervalMs ?? 10;
    assertPositiveInteger(waitMs, 'sqliteTransactionWaitMs', '@jobs/typeorm');
    assertPositiveInteger(intervalMs, 'sqliteNotifyIntervalMs', '@jobs/typeorm');
    const executor = new TypeormExecutor(
      dataSource,
      dialect,
      sqlite && { runner: sqlite, busy: () => connection().inTransaction, waitMs },
      (tx) => callerRunner(dataSource, tx),
      () => {
        // TypeORM read the server's version when it connected, so the dialect need not ask;
        // the text leaves out the flavour, which only the `mariadb` type states.
        const version = (dataSource.driver as { version?: string }).version;
        if (dataSource.options.type === 'mariadb' && version) {
          (dialect as MysqlDialect).useServer(parseServerVersion(`${version}-MariaDB`));
        }
      },
    );
    super({
      label: '@jobs/typeorm',
      name: `typeorm-${dialect.name}`,
      dialect,
      executor,
      capabilities: {
        notifications: dialect.name !== 'mysql',
        skipLocked: dialect.name !== 'sqlite',
        transactionalEnqueue: true,
        multiProcess: true,
      },
      notify:
        dialect.name === 'postgres' ? { sql: "SELECT pg_notify(?, '')", params: [channel] } : null,
    });
    this.dataSource = dataSource;
    this.typeorm = executor;
    this.prefix = prefix;
    this.destroyOnClose = options.destroyDataSourceOnClose ?? false;
    // SQLite: core's `PRAGMA data_version` watcher on TypeORM's connection; until that is
    // connected it reads 0 (its first real reading then wakes subscribers once, harmlessly).
    const version = { sql: 'PRAGMA data_version', params: [] };
    const watcher =
      sqlite &&
      new SqliteCommitWatcher(
        () =>
          dataSource.isInitialized ? Number(sqlite.execute(version).rows[0]?.data_version) : 0,
        intervalMs,
      );
    // PostgreSQL: the listener retries until the DataSource is connected.
    const notifier: Notifier | null =
      dialect.name === 'postgres'
        ? new PostgresNotifier(dataSource, channel)
        : watcher && { add: (l) => watcher.subscribe(l), stop: async () => watcher.stop(true) };
    this.notifier = notifier;
    if (!notifier) return;
    this.subscribe = (listener) => {
      if (this.closed) throw new StoreError(`[@jobs/typeorm] ${this.name}: the store is closed`);
      return notifier.add(listener);
    };
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
      await this.typeorm.ready();
      runner = this.dataSource.createQueryRunner();
      await migrateOn(runner, this.dialect, this.prefix);
    } catch (error) {
      throw this.wrap('migrate', error);
    } finally {
      await runner?.release();
    }
  }

  /** Does not close the app's DataSource unless `destroyDataSourceOnClose` was set. */
  override async close(): Promise<void> {
    if (this.closed) return;
    await super.close();
    await this.notifier?.stop();
    if (this.destroyOnClose && this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}

/** The caller's open transaction as a QueryRunner, from an EntityManager or a QueryRunner. */
function callerRunner(dataSource: DataSource, tx: unknown): QueryRunner {
  const given = (tx ?? {}) as Partial<QueryRunner> & { queryRunner?: QueryRunner };
  // A QueryRunner says whether it is in a transaction; an EntityManager holds its QueryRunner.
  const runner =
    'isTransactionActive' in Object(given) ? (given as QueryRunner) : given.queryRunner;
  if (!runner?.isTransactionActive) {
    throw new ValidationError(
      'tx',
      '[@jobs/typeorm] must be the EntityManager (or QueryRunner) of an open transaction, e.g. the manager of dataSource.transaction(async (manager) => …)',
    );
  }
  if (runner.connection !== dataSource) {
    throw new ValidationError(
      'tx',
      "[@jobs/typeorm] belongs to another DataSource than the store's",
    );
  }
  return runner;
}
