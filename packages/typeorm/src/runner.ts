/**
 * Drives `@jobs/core/sql` operations on a DataSource. PostgreSQL and MySQL: on QueryRunners,
 * through core's `NetworkExecutor` (deadlines on every connect, statement and transaction
 * step; lease renewals on a DataSource of one connection of their own). SQLite: synchronously
 * on TypeORM's one better-sqlite3 connection, through core's `SqliteSyncExecutor`.
 */
import { ValidationError } from '@jobs/core';
import {
  type BoundedSession,
  type ConnectionTimeouts,
  type Dialect,
  destroySocket,
  driveAsync,
  endWithin,
  type MysqlDialect,
  MysqlServerCheck,
  NetworkExecutor,
  OpenConnections,
  type Operation,
  outcome,
  type Query,
  type QueryOutcome,
  type RunOptions,
  SharedUntilFailure,
  type SocketHolder,
  SQLITE_LOCAL_WAKE,
  type SqliteConnection,
  type SqliteExecutorOptions,
  SqliteSyncExecutor,
  type SqlRow,
  withDeadline,
} from '@jobs/core/sql';
import type { DataSource, DataSourceOptions, EntityManager, QueryRunner } from 'typeorm';

const SOURCE = '@jobs/typeorm';

/** What `QueryRunner.query(…, true)` returns. */
type Result = { records?: SqlRow[]; affected?: number; raw?: { insertId?: unknown } | null };

/** Runs one statement on a QueryRunner. */
async function queryOn(runner: QueryRunner, dialect: Dialect, query: Query): Promise<QueryOutcome> {
  const sql = dialect.placeholders(query.sql);
  const result = (await runner.query(sql, [...query.params], true)) as Result;
  const rows = Array.isArray(result.records) ? result.records : [];
  return outcome(rows, result.affected ?? rows.length, result.raw?.insertId);
}

/**
 * Drives `op` on a TypeORM QueryRunner; driver errors are thrown into the operation. SQLite's
 * local wake-up is not a statement: skipped (the store's own calls wake after their commit).
 */
export function runOnQueryRunner<T>(runner: QueryRunner, dialect: Dialect, op: Operation<T>) {
  return driveAsync(op, async (query) =>
    query === SQLITE_LOCAL_WAKE ? outcome([], 0) : queryOn(runner, dialect, query),
  );
}

/** The caller's open transaction as a QueryRunner, from an EntityManager or a QueryRunner. */
function callerRunner(dataSource: DataSource, tx: unknown): QueryRunner {
  // A QueryRunner says whether it is in a transaction; an EntityManager holds its QueryRunner.
  const given = Object(tx) as Partial<QueryRunner> & { queryRunner?: QueryRunner };
  const runner = 'isTransactionActive' in given ? (given as QueryRunner) : given.queryRunner;
  if (runner?.isTransactionActive && runner.connection === dataSource) return runner;
  const pass =
    'pass the EntityManager (or QueryRunner) of an open transaction, e.g. the manager of dataSource.transaction(async (manager) => …)';
  // A DataSource (or its own manager) runs each query on a pooled connection, outside any
  // transaction of yours; a QueryRunner or manager outside a transaction commits at once.
  const shape = given as { createQueryRunner?: unknown; transaction?: unknown };
  const what =
    typeof shape.createQueryRunner === 'function'
      ? 'is a DataSource'
      : 'isTransactionActive' in given
        ? 'is a QueryRunner outside a transaction (no startTransaction())'
        : typeof shape.transaction === 'function'
          ? 'is an EntityManager outside a transaction (e.g. dataSource.manager)'
          : 'is no EntityManager or QueryRunner';
  throw new ValidationError(
    'tx',
    runner?.isTransactionActive
      ? "[@jobs/typeorm] belongs to another DataSource than the store's"
      : `[@jobs/typeorm] ${what}, so the job would commit on its own, outside your transaction: ${pass}`,
  );
}

/** The driver's connection under a QueryRunner: pg's `Client`, or mysql2's connection. */
type DriverConnection = SocketHolder & { destroy?(): void };

const driverConnection = (runner: QueryRunner): DriverConnection =>
  (runner as unknown as { databaseConnection: DriverConnection }).databaseConnection;

/** Destroys a driver connection's socket (mysql2's `destroy()` also drops it from its pool). */
function destroyConnection(connection: DriverConnection): void {
  connection.destroy?.();
  destroySocket(connection);
}

/** Initializes the DataSource on first use if the app has not, then awaits `onReady` once. */
function initializer(dataSource: DataSource, onReady?: () => unknown): () => Promise<void> {
  const started = new SharedUntilFailure(async () => {
    if (!dataSource.isInitialized) await dataSource.initialize();
    await onReady?.();
  });
  return () => started.get();
}

/** PostgreSQL and MySQL: QueryRunners of the DataSource, READ COMMITTED in a transaction. */
export class TypeormExecutor extends NetworkExecutor<QueryRunner> {
  readonly ready: () => Promise<void>;
  /**
   * Lease renewals run on a DataSource of one connection, opened on first use with the app's
   * options: a heartbeat queued behind the app's busy pool is a lost lease, a job run twice.
   */
  private readonly heartbeat = new SharedUntilFailure(() => this.openHeartbeatSource());
  /** The heartbeat's connections, destroyed when they do not say goodbye in time. */
  private readonly heartbeatOpen = new OpenConnections<DriverConnection>(destroyConnection);

  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
    timeouts: ConnectionTimeouts,
  ) {
    super(timeouts);
    // MySQL/MariaDB: the server is checked once, as `@jobs/mysql` does; the dialect learns it.
    const server =
      dialect.name === 'mysql'
        ? new MysqlServerCheck(() => this.readServerVersion(), dialect as MysqlDialect, SOURCE)
        : null;
    this.ready = initializer(dataSource, () => server?.serverVersion());
  }

  /** The DataSource's start (its first connection) is bounded like any connect. */
  protected override beforeRun(): Promise<void> {
    return withDeadline(this.ready(), this.timeouts.connectTimeoutMs, 'connectTimeoutMs', () => {});
  }

  /** Opens the heartbeat's DataSource in the background, so the first renewal finds it ready. */
  openHeartbeat(): void {
    this.heartbeat.get().catch(() => {});
  }

  /** Ends the heartbeat's DataSource within a second; the app's DataSource is the store's to leave. */
  async close(): Promise<void> {
    const destroyed = this.heartbeat.take()?.then((source) => source.destroy());
    if (destroyed) await endWithin(() => destroyed, this.heartbeatOpen);
  }

  protected async take(purpose: 'main' | 'heartbeat'): Promise<QueryRunner> {
    const source = purpose === 'heartbeat' ? await this.heartbeat.get() : this.dataSource;
    const runner = source.createQueryRunner();
    await runner.connect();
    if (purpose === 'heartbeat') this.heartbeatOpen.add(driverConnection(runner));
    return runner;
  }

  protected async release(runner: QueryRunner, broken: boolean): Promise<void> {
    if (broken) this.heartbeatOpen.delete(driverConnection(runner));
    // pg's pool takes back a destroyed client unless told why (mysql2's destroy() dropped it).
    const pg = runner as { releasePostgresConnection?(error?: unknown): Promise<void> };
    const release =
      broken && pg.releasePostgresConnection
        ? pg.releasePostgresConnection(new Error('destroyed: it missed a deadline'))
        : runner.release();
    await release.catch(() => {});
  }

  protected destroy(runner: QueryRunner): void {
    destroyConnection(driverConnection(runner));
  }

  protected execute(runner: QueryRunner, query: Query): Promise<QueryOutcome> {
    return queryOn(runner, this.dialect, query);
  }

  protected callerConnection(tx: unknown): QueryRunner {
    return callerRunner(this.dataSource, tx);
  }

  // TypeORM's own transaction calls, so the runner (and a handler's EntityManager) knows it is
  // in one.
  protected async begin(session: BoundedSession<QueryRunner>): Promise<void> {
    await session.bound(session.connection.startTransaction('READ COMMITTED'));
  }

  protected override async commit(session: BoundedSession<QueryRunner>): Promise<void> {
    await session.bound(session.connection.commitTransaction());
  }

  protected override async rollback(session: BoundedSession<QueryRunner>): Promise<void> {
    await session.bound(session.connection.rollbackTransaction());
  }

  /** `ctx.transaction`'s work gets the transaction's EntityManager. */
  protected override handle(runner: QueryRunner): EntityManager {
    return runner.manager;
  }

  /** A DataSource of one connection with the app's options, which gives up connecting in time. */
  private async openHeartbeatSource(): Promise<DataSource> {
    const options = this.dataSource.options as DataSourceOptions & { extra?: object };
    const connectMs = this.timeouts.connectTimeoutMs;
    const [one, connect] =
      options.type === 'postgres'
        ? [{ max: 1 }, { connectTimeoutMS: connectMs }]
        : [{ connectionLimit: 1 }, { connectTimeout: connectMs }];
    const DataSourceClass = this.dataSource.constructor as new (o: DataSourceOptions) => DataSource;
    const source = new DataSourceClass({
      ...options,
      ...{ entities: [], migrations: [], subscribers: [], synchronize: false },
      ...{ migrationsRun: false, dropSchema: false, poolSize: 1, ...connect },
      extra: { ...options.extra, ...one },
    } as DataSourceOptions);
    return source.initialize();
  }
}

/** SQLite: synchronous on TypeORM's connection; a caller's `tx` and handlers' transactions through TypeORM. */
export class TypeormSqliteExecutor extends SqliteSyncExecutor {
  readonly ready: () => Promise<void>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
    options: Omit<SqliteExecutorOptions, 'connection'>,
  ) {
    const driver = dataSource.driver as unknown as { databaseConnection: SqliteConnection };
    super({ ...options, connection: () => driver.databaseConnection });
    this.ready = initializer(dataSource);
  }

  override async run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    await this.ready();
    if (options.tx === undefined) return super.run(op, options);
    return runOnQueryRunner(callerRunner(this.dataSource, options.tx), this.dialect, op);
  }

  /**
   * `ctx.transaction` (and a transactional step): `work` gets the transaction's EntityManager,
   * on TypeORM's one connection — one transaction at a time. TypeORM's SQLite drivers share one
   * QueryRunner, so two transactions opened together are one: the second's `BEGIN` fails and its
   * rollback ends the first, whose completion then commits statement by statement (a child job
   * gone without its result), or the second becomes a savepoint of the first and commits or
   * rolls back with it. Nor does one start inside the app's transaction on that connection.
   */
  override async transaction<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T> {
    await this.ready();
    return this.transactionTurns.run(async () => {
      await this.outsideForeignTransaction();
      return this.dataSource.transaction((manager) =>
        work(manager, (op) =>
          runOnQueryRunner(manager.queryRunner as QueryRunner, this.dialect, op),
        ),
      );
    });
  }
}
