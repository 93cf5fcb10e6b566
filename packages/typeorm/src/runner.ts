/**
 * Drives `@jobs/core/sql` operations on a DataSource: on QueryRunners, or on SQLite synchronously
 * on TypeORM's one better-sqlite3 connection with core's `SqliteSyncRunner` (as `@jobs/sqlite`).
 */
import {
  type Dialect,
  driveAsync,
  driveSync,
  type Executor,
  type Operation,
  outcome,
  type RunOptions,
  type SqliteSyncRunner,
  type SqlRow,
} from '@jobs/core/sql';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';

/** Drives `op` on a TypeORM QueryRunner; driver errors are thrown into the operation. */
export function runOnQueryRunner<T>(runner: QueryRunner, dialect: Dialect, op: Operation<T>) {
  return driveAsync(op, async (query) => {
    const sql = dialect.placeholders(query.sql);
    const raw = (await runner.query(sql, [...query.params], true)) as {
      records?: SqlRow[];
      affected?: number;
      raw?: { insertId?: unknown } | null;
    };
    const rows = Array.isArray(raw.records) ? raw.records : [];
    return outcome(rows, raw.affected ?? rows.length, raw.raw?.insertId);
  });
}

/** SQLite: the runner on TypeORM's connection, whether the app holds it in a transaction, and how long to wait for that. */
type SqliteSide = { runner: SqliteSyncRunner; busy: () => boolean; waitMs: number };

/**
 * Runs operations on a DataSource: on a fresh QueryRunner (READ COMMITTED when in a
 * transaction), on the caller's when `tx` is given, or synchronously on SQLite.
 */
export class TypeormExecutor implements Executor {
  private initializing: Promise<void> | null = null;

  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
    private readonly sqlite: SqliteSide | null,
    /** Turns the caller's `tx` into its QueryRunner (and checks it). */
    private readonly callerRunner: (tx: unknown) => QueryRunner,
    /** Called once the DataSource is initialized (by the app or by `ready`). */
    private readonly onReady: () => void,
  ) {}

  /** Initializes the DataSource on first use if the app has not. */
  async ready(): Promise<void> {
    const { dataSource } = this;
    this.initializing ??= (
      dataSource.isInitialized ? Promise.resolve() : dataSource.initialize()
    ).then(() => this.onReady());
    await this.initializing;
  }

  async run<T>(op: Operation<T>, { transaction, tx, purpose }: RunOptions): Promise<T> {
    await this.ready();
    if (tx !== undefined) return runOnQueryRunner(this.callerRunner(tx), this.dialect, op);
    if (purpose === 'heartbeat' && !this.sqlite) return this.onHeartbeatRunner(op);
    if (this.sqlite) {
      const { runner, busy, waitMs } = this.sqlite;
      for (const deadline = Date.now() + waitMs; busy(); ) {
        if (Date.now() > deadline) {
          throw new Error(
            `the DataSource's SQLite connection stayed inside a transaction for ${waitMs} ms; ` +
              'a store call from inside dataSource.transaction() must pass { tx: manager }',
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      // Synchronous from here to COMMIT: nothing else can use the connection in between.
      const drive = (): T => driveSync(op, (query) => runner.execute(query));
      return transaction ? runner.transaction(drive) : drive();
    }
    if (transaction) {
      return this.dataSource.transaction('READ COMMITTED', (manager) =>
        runOnQueryRunner(manager.queryRunner as QueryRunner, this.dialect, op),
      );
    }
    const runner = this.dataSource.createQueryRunner();
    try {
      return await runOnQueryRunner(runner, this.dialect, op);
    } finally {
      await runner.release();
    }
  }

  /**
   * Lease renewals on a connection kept for them (taken from the pool once, then held), so a
   * heartbeat never queues behind a busy pool: a late heartbeat is a lost lease. A renewal that
   * fails gives the connection back; the next one takes a new one.
   */
  private heartbeat: QueryRunner | null = null;
  private async onHeartbeatRunner<T>(op: Operation<T>): Promise<T> {
    this.heartbeat ??= this.dataSource.createQueryRunner();
    const runner = this.heartbeat;
    try {
      return await runOnQueryRunner(runner, this.dialect, op);
    } catch (error) {
      this.heartbeat = null;
      await runner.release().catch(() => {});
      throw error;
    }
  }

  /** `ctx.transaction`: `work` gets the transaction's EntityManager; READ COMMITTED. */
  async transaction<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T> {
    await this.ready();
    const body = (manager: EntityManager) =>
      work(manager, (op) => runOnQueryRunner(manager.queryRunner as QueryRunner, this.dialect, op));
    // SQLite has one isolation level (serializable); TypeORM refuses to name another there.
    return this.sqlite
      ? this.dataSource.transaction(body)
      : this.dataSource.transaction('READ COMMITTED', body);
  }

  /** Gives the heartbeat's connection back; the DataSource is the app's to destroy. */
  async close(): Promise<void> {
    const runner = this.heartbeat;
    this.heartbeat = null;
    await runner?.release().catch(() => {});
  }
}
