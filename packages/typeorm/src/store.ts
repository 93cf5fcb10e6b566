import { randomUUID } from 'node:crypto';
import {
  type AcquireRequest,
  assertIdentifier,
  assertKnownOptions,
  assertPositiveInteger,
  type EnqueueOptions,
  type EnqueueResult,
  type Job,
  type JobFailure,
  type JobFilter,
  type JobRef,
  type JobStore,
  JobsError,
  type ListJobsRequest,
  type NewJob,
  type RecoverResult,
  readBool,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type SqlRow,
  type StatsRow,
  type StoreCapabilities,
  StoreError,
  ValidationError,
} from '@jobs/core';
import type { DataSource, QueryRunner } from 'typeorm';
import type { Dialect, Operation, Query } from './dialects/dialect.js';
import { mysqlDialect } from './dialects/mysql.js';
import { postgresDialect } from './dialects/postgres.js';
import { sqliteDialect } from './dialects/sqlite.js';
import { type Notifier, PostgresNotifier, SqliteNotifier } from './notifier.js';
import { isJobId, Operations } from './operations.js';
import { runOnQueryRunner, type SqliteHandle, SqliteRunner } from './runner.js';

/** DataSource types the store runs on. `mariadb` uses the MySQL dialect. */
export type TypeormJobsDriver = 'postgres' | 'mysql' | 'mariadb' | 'better-sqlite3';

export interface TypeormJobStoreOptions {
  /** The app's DataSource (postgres, mysql, mariadb or better-sqlite3). Initialized on first use if it is not yet. */
  dataSource: DataSource;
  /** Prefix of the store's tables (`<prefix>jobs`, `<prefix>schedules`, `<prefix>jobs_migrations`). Default ''. */
  tablePrefix?: string;
  /** PostgreSQL schema of the tables. Default: the DataSource's `schema` option, else the search path. */
  schema?: string;
  /** `close()` also destroys the DataSource. Default false: the app owns it. */
  destroyDataSourceOnClose?: boolean;
  /**
   * SQLite only: how long a store operation waits while the app holds a TypeORM transaction on
   * the DataSource's single connection. Default 10 000 ms.
   */
  sqliteTransactionWaitMs?: number;
  /**
   * SQLite only: how often `subscribe` checks `PRAGMA data_version` for other writers. Default
   * 10 ms: a check is a shared-memory counter read, and a wake-up that finds nothing due costs
   * one read, not the write lock.
   */
  sqliteNotifyIntervalMs?: number;
}

const OPTION_KEYS = new Set([
  'dataSource',
  'tablePrefix',
  'schema',
  'destroyDataSourceOnClose',
  'sqliteTransactionWaitMs',
  'sqliteNotifyIntervalMs',
]);

/** Picks the dialect for a DataSource type, or says why it cannot. */
export function dialectFor(type: string, tablePrefix: string, schema: string | null): Dialect {
  switch (type) {
    case 'postgres':
      return postgresDialect(tablePrefix, schema);
    case 'mysql':
    case 'mariadb':
      return mysqlDialect(tablePrefix);
    case 'better-sqlite3':
      return sqliteDialect(tablePrefix);
    default:
      throw new ValidationError(
        'dataSource',
        `[@jobs/typeorm] DataSource type ${JSON.stringify(type)} is not supported; use postgres, mysql, mariadb or better-sqlite3`,
      );
  }
}

/** Statements of `lock`, then `op`. */
function* locked<T>(lock: readonly Query[], op: Operation<T>): Operation<T> {
  for (const query of lock) yield query;
  return yield* op;
}

function isDeadlock(error: unknown): boolean {
  const e = error as {
    code?: string;
    errno?: number;
    driverError?: { code?: string; errno?: number };
  };
  const code = e?.driverError?.code ?? e?.code;
  const errno = e?.driverError?.errno ?? e?.errno;
  return code === '40P01' || code === '40001' || errno === 1213 || errno === 1205;
}

/**
 * A `JobStore` over a TypeORM DataSource: jobs live in the app's database, next to its own
 * tables, and `enqueue` can join the app's transaction so a job commits or rolls back with the
 * rows that caused it.
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
export class TypeormJobStore implements JobStore {
  readonly name: string;
  readonly capabilities: StoreCapabilities;
  readonly dataSource: DataSource;
  private readonly dialect: Dialect;
  private readonly ops: Operations;
  private readonly sqlite: SqliteRunner | null;
  private readonly destroyOnClose: boolean;
  private readonly sqliteWaitMs: number;
  private readonly notifier: Notifier | null;
  private initializing: Promise<void> | null = null;
  /**
   * Calls `listener` when jobs may have been enqueued by another connection or process
   * (PostgreSQL LISTEN/NOTIFY, SQLite `PRAGMA data_version`). Absent on MySQL.
   */
  readonly subscribe?: (listener: () => void) => () => void;
  private closed = false;

  constructor(options: TypeormJobStoreOptions) {
    if (!options || typeof options.dataSource?.createQueryRunner !== 'function') {
      throw new ValidationError('dataSource', '[@jobs/typeorm] must be a TypeORM DataSource');
    }
    assertKnownOptions(options, OPTION_KEYS, '@jobs/typeorm');
    this.dataSource = options.dataSource;
    const prefix = assertIdentifier(options.tablePrefix ?? '', 'tablePrefix', {
      allowEmpty: true,
      max: 32,
    });
    const type = String(this.dataSource.options.type);
    const schemaOption =
      options.schema ?? (this.dataSource.options as { schema?: string }).schema ?? null;
    const schema =
      type === 'postgres' && schemaOption
        ? assertIdentifier(schemaOption, 'schema', { max: 63 })
        : null;
    this.dialect = dialectFor(type, prefix, schema);
    const channel = `${schema ?? 'public'}.${prefix}jobs`;
    this.ops = new Operations(
      this.dialect,
      this.dialect.kind === 'postgres'
        ? { sql: "SELECT pg_notify(?, '')", params: [channel] }
        : null,
    );
    this.name = `typeorm-${this.dialect.kind}`;
    this.capabilities = {
      notifications: this.dialect.kind !== 'mysql',
      skipLocked: this.dialect.kind !== 'sqlite',
      transactionalEnqueue: true,
      multiProcess: true,
    };
    this.sqlite = this.dialect.kind === 'sqlite' ? new SqliteRunner(this.sqliteHandle) : null;
    this.destroyOnClose = options.destroyDataSourceOnClose ?? false;
    const notifier: Notifier | null =
      this.dialect.kind === 'postgres'
        ? new PostgresNotifier(this.dataSource, channel)
        : this.sqlite
          ? new SqliteNotifier(
              this.sqliteHandle,
              assertPositiveInteger(
                options.sqliteNotifyIntervalMs ?? 10,
                'sqliteNotifyIntervalMs',
                '@jobs/typeorm',
              ),
            )
          : null;
    this.notifier = notifier;
    if (notifier) {
      this.subscribe = (listener: () => void): (() => void) => {
        if (this.closed) throw new StoreError(`[@jobs/typeorm] ${this.name}: the store is closed`);
        // The DataSource must be connected before the listener can take a connection from it.
        let remove: (() => void) | null = null;
        let cancelled = false;
        this.ready().then(
          () => {
            if (!cancelled) remove = notifier.add(listener);
          },
          () => undefined,
        );
        return () => {
          cancelled = true;
          remove?.();
        };
      };
    }
    this.sqliteWaitMs = assertPositiveInteger(
      options.sqliteTransactionWaitMs ?? 10_000,
      'sqliteTransactionWaitMs',
      '@jobs/typeorm',
    );
  }

  /** The better-sqlite3 handle under TypeORM's single SQLite connection. */
  private readonly sqliteHandle = (): SqliteHandle =>
    (this.dataSource.driver as unknown as { databaseConnection: SqliteHandle }).databaseConnection;

  private async ready(): Promise<void> {
    if (this.closed) throw new StoreError(`[@jobs/typeorm] ${this.name}: the store is closed`);
    if (this.dataSource.isInitialized) return;
    this.initializing ??= this.dataSource.initialize().then(() => undefined);
    await this.initializing;
  }

  /**
   * Runs an operation on its own connection: in a READ COMMITTED transaction when
   * `transaction`, else statement by statement.
   */
  private async run<T>(
    what: string,
    make: () => Operation<T>,
    transaction: boolean,
    retries = 0,
  ): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.ready();
        if (this.sqlite) {
          // Synchronous from the idle check to COMMIT: nothing else can use the connection between.
          for (;;) {
            await this.sqlite.idle(this.sqliteWaitMs, what);
            if (!this.sqliteHandle().inTransaction) {
              return this.sqlite.run(make(), transaction);
            }
          }
        }
        const runner = this.dataSource.createQueryRunner();
        try {
          if (!transaction) return await runOnQueryRunner(runner, this.dialect, make());
          await runner.startTransaction('READ COMMITTED');
          try {
            const result = await runOnQueryRunner(runner, this.dialect, make());
            await runner.commitTransaction();
            return result;
          } catch (error) {
            if (runner.isTransactionActive)
              await runner.rollbackTransaction().catch(() => undefined);
            throw error;
          }
        } finally {
          await runner.release();
        }
      } catch (error) {
        if (attempt < retries && isDeadlock(error)) continue;
        throw this.wrap(what, error);
      }
    }
  }

  private wrap(what: string, error: unknown): JobsError {
    if (error instanceof JobsError) return error;
    const message = error instanceof Error ? error.message : String(error);
    return new StoreError(`[@jobs/typeorm] ${what}: ${message}`, { cause: error });
  }

  /** The caller's open transaction as a QueryRunner, from an EntityManager or a QueryRunner. */
  private callerRunner(tx: unknown): QueryRunner {
    const candidate = tx as {
      queryRunner?: QueryRunner;
      query?: unknown;
      isTransactionActive?: boolean;
    };
    const runner =
      candidate && typeof candidate.query === 'function' && 'isTransactionActive' in candidate
        ? (candidate as QueryRunner)
        : candidate?.queryRunner;
    if (!runner?.isTransactionActive) {
      throw new ValidationError(
        'tx',
        '[@jobs/typeorm] must be the EntityManager (or QueryRunner) of an open transaction, e.g. the manager of dataSource.transaction(async (manager) => …)',
      );
    }
    const owner = (runner as { connection?: DataSource }).connection;
    if (owner && owner !== this.dataSource) {
      throw new ValidationError(
        'tx',
        "[@jobs/typeorm] belongs to another DataSource than the store's",
      );
    }
    return runner;
  }

  /**
   * Creates the tables if absent and applies newer schema versions, under a database lock
   * (PostgreSQL advisory lock, MySQL `GET_LOCK`, SQLite `BEGIN IMMEDIATE`). Idempotent.
   */
  async migrate(): Promise<void> {
    const { lock, unlock, transactional } = this.dialect.migrateLock;
    if (this.sqlite || transactional) {
      await this.run('migrate', () => locked(lock, this.ops.migrate()), true);
      return;
    }
    await this.ready();
    const runner = this.dataSource.createQueryRunner();
    try {
      await runOnQueryRunner(runner, this.dialect, locked(lock, this.ops.migrate()));
    } catch (error) {
      throw this.wrap('migrate', error);
    } finally {
      try {
        await runOnQueryRunner(runner, this.dialect, locked(unlock, (function* () {})()));
      } finally {
        await runner.release();
      }
    }
  }

  /** Does not close the app's DataSource unless `destroyDataSourceOnClose` was set. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.notifier?.stop();
    if (this.destroyOnClose && this.dataSource.isInitialized) await this.dataSource.destroy();
  }

  now(): Promise<Date> {
    return this.run('now', () => this.ops.now(), false);
  }

  /**
   * Inserts jobs. With `{ tx }` — the `EntityManager` of `dataSource.transaction(…)` or a
   * `QueryRunner` with an open transaction — the jobs join that transaction.
   */
  async enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    if (options?.tx === undefined || options.tx === null) {
      return this.run('enqueue', () => this.ops.enqueue(jobs), true, 3);
    }
    const runner = this.callerRunner(options.tx);
    try {
      await this.ready();
      return await runOnQueryRunner(runner, this.dialect, this.ops.enqueue(jobs));
    } catch (error) {
      throw this.wrap('enqueue', error);
    }
  }

  async acquire(request: AcquireRequest): Promise<Job[]> {
    // SQLite: an acquisition is a write transaction (`BEGIN IMMEDIATE`). Most polls of an idle
    // engine find nothing, and a plain read says so without taking or waiting for the lock.
    if (this.sqlite && !(await this.run('acquire', () => this.ops.anyCandidate(request), false))) {
      return [];
    }
    const token = randomUUID();
    const rows = await this.run(
      'acquire',
      () => this.ops.acquire(request, token),
      this.dialect.acquireInTransaction,
      3,
    );
    return this.ops.toJobs(await this.recheck(rows, token));
  }

  /** See `Dialect.recheckExclusive`. */
  private async recheck(rows: SqlRow[], token: string): Promise<SqlRow[]> {
    const recheck = this.dialect.recheckExclusive;
    if (!recheck || !rows.some((row) => readBool(row.exclusive) && row.scope !== null)) return rows;
    return this.run('acquire', () => recheck.call(this.dialect, rows, token), true, 3);
  }

  /**
   * `complete(done)` then `acquire(request)` on one connection — in one transaction where the
   * dialect acquires in one (SQLite, MySQL) — so the engine's hot path costs one call.
   */
  async completeAndAcquire(
    done: readonly JobRef[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }> {
    const token = randomUUID();
    const ops = this.ops;
    const fused = this.dialect.completeAndAcquire;
    const valid = done.filter((ref) => isJobId(ref.id));
    if (
      fused &&
      valid.length > 0 &&
      valid.length <= 1_000 &&
      request.limit > 0 &&
      request.types.length > 0
    ) {
      const result = await this.run(
        'completeAndAcquire',
        () => fused.call(this.dialect, valid, request, token),
        false,
        3,
      );
      const completed = new Set(result.completed);
      return {
        lost: done.filter((ref) => !completed.has(ref.id)).map((ref) => ref.id),
        jobs: this.ops.toJobs(await this.recheck(result.rows, token)),
      };
    }
    const result = await this.run(
      'completeAndAcquire',
      function* (): Operation<{ lost: string[]; rows: SqlRow[] }> {
        const { lost } = done.length > 0 ? yield* ops.complete(done) : { lost: [] };
        const rows = yield* ops.acquire(request, token);
        return { lost, rows };
      },
      this.dialect.acquireInTransaction || ops.settleNeedsTransaction,
      3,
    );
    return { lost: result.lost, jobs: this.ops.toJobs(await this.recheck(result.rows, token)) };
  }

  complete(jobs: readonly JobRef[]): Promise<SettleResult> {
    return this.run('complete', () => this.ops.complete(jobs), this.ops.settleNeedsTransaction, 3);
  }

  fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    return this.run(
      'fail',
      () => this.ops.fail(failures),
      this.ops.settleNeedsTransaction || failures.length > 1,
      3,
    );
  }

  release(jobs: readonly JobRef[]): Promise<SettleResult> {
    return this.run('release', () => this.ops.release(jobs), this.ops.settleNeedsTransaction, 3);
  }

  renewLeases(owner: string, leaseMs: number, jobs: readonly JobRef[]): Promise<SettleResult> {
    return this.run('renewLeases', () => this.ops.renewLeases(owner, leaseMs, jobs), false, 3);
  }

  recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    return this.run('recoverExpiredLeases', () => this.ops.recoverExpiredLeases(limit), true, 3);
  }

  nextDueAt(request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>): Promise<Date | null> {
    return this.run('nextDueAt', () => this.ops.nextDueAt(request), false);
  }

  getJob(id: string): Promise<Job | null> {
    return this.run('getJob', () => this.ops.getJob(id), false);
  }

  listJobs(request: ListJobsRequest): Promise<Job[]> {
    return this.run('listJobs', () => this.ops.listJobs(request), false);
  }

  retryDeadletter(id: string, retries: number): Promise<Job | null> {
    return this.run('retryDeadletter', () => this.ops.retryDeadletter(id, retries), true);
  }

  deleteJob(id: string): Promise<boolean> {
    return this.run('deleteJob', () => this.ops.deleteJob(id), false);
  }

  suspend(filter: JobFilter): Promise<number> {
    return this.run('suspend', () => this.ops.suspend(filter), false);
  }

  activate(filter: JobFilter): Promise<number> {
    return this.run('activate', () => this.ops.activate(filter), false);
  }

  stats(): Promise<StatsRow[]> {
    return this.run('stats', () => this.ops.stats(), false);
  }

  saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    return this.run('saveSchedule', () => this.ops.saveSchedule(request), true, 3);
  }

  getSchedule(name: string): Promise<ScheduleRecord | null> {
    return this.run('getSchedule', () => this.ops.getSchedule(name), false);
  }

  listSchedules(): Promise<ScheduleRecord[]> {
    return this.run('listSchedules', () => this.ops.listSchedules(), false);
  }

  deleteSchedule(name: string): Promise<boolean> {
    return this.run('deleteSchedule', () => this.ops.deleteSchedule(name), false);
  }

  setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.run('setSchedulePaused', () => this.ops.setSchedulePaused(name, paused), true);
  }

  dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    return this.run('dueSchedules', () => this.ops.dueSchedules(limit), false);
  }

  fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    return this.run('fireSchedule', () => this.ops.fireSchedule(fire), true, 3);
  }
}
