import {
  assertIdentifier,
  type Clock,
  type EnqueueResult,
  type NewJob,
  StoreError,
} from '@jobs/core';
import {
  checkStoreOptions,
  NotifyingSqlJobStore,
  SQLITE_CLOCK_FUNCTION,
  SQLITE_LOCAL_WAKE,
  SqliteCommitWatcher,
  type SqliteStoreCounters,
  SqliteSyncExecutor,
  sqliteDialect,
} from '@jobs/core/sql';
import Database, { type Database as BetterSqliteDatabase } from 'better-sqlite3';

/** A better-sqlite3 connection (`new Database(file)`). */
export type SqliteDatabase = BetterSqliteDatabase;

export interface SqliteJobStoreOptions {
  /** Database file, created when missing. Required unless `db` is given. */
  filename?: string;
  /**
   * An open better-sqlite3 connection instead of `filename` (e.g. your app's, to enqueue in its
   * transactions). `close()` leaves it open; its pragmas stay yours (use WAL).
   */
  db?: SqliteDatabase;
  /**
   * Prefix of the tables (`<prefix>jobs`, `<prefix>schedules`, `<prefix>jobs_migrations`).
   * Default `jobs_`; it was `''`: with the default, `migrate()` renames such tables (or pass `''`).
   */
  tablePrefix?: string;
  /**
   * How long a statement waits for another connection's write lock before failing, and how
   * long the store's own work waits for a transaction your app holds open on a shared `db`
   * to end (it never runs inside it). Default 5000.
   */
  busyTimeoutMs?: number;
  /**
   * How often `subscribe` checks `PRAGMA data_version` for other connections' commits. Default
   * 10 ms: a check reads no pages; a wake-up that finds nothing due costs one read, not the lock.
   * A change of the database's `-wal` file triggers a check at once besides (this interval is
   * the fallback).
   */
  notifyIntervalMs?: number;
  /** The store's clock (tests inject a `FakeClock`). Default: this process's clock. */
  clock?: Clock;
}

const OPTION_NAMES = 'filename db tablePrefix busyTimeoutMs notifyIntervalMs clock'.split(' ');

/**
 * The embedded store: one SQLite file, shared by any number of processes on one machine.
 *
 * WAL mode lets readers run while one writer commits; writers (acquire, complete, …) take the
 * write lock with `BEGIN IMMEDIATE`, so acquirers never see each other's half-done work — the
 * SQLite equivalent of `SKIP LOCKED`. Commits by other connections wake `subscribe`rs through
 * `PRAGMA data_version`. The SQL is `@jobs/core/sql`'s, the same as `@jobs/typeorm`'s.
 * `enqueue(jobs, { tx })` runs synchronously, before its promise is returned, so inside
 * `db.transaction(...)` it joins that transaction (call it without awaiting anything first).
 * Everything else the store does waits until a transaction your app holds open on a shared
 * connection ends: a rollback of yours never undoes an acquisition or a lease renewal.
 *
 * @example
 * const store = new SqliteJobStore({ filename: 'jobs.db' });
 * await store.migrate();
 * const engine = new JobEngine({ store, handlers: { hello: async (job) => console.log(job.payload) } });
 * await engine.start();
 * // inside your own transaction on the same connection: commits or rolls back with it
 * store.db.transaction(() => {
 *   store.db.prepare('INSERT INTO orders (id) VALUES (?)').run(42);
 *   void engine.enqueue('hello', { order: 42 }, { tx: store.db });
 * })();
 */
export class SqliteJobStore extends NotifyingSqlJobStore {
  /** The store's connection: pass it as `tx` inside your `db.transaction(...)` to enqueue there. */
  readonly db: SqliteDatabase;
  private readonly sqlite: SqliteSyncExecutor;
  protected readonly notifier: SqliteCommitWatcher;

  constructor(options: SqliteJobStoreOptions) {
    checkStoreOptions(options, '@jobs/sqlite', OPTION_NAMES, {
      oneOf: ['filename', 'db'],
      positiveIntegers: ['notifyIntervalMs', 'busyTimeoutMs'],
    });
    const { tablePrefix = 'jobs_', db: given, clock } = options;
    const prefix = assertIdentifier(tablePrefix, 'tablePrefix', { allowEmpty: true, max: 32 });
    const interval = options.notifyIntervalMs ?? 10;
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    const db = given ?? open(options.filename as string, busyTimeoutMs);
    // A user-provided connection may be closed under us: then nothing is left to watch.
    const watcher = new SqliteCommitWatcher(
      () => (db.open ? executor.dataVersion() : null),
      interval,
      // Other processes' commits write the WAL file: its change events wake us before the poll.
      db.memory ? null : `${db.name}-wal`,
      () => executor.counters.statements,
    );
    // An injected clock is read in SQL as `SQLITE_CLOCK_FUNCTION`, on each connection.
    const withClock = (connection: SqliteDatabase): SqliteDatabase =>
      clock
        ? connection.function(SQLITE_CLOCK_FUNCTION, { deterministic: true }, () => clock.now())
        : connection;
    const executor = new SqliteSyncExecutor({
      connection: () => db,
      closeConnection: !given,
      label: '@jobs/sqlite',
      onWake: () => watcher.wakeSoon(),
      // Handlers' transactions (`ctx.transaction`) on a second connection to the file.
      ...(db.memory ? {} : { openConnection: () => withClock(open(db.name, busyTimeoutMs)) }),
      foreignTransactionWaitMs: busyTimeoutMs,
      foreignTransactionHint:
        "It is your app's, on the connection it shares with the store: enqueue inside it with { tx: db }, or keep transactions on this connection short (busyTimeoutMs)",
    });
    withClock(db);
    super({
      label: '@jobs/sqlite',
      name: 'sqlite',
      dialect: sqliteDialect({
        tablePrefix: prefix,
        ...(clock ? { clock } : {}),
        // The default prefix adopts the tables of a database made under the former default.
        ...(options.tablePrefix === undefined ? { adoptPrefix: '' } : {}),
      }),
      executor,
      capabilities: {
        notifications: true,
        transactionalEnqueue: true,
        multiProcess: true,
      },
      notify: SQLITE_LOCAL_WAKE,
    });
    this.db = db;
    this.sqlite = executor;
    this.notifier = watcher;
  }

  /** Statements executed and transactions run so far (for benchmarks: round trips per job). */
  get counters(): Readonly<SqliteStoreCounters> {
    return { ...this.sqlite.counters };
  }

  /**
   * Synchronous enqueue, for use inside a better-sqlite3 transaction function: with `tx`, it
   * joins that connection's open transaction (as a savepoint); without, it runs in its own.
   * @example store.db.transaction(() => { insertOrder.run(order); store.enqueueSync([job], store.db); })();
   */
  enqueueSync(jobs: readonly NewJob[], tx?: SqliteDatabase): EnqueueResult[] {
    if (jobs.length === 0) return [];
    if (this.closed) throw new StoreError('[@jobs/sqlite] enqueue: the store is closed');
    try {
      const op = this.enqueueOperation(jobs);
      return this.sqlite.runSync(op, { transaction: true, ...(tx ? { tx } : {}) });
    } catch (error) {
      throw this.wrap('enqueue', error);
    }
  }
}

/** Opens `filename` with a busy timeout, in WAL mode with `synchronous = NORMAL`. */
function open(filename: string, busyTimeoutMs: number): SqliteDatabase {
  let db: SqliteDatabase | null = null;
  try {
    db = new Database(filename);
    // The busy timeout first: switching to WAL needs a moment of exclusive access, and other
    // processes may be opening the same file right now.
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    setJournalModeWal(db, busyTimeoutMs);
    // WAL + synchronous=NORMAL: a commit is durable once it returns, even if this process
    // crashes right after (the WAL is in the OS page cache and replayed on open); only a power
    // loss or OS crash can drop the last commits. FULL would fsync on every commit for that.
    db.pragma('synchronous = NORMAL');
    return db;
  } catch (error) {
    db?.close();
    const why = error instanceof Error ? error.message : String(error);
    // The hint first: better-sqlite3's own message goes on to list every path it tried.
    const hint = /could not locate the bindings file/i.test(why) ? `${NATIVE_BUILD_HINT} ` : '';
    throw new StoreError(`[@jobs/sqlite] open: cannot open ${filename}: ${hint}${why}`, {
      cause: error,
    });
  }
}

/**
 * better-sqlite3 is a native addon built by its install script. pnpm 10 runs no dependency's
 * build scripts unless allowed, so the install "succeeds" and the first `new Database()` fails.
 */
const NATIVE_BUILD_HINT =
  'better-sqlite3 was installed without its native build. With pnpm 10, allow its build: add ' +
  '`"pnpm": { "onlyBuiltDependencies": ["better-sqlite3"] }` to package.json (or run ' +
  '`pnpm approve-builds`), then run `pnpm rebuild better-sqlite3`; with npm or yarn, reinstall ' +
  'without --ignore-scripts. better-sqlite3 said:';

/** WAL needs exclusive access for a moment and may not wait on the busy handler: retry briefly. */
function setJournalModeWal(db: SqliteDatabase, busyTimeoutMs: number): void {
  for (const deadline = Date.now() + busyTimeoutMs; ; ) {
    try {
      const mode = String(db.pragma('journal_mode = WAL', { simple: true })).toLowerCase();
      if (mode === 'wal' || mode === 'memory') return; // :memory: databases have no WAL
      throw new Error(`journal_mode stayed ${mode}`);
    } catch (error) {
      const busy = String((error as { code?: unknown }).code).startsWith('SQLITE_BUSY');
      if (!busy || Date.now() > deadline) throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}
