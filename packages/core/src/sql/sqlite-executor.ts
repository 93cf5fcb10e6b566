/**
 * Runs operations synchronously on a better-sqlite3 connection, for `@jobs/sqlite` (its own
 * connection, or the app's) and `@jobs/typeorm` (TypeORM's one connection): statements through
 * `SqliteSyncRunner` (prepared once; `BEGIN IMMEDIATE` … COMMIT, so nothing else uses the
 * connection until COMMIT). An app sharing the connection may hold a transaction open across
 * awaits (`BEGIN` … `ROLLBACK`); work joining it — an acquisition, a lease renewal — would be
 * undone with it while the engine believes it holds the jobs, so the store's own work waits
 * for it to end instead (being synchronous, the store never leaves one open itself).
 */
import { ValidationError } from '../errors.js';
import { SQLITE_LOCAL_WAKE, type SqliteConnection, SqliteSyncRunner } from './dialects/sqlite.js';

export { SQLITE_LOCAL_WAKE };

import {
  driveSync,
  type Executor,
  OneAtATime,
  type Operation,
  type Query,
  type QueryOutcome,
  type RunOptions,
} from './executor.js';

/** Statements executed and transactions committed through a store, for benchmarks. */
export interface SqliteStoreCounters {
  statements: number;
  transactions: number;
}

/** A connection the executor may also close (better-sqlite3's `Database`). */
export interface SqliteFileConnection extends SqliteConnection {
  close(): void;
}

export interface SqliteExecutorOptions {
  /** The store's connection (read on each use: an app may reconnect it). */
  connection: () => SqliteConnection;
  /** Runs after an operation that yielded `SQLITE_LOCAL_WAKE` succeeded. */
  onWake?(): void;
  /** How long the store's work waits for a transaction it did not open to end. Default 5000. */
  foreignTransactionWaitMs?: number;
  /** What to do about such a transaction, said when the wait gives up. */
  foreignTransactionHint?: string;
  /**
   * Opens another connection to the same file, for handlers' transactions (`ctx.transaction`),
   * on first use. Absent (an in-memory database): the store has no handler transactions.
   */
  openConnection?: () => SqliteFileConnection;
  /** `close()` also closes the store's connection. */
  closeConnection?: boolean;
  /** The package that speaks in messages, e.g. `@jobs/sqlite`. */
  label?: string;
  /** Prepared statements kept (default 500). */
  maxStatements?: number;
}

const NOT_SENT: QueryOutcome = { rows: [], affected: 0, insertId: null };
const BEGIN: Query = { sql: 'BEGIN IMMEDIATE', params: [] };
const COMMIT: Query = { sql: 'COMMIT', params: [] };
const ROLLBACK: Query = { sql: 'ROLLBACK', params: [] };
const DATA_VERSION: Query = { sql: 'PRAGMA data_version', params: [] };

export class SqliteSyncExecutor implements Executor {
  readonly counters: SqliteStoreCounters = { statements: 0, transactions: 0 };
  protected readonly runner: SqliteSyncRunner;
  protected readonly label: string;
  /** The connection handlers' transactions run on, opened on first use. */
  private handlerDb: { db: SqliteFileConnection; runner: SqliteSyncRunner } | null = null;
  /** The store's transactions (`ctx.transaction`, transactional steps), one at a time. */
  protected readonly transactionTurns = new OneAtATime();
  /** Open while a handler's transaction is: the store's own work waits for it. */
  private handlerOpen: Promise<void> | null = null;

  constructor(protected readonly options: SqliteExecutorOptions) {
    this.runner = new SqliteSyncRunner(options.connection, options.maxStatements);
    this.label = options.label ?? '@jobs/core/sql';
  }

  /** Synchronous inside: the work is done when the promise is returned. */
  async run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    if (options.tx === undefined) {
      // A handler's transaction holds the file's write lock on another connection across
      // awaits: this connection's work would block the event loop waiting for it
      // (better-sqlite3 waits synchronously), so it waits its turn here instead.
      while (this.handlerOpen) await this.handlerOpen;
      await this.outsideForeignTransaction();
    }
    return this.runSync(op, options);
  }

  /** Runs `op` now; with `tx` (a connection inside a transaction), inside that transaction. */
  runSync<T>(op: Operation<T>, { transaction, tx }: RunOptions): T {
    const db = tx === undefined ? this.options.connection() : this.callerConnection(tx);
    let woke = false;
    const drive = (): T =>
      driveSync(op, (query) => {
        if (query === SQLITE_LOCAL_WAKE) {
          woke = true;
          return NOT_SENT;
        }
        this.counters.statements++;
        return this.runner.execute(query, db);
      });
    if (transaction && tx === undefined) this.counters.transactions++;
    // A connection already in a transaction (the caller's) runs the work as a savepoint in it.
    const result = transaction ? this.runner.transaction(drive, db) : drive();
    if (woke) this.options.onWake?.();
    return result;
  }

  /** The connection's `PRAGMA data_version`: it changes when others commit (`SqliteCommitWatcher`). */
  dataVersion(): number {
    return Number(this.runner.execute(DATA_VERSION).rows[0]?.data_version);
  }

  /**
   * `ctx.transaction`: `work` gets a connection of the store's own to the same file, inside
   * `BEGIN IMMEDIATE` (it holds the file's write lock until it ends: keep it short). One
   * handler transaction at a time per store.
   */
  async transaction<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T> {
    const { openConnection } = this.options;
    if (!openConnection) {
      throw new ValidationError(
        'ctx.transaction',
        `[${this.label}] ctx.transaction needs a database file the store can open a second connection to`,
      );
    }
    return this.transactionTurns.run(async () => {
      while (this.handlerOpen) await this.handlerOpen;
      let opened = (): void => {};
      this.handlerOpen = new Promise((resolve) => {
        opened = resolve;
      });
      try {
        if (!this.handlerDb) {
          const db = openConnection();
          this.handlerDb = { db, runner: new SqliteSyncRunner(() => db) };
        }
        const { db, runner } = this.handlerDb;
        runner.execute(BEGIN, db);
        try {
          const result = await work(db, async (op) =>
            driveSync(op, (query) =>
              query === SQLITE_LOCAL_WAKE ? NOT_SENT : runner.execute(query),
            ),
          );
          runner.execute(COMMIT, db);
          return result;
        } catch (error) {
          if (db.inTransaction) runner.execute(ROLLBACK, db);
          throw error;
        }
      } finally {
        this.handlerOpen = null;
        opened();
      }
    });
  }

  async close(): Promise<void> {
    this.handlerDb?.db.close();
    this.handlerDb = null;
    if (this.options.closeConnection) (this.options.connection() as SqliteFileConnection).close();
  }

  /** The caller's `tx`: a better-sqlite3 connection inside a transaction (`db.transaction`). */
  protected callerConnection(tx: unknown): SqliteConnection {
    const db = tx as Partial<SqliteConnection & { transaction: unknown }> | null;
    const ok = typeof db?.prepare === 'function' && typeof db.transaction === 'function';
    if (!ok || typeof db.inTransaction !== 'boolean') {
      throw new ValidationError(
        'tx',
        `[${this.label}] enqueue: tx must be a better-sqlite3 Database (e.g. store.db) inside db.transaction(...)`,
      );
    }
    if (db.inTransaction) return db as SqliteConnection;
    throw new ValidationError(
      'tx',
      `[${this.label}] enqueue: the connection is not in a transaction; call enqueue synchronously inside db.transaction(() => { ... }) (no await before it)`,
    );
  }

  /** Resolves once the connection is outside any transaction; fails after the wait bound. */
  protected async outsideForeignTransaction(): Promise<void> {
    const { foreignTransactionWaitMs: limitMs = 5000, foreignTransactionHint = '' } = this.options;
    const started = performance.now();
    for (let pauseMs = 1; this.options.connection().inTransaction; ) {
      if (performance.now() - started >= limitMs) {
        throw new Error(
          `the connection stayed inside a transaction the store did not open for ${limitMs} ms; the store never runs its own work inside it. ${foreignTransactionHint}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
      pauseMs = Math.min(pauseMs * 2, 20);
    }
  }
}
