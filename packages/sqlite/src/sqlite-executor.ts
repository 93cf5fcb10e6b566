/**
 * Runs `@jobs/core/sql` operations on better-sqlite3, synchronously, through core's
 * `SqliteSyncRunner` (cached prepared statements; `BEGIN IMMEDIATE` … COMMIT, so nothing else
 * uses the connection until COMMIT); this file adds the caller's `tx`, the local wake-up and
 * the counters.
 */
import { type Clock, ValidationError } from '@jobs/core';
import {
  driveSync,
  type Executor,
  type Operation,
  type Query,
  type QueryOutcome,
  type RunOptions,
  SQLITE_CLOCK_FUNCTION,
  SqliteSyncRunner,
} from '@jobs/core/sql';
import type Database from 'better-sqlite3';

type Connection = Database.Database;
/**
 * `clock`: an injected clock, read in SQL as `SQLITE_CLOCK_FUNCTION`. `wake`: the store's
 * `notify` query, never sent: an operation yields it where it made jobs acquirable, and
 * `onWake` runs once the operation succeeded. `closeDb`: `close()` closes the connection.
 * `foreignTransactionWaitMs`: how long an operation waits for a transaction the store did not
 * open to end on its connection (see `run`). Default 5000.
 */
type Options = {
  closeDb?: boolean;
  /** Opens another connection to the same file, for handlers' transactions (`ctx.transaction`). */
  openConnection?: () => Connection;
  clock?: Clock;
  wake?: Query;
  onWake?(): void;
  foreignTransactionWaitMs?: number;
};

/** Statements executed and transactions committed through this store, for benchmarks. */
export interface SqliteStoreCounters {
  statements: number;
  transactions: number;
}

export class SqliteExecutor implements Executor {
  readonly counters: SqliteStoreCounters = { statements: 0, transactions: 0 };
  private readonly runner: SqliteSyncRunner;
  /** The connection handlers' transactions run on, opened on first use. */
  private handlerDb: { db: Connection; runner: SqliteSyncRunner } | null = null;
  /** Handlers' transactions, one at a time; the store's own work waits while one is open. */
  private handlerTurn: Promise<void> = Promise.resolve();
  private handlerOpen: Promise<void> | null = null;

  constructor(
    private readonly db: Connection,
    private readonly options: Options = {},
  ) {
    this.runner = new SqliteSyncRunner(() => db);
    const clock = options.clock;
    if (clock) db.function(SQLITE_CLOCK_FUNCTION, { deterministic: true }, () => clock.now());
  }

  /**
   * Synchronous inside: the work is done when the promise is returned. Without `tx`, never
   * inside a transaction the store did not open: an app sharing the connection may hold one
   * open across awaits (`BEGIN` … `ROLLBACK`), and work joining it — an acquisition, a lease
   * renewal — would be undone with it while this engine believes it holds the jobs. The store
   * waits for it to end instead (its own work is synchronous, so it never leaves one open).
   */
  async run<T>(op: Operation<T>, options: RunOptions): Promise<T> {
    // A handler's transaction holds the file's write lock on another connection across awaits:
    // this connection's work would block the event loop waiting for it (better-sqlite3 waits
    // synchronously), so it waits its turn here instead.
    while (options.tx === undefined && this.handlerOpen) await this.handlerOpen;
    if (options.tx === undefined && this.db.inTransaction) await this.outsideTransaction();
    return this.runSync(op, options);
  }

  /** Runs `op` now; with `tx` (a connection inside `db.transaction`), inside that transaction. */
  runSync<T>(op: Operation<T>, { transaction, tx }: RunOptions): T {
    const db = tx === undefined ? this.db : callerConnection(tx);
    let woke = false;
    const drive = (): T =>
      driveSync(op, (query): QueryOutcome => {
        if (query === this.options.wake) {
          woke = true;
          return { rows: [], affected: 0, insertId: null };
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

  /**
   * `ctx.transaction`: `work` gets a better-sqlite3 connection of the store's own to the same
   * file, inside `BEGIN IMMEDIATE` (it holds the file's write lock until it ends: keep it short).
   * One handler transaction at a time per store.
   */
  async transaction<T>(
    work: (handle: unknown, run: <R>(op: Operation<R>) => Promise<R>) => Promise<T>,
  ): Promise<T> {
    const { openConnection } = this.options;
    if (!openConnection || this.db.memory) {
      throw new ValidationError(
        'ctx.transaction',
        '[@jobs/sqlite] ctx.transaction needs a database file the store can open a second connection to',
      );
    }
    const previous = this.handlerTurn;
    let done = (): void => {};
    this.handlerTurn = new Promise((resolve) => {
      done = resolve;
    });
    await previous;
    while (this.handlerOpen) await this.handlerOpen;
    let opened = (): void => {};
    this.handlerOpen = new Promise((resolve) => {
      opened = resolve;
    });
    try {
      this.handlerDb ??= (() => {
        const db = openConnection();
        const clock = this.options.clock;
        if (clock) db.function(SQLITE_CLOCK_FUNCTION, { deterministic: true }, () => clock.now());
        return { db, runner: new SqliteSyncRunner(() => db) };
      })();
      const { db, runner } = this.handlerDb;
      runner.execute({ sql: 'BEGIN IMMEDIATE', params: [] }, db);
      try {
        const result = await work(db, async (op) =>
          driveSync(op, (query) =>
            query === this.options.wake
              ? { rows: [], affected: 0, insertId: null }
              : runner.execute(query, db),
          ),
        );
        runner.execute({ sql: 'COMMIT', params: [] }, db);
        return result;
      } catch (error) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw error;
      }
    } finally {
      this.handlerOpen = null;
      opened();
      done();
    }
  }

  async close(): Promise<void> {
    this.handlerDb?.db.close();
    this.handlerDb = null;
    if (this.options.closeDb) this.db.close();
  }

  /** Resolves once the connection is outside any transaction; fails after the wait bound. */
  private async outsideTransaction(): Promise<void> {
    const limitMs = this.options.foreignTransactionWaitMs ?? 5000;
    const started = performance.now();
    for (let pauseMs = 1; this.db.inTransaction; pauseMs = Math.min(pauseMs * 2, 20)) {
      if (performance.now() - started >= limitMs) {
        throw new Error(
          `the connection stayed inside a transaction the store did not open for ${limitMs} ms (your app's, on the connection it shares with the store); the store never runs its own work inside it. Enqueue inside it with { tx: db }, or keep transactions on this connection short (busyTimeoutMs)`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}

/** The caller's `tx`: a better-sqlite3 connection inside a transaction. */
function callerConnection(tx: unknown): Connection {
  const db = tx as Partial<Connection> | null;
  const ok = typeof db?.prepare === 'function' && typeof db.transaction === 'function';
  if (!ok || typeof db.inTransaction !== 'boolean') {
    throw new ValidationError(
      'tx',
      '[@jobs/sqlite] enqueue: tx must be a better-sqlite3 Database (e.g. store.db) inside db.transaction(...)',
    );
  }
  if (db.inTransaction) return db as Connection;
  throw new ValidationError(
    'tx',
    '[@jobs/sqlite] enqueue: the connection is not in a transaction; call enqueue synchronously inside db.transaction(() => { ... }) (no await before it)',
  );
}
