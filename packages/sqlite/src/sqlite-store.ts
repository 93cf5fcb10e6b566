import { randomUUID } from 'node:crypto';
import {
  type AcquireRequest,
  assertIdentifier,
  assertKnownOptions,
  assertPositiveInteger,
  type Clock,
  type EnqueueOptions,
  type EnqueueResult,
  type Job,
  type JobFailure,
  type JobFilter,
  type JobRef,
  type JobStore,
  LEASE_EXPIRED_MESSAGE,
  type ListJobsRequest,
  type NewJob,
  newJobValues,
  type RecoverResult,
  rowToJob,
  rowToSchedule,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type SqlRow,
  type StatsRow,
  type StoreCapabilities,
  StoreError,
  StoreSubscribers,
  systemClock,
  ValidationError,
} from '@jobs/core';
import Database from 'better-sqlite3';
import { applyMigrations } from './migrations.js';
import { type SqliteStatements, sqliteStatements } from './statements.js';

/** A better-sqlite3 connection (`new Database(file)`). */
export type SqliteDatabase = Database.Database;

export interface SqliteJobStoreOptions {
  /** Database file, created when missing. Required unless `db` is given. */
  filename?: string;
  /**
   * An open better-sqlite3 connection to use instead of opening `filename`, e.g. your app's, so
   * jobs can be enqueued in its transactions. `close()` leaves it open, and its pragmas are left
   * as you set them (use WAL: `db.pragma('journal_mode = WAL')`).
   */
  db?: SqliteDatabase;
  /** Prefix of the tables (`<prefix>jobs`, `<prefix>schedules`, …). Letters, digits, `_`. Default `''`. */
  tablePrefix?: string;
  /** How long a statement waits for another connection's write lock before failing. Default 5000. */
  busyTimeoutMs?: number;
  /**
   * How often `subscribe` checks `PRAGMA data_version` for commits by other connections and
   * processes. Default 10 ms; the check reads no pages (it is a counter in shared memory, ~2 µs),
   * and a wake-up that finds nothing due costs one read, never the write lock.
   */
  notifyIntervalMs?: number;
  /** The store's clock (tests inject a `FakeClock`). Default: this process's clock. */
  clock?: Clock;
}

/** Statements executed and transactions committed through this store, for benchmarks. */
export interface SqliteStoreCounters {
  statements: number;
  transactions: number;
}

const OPTION_NAMES = [
  'filename',
  'db',
  'tablePrefix',
  'busyTimeoutMs',
  'notifyIntervalMs',
  'clock',
];

/** New jobs per INSERT statement; also bounded by JSON size (SQLite's string limit is 1 GB). */
const INSERT_CHUNK_ROWS = 1000;
const INSERT_CHUNK_BYTES = 8 * 1024 * 1024;

const encode = {
  time: (d: Date): number => d.getTime(),
  bool: (b: boolean): number => (b ? 1 : 0),
  // An undefined payload is stored as JSON null, as the memory store keeps it.
  json: (v: unknown): string => JSON.stringify(v === undefined ? null : v),
};

/** Ids are decimal strings of positive integers; anything else names no job. */
const ID_PATTERN = /^[1-9][0-9]{0,15}$/;

/**
 * The embedded store: one SQLite file, shared by any number of processes on one machine.
 *
 * WAL mode lets readers run while one writer commits; writers (acquire, complete, …) take the
 * write lock with `BEGIN IMMEDIATE`, so acquirers never see each other's half-done work — the
 * SQLite equivalent of `SKIP LOCKED`. Commits by other connections wake `subscribe`rs through
 * `PRAGMA data_version`.
 *
 * @example
 * import { JobEngine } from '@jobs/core';
 * import { SqliteJobStore } from '@jobs/sqlite';
 *
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
export class SqliteJobStore implements JobStore {
  readonly name = 'sqlite';
  readonly capabilities: StoreCapabilities = {
    notifications: true,
    // BEGIN IMMEDIATE serialises writers: an acquirer never waits on rows another one holds,
    // it sees them already taken.
    skipLocked: true,
    transactionalEnqueue: true,
    multiProcess: true,
  };

  private readonly connection: SqliteDatabase;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;
  private readonly clock: Clock;
  private readonly sql: SqliteStatements;
  private readonly notifyIntervalMs: number;
  private readonly cache = new WeakMap<SqliteDatabase, Map<string, Database.Statement>>();
  private readonly subscribers = new StoreSubscribers();
  private watcher: NodeJS.Timeout | null = null;
  private lastDataVersion = 0;
  private closed = false;
  private readonly counts: SqliteStoreCounters = { statements: 0, transactions: 0 };

  constructor(options: SqliteJobStoreOptions) {
    assertKnownOptions(options ?? {}, OPTION_NAMES, '@jobs/sqlite');
    this.prefix = assertIdentifier(options.tablePrefix ?? '', 'tablePrefix', {
      allowEmpty: true,
      max: 32,
    });
    this.sql = sqliteStatements(this.prefix);
    this.clock = options.clock ?? systemClock;
    this.notifyIntervalMs = assertPositiveInteger(
      options.notifyIntervalMs ?? 10,
      'notifyIntervalMs',
      '@jobs/sqlite',
    );
    const busyTimeoutMs = assertPositiveInteger(
      options.busyTimeoutMs ?? 5000,
      'busyTimeoutMs',
      '@jobs/sqlite',
    );

    if (options.db) {
      if (options.filename !== undefined) {
        throw new ValidationError(
          'filename',
          '[@jobs/sqlite] give either `filename` or `db`, not both',
        );
      }
      this.connection = options.db;
      this.ownsConnection = false;
      return;
    }
    if (typeof options.filename !== 'string' || options.filename === '') {
      throw new ValidationError(
        'filename',
        '[@jobs/sqlite] a database file name (or `db`) is required',
      );
    }
    try {
      this.connection = new Database(options.filename);
    } catch (error) {
      throw new StoreError(
        `[@jobs/sqlite] open: cannot open ${options.filename}: ${message(error)}`,
        {
          cause: error,
        },
      );
    }
    this.ownsConnection = true;
    try {
      // The busy timeout first: switching to WAL needs a moment of exclusive access, and other
      // processes may be opening the same file right now.
      this.connection.pragma(`busy_timeout = ${busyTimeoutMs}`);
      setJournalModeWal(this.connection, busyTimeoutMs);
      // WAL + synchronous=NORMAL: a commit is durable once it returns, even if this process
      // crashes right after (the WAL is in the OS page cache and replayed on open); only a power
      // loss or OS crash can drop the last commits. FULL would fsync on every commit for that.
      this.connection.pragma('synchronous = NORMAL');
    } catch (error) {
      this.connection.close();
      throw new StoreError(`[@jobs/sqlite] open: ${message(error)}`, { cause: error });
    }
  }

  /**
   * The store's connection. Open your own transactions on it and pass it as `tx` to enqueue jobs
   * that commit or roll back with your writes.
   */
  get db(): SqliteDatabase {
    return this.connection;
  }

  /** Statements executed and transactions run so far (for benchmarks: round trips per job). */
  get counters(): Readonly<SqliteStoreCounters> {
    return { ...this.counts };
  }

  async migrate(): Promise<void> {
    this.guard('migrate', () => {
      applyMigrations(this.connection, this.prefix);
      this.counts.transactions++;
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopWatching();
    this.subscribers.clear();
    if (this.ownsConnection) this.connection.close();
  }

  async now(): Promise<Date> {
    return new Date(this.clock.now());
  }

  /**
   * Inserts jobs. With `tx` (a better-sqlite3 connection inside `db.transaction(...)`), all the
   * work happens synchronously, before this method's promise is even returned, so it belongs to
   * the caller's transaction: call it inside the transaction function without awaiting anything
   * first. A rollback of that transaction leaves no job behind.
   */
  async enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    if (options?.tx !== undefined && options.tx !== null) {
      return this.enqueueSync(jobs, asTransaction(options.tx));
    }
    return this.enqueueSync(jobs);
  }

  /**
   * Synchronous enqueue, for use inside a better-sqlite3 transaction function. With `tx`, the
   * insert joins that connection's open transaction (as a savepoint); without, it runs in its own.
   *
   * @example
   * store.db.transaction(() => {
   *   insertOrder.run(order);
   *   store.enqueueSync([newJob], store.db);
   * })();
   */
  enqueueSync(jobs: readonly NewJob[], tx?: SqliteDatabase): EnqueueResult[] {
    if (jobs.length === 0) return [];
    const db = tx ?? this.connection;
    if (tx && !tx.inTransaction) {
      throw new ValidationError(
        'tx',
        '[@jobs/sqlite] enqueue: the connection is not in a transaction; call enqueue synchronously inside db.transaction(() => { ... }) (no await before it)',
      );
    }
    const results = this.guard('enqueue', () =>
      this.transaction(db, () => this.insertJobs(db, jobs, this.clock.now()), !tx),
    );
    if (results.some((r) => r.created)) this.notifyLocal();
    return results;
  }

  async acquire(request: AcquireRequest): Promise<Job[]> {
    if (request.limit <= 0 || request.types.length === 0) return [];
    return this.guard('acquire', () => {
      // Most polls of an idle engine find nothing. A plain read says so without taking the
      // write lock, so such a poll never waits for (or holds up) another process's writes.
      const probe = { ...filterParams(request), now: this.clock.now() };
      if (this.pluck(this.connection, this.sql.anyDue, probe) === undefined) return [];
      return this.transaction(this.connection, () => this.acquireDue(request, this.clock.now()));
    });
  }

  async completeAndAcquire(
    done: readonly JobRef[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }> {
    return this.guard('completeAndAcquire', () =>
      this.transaction(this.connection, () => {
        const now = this.clock.now();
        const { lost } = this.completeRefs(done);
        const jobs =
          request.limit > 0 && request.types.length > 0 ? this.acquireDue(request, now) : [];
        return { lost, jobs };
      }),
    );
  }

  async complete(jobs: readonly JobRef[]): Promise<SettleResult> {
    if (jobs.length === 0) return { lost: [] };
    return this.guard('complete', () =>
      this.transaction(this.connection, () => this.completeRefs(jobs)),
    );
  }

  async fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    if (failures.length === 0) return { lost: [] };
    const valid = failures.filter((f) => ID_PATTERN.test(f.id));
    return this.guard('fail', () =>
      this.transaction(this.connection, () => {
        const rows = this.all(this.connection, this.sql.fail, {
          now: this.clock.now(),
          failures: JSON.stringify(
            valid.map((f) => [
              Number(f.id),
              f.token,
              f.deadletter ? 1 : 0,
              Math.max(0, Math.round(f.retryDelayMs)),
              f.error.message,
              f.error.stack,
            ]),
          ),
        });
        return lostIds(failures, rows);
      }),
    );
  }

  async release(jobs: readonly JobRef[]): Promise<SettleResult> {
    if (jobs.length === 0) return { lost: [] };
    const result = this.guard('release', () =>
      this.transaction(this.connection, () =>
        lostIds(jobs, this.all(this.connection, this.sql.release, { refs: refsJson(jobs) })),
      ),
    );
    if (result.lost.length < jobs.length) this.notifyLocal();
    return result;
  }

  async renewLeases(
    owner: string,
    leaseMs: number,
    jobs: readonly JobRef[],
  ): Promise<SettleResult> {
    if (jobs.length === 0) return { lost: [] };
    return this.guard('renewLeases', () =>
      this.transaction(this.connection, () =>
        lostIds(
          jobs,
          this.all(this.connection, this.sql.renew, {
            owner,
            leaseMs: Math.round(leaseMs),
            now: this.clock.now(),
            refs: refsJson(jobs),
          }),
        ),
      ),
    );
  }

  async recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    if (limit <= 0) return { requeued: [], deadlettered: [] };
    const recovered = this.guard('recoverExpiredLeases', () =>
      this.transaction(this.connection, () => {
        const rows = this.all(this.connection, this.sql.recover, {
          now: this.clock.now(),
          limit,
          message: LEASE_EXPIRED_MESSAGE,
        });
        const result: RecoverResult = { requeued: [], deadlettered: [] };
        for (const row of rows.sort((a, b) => Number(a.id) - Number(b.id))) {
          (row.state === 'deadletter' ? result.deadlettered : result.requeued).push(String(row.id));
        }
        return result;
      }),
    );
    if (recovered.requeued.length > 0) this.notifyLocal();
    return recovered;
  }

  async nextDueAt(
    request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>,
  ): Promise<Date | null> {
    if (request.types.length === 0) return null;
    return this.guard('nextDueAt', () => {
      const due = this.pluck(this.connection, this.sql.nextDueAt, filterParams(request));
      return due === null || due === undefined ? null : new Date(Number(due));
    });
  }

  subscribe(listener: () => void): () => void {
    if (this.closed) throw new StoreError('[@jobs/sqlite] subscribe: the store is closed');
    const unsubscribe = this.subscribers.add(listener);
    if (!this.watcher) this.startWatching();
    return () => {
      unsubscribe();
      if (this.subscribers.size === 0) this.stopWatching();
    };
  }

  // ---- admin ----

  async getJob(id: string): Promise<Job | null> {
    if (!ID_PATTERN.test(id)) return null;
    return this.guard('getJob', () => {
      const row = this.get(this.connection, this.sql.getJob, { id: Number(id) });
      return row ? rowToJob(row) : null;
    });
  }

  async listJobs(request: ListJobsRequest): Promise<Job[]> {
    return this.guard('listJobs', () => {
      const { where, params } = filterClause(request);
      const rows = this.all(
        this.connection,
        `SELECT * FROM ${this.prefix}jobs WHERE ${where} ORDER BY id LIMIT @limit OFFSET @offset`,
        { ...params, limit: request.limit, offset: request.offset },
      );
      return rows.map(rowToJob);
    });
  }

  async retryDeadletter(id: string, retries: number): Promise<Job | null> {
    if (!ID_PATTERN.test(id)) return null;
    return this.guard('retryDeadletter', () =>
      this.transaction(this.connection, () => {
        const row = this.get(this.connection, this.sql.retryDeadletter, {
          id: Number(id),
          retries,
          now: this.clock.now(),
        });
        return row ? rowToJob(row) : null;
      }),
    );
  }

  async deleteJob(id: string): Promise<boolean> {
    if (!ID_PATTERN.test(id)) return false;
    return this.guard(
      'deleteJob',
      () => this.run(this.connection, this.sql.deleteJob, { id: Number(id) }) > 0,
    );
  }

  async suspend(filter: JobFilter): Promise<number> {
    return this.guard('suspend', () => {
      const { where, params } = filterClause(filter);
      return this.run(
        this.connection,
        `UPDATE ${this.prefix}jobs SET suspended_from = state, state = 'suspended'
         WHERE state IN ('timer', 'async') AND ${where}`,
        params,
      );
    });
  }

  async activate(filter: JobFilter): Promise<number> {
    return this.guard('activate', () => {
      const { where, params } = filterClause(filter);
      return this.run(
        this.connection,
        `UPDATE ${this.prefix}jobs SET state = suspended_from, suspended_from = NULL
         WHERE state = 'suspended' AND ${where}`,
        params,
      );
    });
  }

  async stats(): Promise<StatsRow[]> {
    return this.guard('stats', () =>
      this.all(this.connection, this.sql.stats, {}).map((row) => ({
        type: String(row.type),
        state: row.state as StatsRow['state'],
        count: Number(row.count),
      })),
    );
  }

  // ---- schedules ----

  async saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    return this.guard('saveSchedule', () => {
      const row = this.get(this.connection, this.sql.saveSchedule, {
        name: request.name,
        spec: JSON.stringify(request.spec ?? null),
        nextAt: request.nextAt ? request.nextAt.getTime() : null,
        reset: request.resetProgress ? 1 : 0,
        checked: request.expectedVersion === undefined ? 0 : 1,
        expected: request.expectedVersion ?? null,
        now: this.clock.now(),
      });
      // No row only when the expected version did not match.
      return row ? rowToSchedule(row) : null;
    });
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    return this.guard('getSchedule', () => {
      const row = this.get(this.connection, this.sql.getSchedule, { name });
      return row ? rowToSchedule(row) : null;
    });
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return this.guard('listSchedules', () =>
      this.all(this.connection, this.sql.listSchedules, {}).map(rowToSchedule),
    );
  }

  async deleteSchedule(name: string): Promise<boolean> {
    return this.guard(
      'deleteSchedule',
      () => this.run(this.connection, this.sql.deleteSchedule, { name }) > 0,
    );
  }

  async setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.guard('setSchedulePaused', () => {
      const row = this.get(this.connection, this.sql.setSchedulePaused, {
        name,
        paused: paused ? 1 : 0,
        now: this.clock.now(),
      });
      return row ? rowToSchedule(row) : null;
    });
  }

  async dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    if (limit <= 0) return [];
    return this.guard('dueSchedules', () =>
      this.all(this.connection, this.sql.dueSchedules, { now: this.clock.now(), limit }).map(
        rowToSchedule,
      ),
    );
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    const fired = this.guard('fireSchedule', () =>
      this.transaction(this.connection, (): ScheduleFireResult => {
        const db = this.connection;
        const now = this.clock.now();
        const current = this.get(db, this.sql.getSchedule, { name: fire.name });
        if (!current || Number(current.version) !== fire.version) {
          return { status: 'conflict', jobs: [] };
        }
        const busy = Number(this.pluck(db, this.sql.scheduleBusy, { name: fire.name })) === 1;
        let status: ScheduleFireResult['status'] = 'fired';
        let jobs: Job[] = [];
        if (fire.overlap !== 'allow' && busy) {
          status = fire.overlap === 'skip' ? 'skipped' : 'coalesced';
        } else {
          jobs = this.insertJobs(db, fire.jobs, now).map((r) => r.job);
        }
        const settled = this.get(db, this.sql.settleFire, {
          name: fire.name,
          version: fire.version,
          nextAt: fire.nextAt ? fire.nextAt.getTime() : null,
          now,
          skipped: status === 'skipped' ? 1 : 0,
          fired: status === 'fired' ? fire.occurrences : 0,
          pendingMisfire: status === 'coalesced' ? 1 : status === 'fired' ? 0 : null,
        });
        if (!settled) {
          // Cannot happen inside BEGIN IMMEDIATE (the version was just read under the write
          // lock); if it does, undo the inserted jobs rather than fire twice.
          throw new StoreError(
            `[@jobs/sqlite] fireSchedule: schedule ${fire.name} changed during the fire`,
          );
        }
        return { status, jobs };
      }),
    );
    if (fired.jobs.length > 0) this.notifyLocal();
    return fired;
  }

  // ---- internals ----

  private acquireDue(request: AcquireRequest, now: number): Job[] {
    const rows = this.all(this.connection, this.sql.acquire, {
      ...filterParams(request),
      owner: request.owner,
      now,
      leaseMs: Math.round(request.leaseMs),
      token: randomUUID(),
      limit: request.limit,
    });
    // RETURNING gives no order guarantee: restore acquisition order.
    return rows.map(rowToJob).sort(byAcquisitionOrder);
  }

  private completeRefs(refs: readonly JobRef[]): SettleResult {
    if (refs.length === 0) return { lost: [] };
    return lostIds(refs, this.all(this.connection, this.sql.complete, { refs: refsJson(refs) }));
  }

  /**
   * One INSERT per chunk for any number of jobs. Rows go in input order, so the inserted rows,
   * sorted by id, line up with the inputs that were inserted: every input without a key, and the
   * first input of each key no row held yet. The rest get the holder of their key.
   */
  private insertJobs(db: SqliteDatabase, jobs: readonly NewJob[], nowMs: number): EnqueueResult[] {
    const now = new Date(nowMs);
    const results: EnqueueResult[] = [];
    let chunk: NewJob[] = [];
    let chunkRows: string[] = [];
    let bytes = 0;
    if (jobs.length === 1) {
      const job = jobs[0]!;
      const row = this.getPositional(db, this.sql.insertJob, newJobValues(job, now, encode));
      if (row) return [{ job: rowToJob(row), created: true }];
      const holder = this.get(db, this.sql.jobsByKeys, { keys: JSON.stringify([job.key]) });
      if (!holder) {
        throw new StoreError(
          `[@jobs/sqlite] enqueue: key ${JSON.stringify(job.key)} conflicted but no job holds it`,
        );
      }
      return [{ job: rowToJob(holder), created: false }];
    }
    const flush = (): void => {
      if (chunk.length === 0) return;
      results.push(...this.insertChunk(db, chunk, `[${chunkRows.join(',')}]`));
      chunk = [];
      chunkRows = [];
      bytes = 0;
    };
    for (const job of jobs) {
      const row = JSON.stringify(newJobValues(job, now, encode));
      if (chunk.length >= INSERT_CHUNK_ROWS || bytes + row.length > INSERT_CHUNK_BYTES) flush();
      chunk.push(job);
      chunkRows.push(row);
      bytes += row.length;
    }
    flush();
    return results;
  }

  private insertChunk(
    db: SqliteDatabase,
    jobs: readonly NewJob[],
    rowsJson: string,
  ): EnqueueResult[] {
    const inserted = this.all(db, this.sql.insertJobs, { rows: rowsJson })
      .map(rowToJob)
      .sort((a, b) => Number(a.id) - Number(b.id));
    const insertedByKey = new Map<string, Job>();
    for (const job of inserted) if (job.key !== null) insertedByKey.set(job.key, job);

    const results: (EnqueueResult | null)[] = [];
    const seenKeys = new Set<string>();
    const missingKeys = new Set<string>();
    let next = 0;
    for (const job of jobs) {
      if (job.key === null) {
        results.push({ job: inserted[next++]!, created: true });
      } else if (!seenKeys.has(job.key) && insertedByKey.has(job.key)) {
        seenKeys.add(job.key);
        results.push({ job: inserted[next++]!, created: true });
      } else {
        seenKeys.add(job.key);
        if (!insertedByKey.has(job.key)) missingKeys.add(job.key);
        results.push(null);
      }
    }
    if (next !== inserted.length) {
      throw new StoreError(
        `[@jobs/sqlite] enqueue: inserted ${inserted.length} rows but matched ${next} to the input`,
      );
    }
    const holders = new Map(insertedByKey);
    if (missingKeys.size > 0) {
      for (const row of this.all(db, this.sql.jobsByKeys, {
        keys: JSON.stringify([...missingKeys]),
      })) {
        const job = rowToJob(row);
        holders.set(job.key!, job);
      }
    }
    return results.map((result, i) => {
      if (result) return result;
      const holder = holders.get(jobs[i]!.key!);
      if (!holder) {
        throw new StoreError(
          `[@jobs/sqlite] enqueue: key ${JSON.stringify(jobs[i]!.key)} conflicted but no job holds it`,
        );
      }
      return { job: holder, created: false };
    });
  }

  /**
   * Wakes this store's own subscribers after a write that made jobs acquirable: `data_version`
   * only reports OTHER connections' commits. Deferred to the next turn, when a caller's
   * transaction has committed (or rolled back: a spurious wake-up costs one empty acquire).
   */
  private notifyLocal(): void {
    this.subscribers.wakeSoon();
  }

  private startWatching(): void {
    this.lastDataVersion = this.dataVersion();
    this.watcher = setInterval(() => {
      // A user-provided connection may have been closed under us: nothing to watch any more.
      if (this.closed || !this.connection.open) {
        this.stopWatching();
        return;
      }
      const version = this.dataVersion();
      if (version === this.lastDataVersion) return;
      this.lastDataVersion = version;
      this.subscribers.wake();
    }, this.notifyIntervalMs);
    this.watcher.unref();
  }

  private stopWatching(): void {
    if (this.watcher) clearInterval(this.watcher);
    this.watcher = null;
  }

  /** Changes whenever ANOTHER connection commits to the file (never for our own commits). */
  private dataVersion(): number {
    return Number(this.statement(this.connection, this.sql.dataVersion).pluck().get());
  }

  /**
   * Runs `fn` in a transaction on `db`: `BEGIN IMMEDIATE` (write lock up front, so no reader
   * upgrades into a busy deadlock), or a savepoint when `db` is already in one (the caller's).
   */
  private transaction<T>(db: SqliteDatabase, fn: () => T, count = true): T {
    if (count) this.counts.transactions++;
    if (db.inTransaction) return db.transaction(fn)();
    return db.transaction(fn).immediate();
  }

  private statement(db: SqliteDatabase, sql: string): Database.Statement {
    let statements = this.cache.get(db);
    if (!statements) {
      statements = new Map();
      this.cache.set(db, statements);
    }
    let statement = statements.get(sql);
    if (!statement) {
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  }

  private all(db: SqliteDatabase, sql: string, params: Record<string, unknown>): SqlRow[] {
    this.counts.statements++;
    return this.statement(db, sql).all(params) as SqlRow[];
  }

  private get(
    db: SqliteDatabase,
    sql: string,
    params: Record<string, unknown>,
  ): SqlRow | undefined {
    this.counts.statements++;
    return this.statement(db, sql).get(params) as SqlRow | undefined;
  }

  private getPositional(db: SqliteDatabase, sql: string, params: unknown[]): SqlRow | undefined {
    this.counts.statements++;
    return this.statement(db, sql).get(...params) as SqlRow | undefined;
  }

  private pluck(db: SqliteDatabase, sql: string, params: Record<string, unknown>): unknown {
    this.counts.statements++;
    const statement = this.statement(db, sql);
    const row = statement.raw(true).get(params) as unknown[] | undefined;
    statement.raw(false);
    return row?.[0];
  }

  private run(db: SqliteDatabase, sql: string, params: Record<string, unknown>): number {
    this.counts.statements++;
    return this.statement(db, sql).run(params).changes;
  }

  /** Wraps driver errors as `StoreError`s naming the operation; our own errors pass through. */
  private guard<T>(operation: string, fn: () => T): T {
    if (this.closed) throw new StoreError(`[@jobs/sqlite] ${operation}: the store is closed`);
    try {
      return fn();
    } catch (error) {
      if (error instanceof StoreError || error instanceof ValidationError) throw error;
      throw new StoreError(`[@jobs/sqlite] ${operation}: ${message(error)}`, { cause: error });
    }
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * `PRAGMA journal_mode = WAL` needs exclusive access for a moment and does not always wait on the
 * busy handler, so several processes opening a new file at once retry it briefly.
 */
function setJournalModeWal(db: SqliteDatabase, busyTimeoutMs: number): void {
  const deadline = Date.now() + busyTimeoutMs;
  for (;;) {
    try {
      const mode = db.pragma('journal_mode = WAL', { simple: true });
      if (String(mode).toLowerCase() === 'wal') return;
      if (String(mode).toLowerCase() === 'memory') return; // :memory: databases have no WAL
      throw new Error(`journal_mode stayed ${String(mode)}`);
    } catch (error) {
      const code = (error as { code?: string }).code ?? '';
      if (!code.startsWith('SQLITE_BUSY') || Date.now() > deadline) throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}

function asTransaction(tx: unknown): SqliteDatabase {
  const candidate = tx as Partial<SqliteDatabase> | null;
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.prepare !== 'function' ||
    typeof candidate.transaction !== 'function' ||
    typeof candidate.inTransaction !== 'boolean'
  ) {
    throw new ValidationError(
      'tx',
      '[@jobs/sqlite] enqueue: tx must be a better-sqlite3 Database (e.g. store.db) inside db.transaction(...)',
    );
  }
  return candidate as SqliteDatabase;
}

function refsJson(refs: readonly JobRef[]): string {
  return JSON.stringify(
    refs.filter((r) => ID_PATTERN.test(r.id)).map((r) => [Number(r.id), r.token]),
  );
}

function lostIds(refs: readonly { id: string }[], rows: readonly SqlRow[]): SettleResult {
  const settled = new Set(rows.map((row) => String(row.id)));
  return { lost: refs.filter((r) => !settled.has(r.id)).map((r) => r.id) };
}

function filterParams(
  request: Pick<AcquireRequest, 'types' | 'queues' | 'tenants'>,
): Record<string, string | null> {
  return {
    types: JSON.stringify(request.types),
    queues: request.queues ? JSON.stringify(request.queues) : null,
    tenants: request.tenants ? JSON.stringify(request.tenants) : null,
  };
}

/** WHERE terms for an admin filter; values are always bound, never interpolated. */
function filterClause(filter: JobFilter): { where: string; params: Record<string, unknown> } {
  const terms: string[] = ['1 = 1'];
  const params: Record<string, unknown> = {};
  if (filter.state !== undefined) {
    const states = typeof filter.state === 'string' ? [filter.state] : [...filter.state];
    terms.push('state IN (SELECT value FROM json_each(@fState))');
    params.fState = JSON.stringify(states);
  }
  const columns: [keyof JobFilter, string][] = [
    ['type', 'type'],
    ['scope', 'scope'],
    ['tenantId', 'tenant_id'],
    ['queue', 'queue'],
    ['schedule', 'schedule_name'],
  ];
  for (const [field, column] of columns) {
    const value = filter[field];
    if (value === undefined) continue;
    terms.push(`${column} = @f_${field}`);
    params[`f_${field}`] = value;
  }
  return { where: terms.join(' AND '), params };
}

function byAcquisitionOrder(a: Job, b: Job): number {
  return (
    b.priority - a.priority || a.dueAt.getTime() - b.dueAt.getTime() || Number(a.id) - Number(b.id)
  );
}
