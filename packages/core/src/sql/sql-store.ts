/**
 * `SqlJobStore`: the one `JobStore` implementation over SQL. A dialect (PostgreSQL, MySQL,
 * SQLite) supplies the statements, an executor the connection; this class runs the operations
 * (`operations/`) in the transactions they need, and `NotifyingSqlJobStore` adds the change
 * notifications that wake engines on other processes.
 *
 * Each section below keeps its own header.
 */
import { randomUUID } from 'node:crypto';
import { JobsError, LockLostError, StoreError } from '../errors.js';
import { limitedScopeOf } from '../rules.js';
import type {
  AcquireRequest,
  CancelOutcome,
  EnqueueOptions,
  EnqueueResult,
  HistorySettings,
  Job,
  JobCompletion,
  JobFailure,
  JobFilter,
  JobHistoryRecord,
  JobRef,
  JobStore,
  LeaseRenewalRef,
  ListHistoryRequest,
  ListJobsRequest,
  MigrationResult,
  NewJob,
  OverdueType,
  QueueStatsRow,
  RateTokenGrant,
  RateTokenRequest,
  RecoverResult,
  RenewResult,
  SaveScheduleRequest,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
  SettleResult,
  StatsRow,
  StepSave,
  StoreBulk,
  StoreCancellation,
  StoreCapabilities,
  StoreHistory,
  StoreRateLimits,
  StoreSteps,
  StoreViews,
  StoreWaits,
} from '../store.js';
import { readWakeSignal, WakeSignalWatcher } from './change-watcher.js';
import { type Dialect, isJobId, type OpSpec } from './dialect.js';
import type { Executor, Operation, Query, RunOptions } from './executor.js';
import type { LockRetries } from './lock-retries.js';
import { migrate, migrationSql, schemaVersion } from './migrate.js';
import * as admin from './operations/admin.js';
import * as blockedSet from './operations/blocked-set.js';
import * as cancel from './operations/cancel.js';
import { type SqlEnv, sqlEnv } from './operations/env.js';
import * as followups from './operations/followups.js';
import * as jobOps from './operations/jobs.js';
import * as rateLimits from './operations/rate-limits.js';
import * as recover from './operations/recover.js';
import * as schedules from './operations/schedules.js';
import * as steps from './operations/steps.js';
import * as waits from './operations/waits.js';
import type { SqlRow } from './rows.js';

// ─── SqlJobStore ─────────────────────────────────────────────────────────────────────────────────
/*
 * `SqlJobStore`: the whole `JobStore` contract over a `Dialect` and an `Executor`, written once.
 * A SQL store package (`@jobs/postgres`, `@jobs/mysql`, `@jobs/sqlite`, `@jobs/typeorm`, or a
 * user's own for CockroachDB or libSQL) extends it with connection handling, notifications and
 * driver quirks only.
 *
 * @example
 * class LibsqlJobStore extends SqlJobStore {
 *   constructor(client: Client) {
 *     super({ label: 'libsql-store', name: 'libsql', dialect: sqliteDialect({ tablePrefix: 'jobs_' }),
 *       executor: new LibsqlExecutor(client), capabilities: { notifications: false,
 *       transactionalEnqueue: false, multiProcess: true } });
 *   }
 * }
 */

/** Whether the store runs `spec` with these arguments in a transaction of its own. */
export function needsTransaction<A extends unknown[]>(
  spec: OpSpec<A, unknown>,
  c: SqlEnv,
  ...args: A
): boolean {
  return typeof spec.transaction === 'function' ? spec.transaction(c, ...args) : spec.transaction;
}

export interface SqlJobStoreOptions {
  /** The package that speaks in messages, e.g. `@jobs/postgres`. */
  label: string;
  /** `JobStore.name`, e.g. `postgres`. */
  name: string;
  dialect: Dialect;
  executor: Executor;
  capabilities: StoreCapabilities;
  /** A statement that wakes engines elsewhere, sent in the transaction that made jobs due. */
  notify?: Query | null;
}

/** Scopes of leased limited jobs remembered at most (see `noteScopes`). */
const MAX_LEASED_SCOPES = 100_000;

/** Times a whole operation is run again after a deadlock or lock-wait error (no backoff policy). */
const LOCK_RETRIES = 3;

interface Run {
  transaction: boolean;
  /** Deadlock / lock-wait retries of the whole operation (`Dialect.isRetryable`). */
  lockRetries?: number;
  tx?: unknown;
  purpose?: RunOptions['purpose'];
}

/** Statements of `lock`, then `op`, then `unlock` (also when `op` failed). */
function* locked<T>(
  lock: readonly Query[],
  op: Operation<T>,
  unlock: readonly Query[] = [],
): Operation<T> {
  try {
    for (const query of lock) yield query;
    return yield* op;
  } finally {
    for (const query of unlock) yield query;
  }
}

export class SqlJobStore implements JobStore {
  readonly name: string;
  readonly capabilities: StoreCapabilities;
  readonly dialect: Dialect;
  protected readonly executor: Executor;
  protected readonly context: SqlEnv;
  protected readonly label: string;
  /** Deadlock / lock-wait retries with backoff, where the dialect has them (MySQL/MariaDB). */
  protected readonly lockRetries: LockRetries | null;
  protected closed = false;
  /** Limited jobs leased by this store and not settled through it yet: id → scope. */
  private readonly leasedScopes = new Map<string, string>();
  /** Ids of keyed jobs leased by this store and not settled through it yet. */
  private readonly leasedKeyed = new Set<string>();
  /** Where the next blocked-set sweep goes on from (see `operations/blocked-set.ts`). */
  private readonly sweepCursor: blockedSet.SweepCursor = { blocked: null, waiting: null };

  // The optional abilities of the contract, all of them on every dialect: each member delegates
  // to the method of the same work below.
  readonly cancellation: StoreCancellation = {
    cancel: (id) => this.cancel(id),
    cancelHeld: (jobs) => this.cancelHeld(jobs),
  };
  readonly rateLimits: StoreRateLimits = {
    takeRateTokens: (requests) => this.takeRateTokens(requests),
    deferJobs: (jobs, delayMs) => this.deferJobs(jobs, delayMs),
  };
  readonly history: StoreHistory = {
    configure: (settings) => this.configureHistory(settings),
    get: (id) => this.getHistory(id),
    list: (request) => this.listHistory(request),
    amend: (id, resultJson, durationMs) => this.amendHistory(id, resultJson, durationMs),
    prune: (retentionMs, limit) => this.pruneHistory(retentionMs, limit),
  };
  readonly bulk: StoreBulk = {
    countJobs: (filter, cap) => this.countJobs(filter, cap),
    retryDeadletterMany: (filter, retries, limit) =>
      this.retryDeadletterMany(filter, retries, limit),
    deleteMany: (filter, limit) => this.deleteMany(filter, limit),
  };
  readonly views: StoreViews = {
    overdueTypes: (request) => this.overdueTypes(request),
    queueStats: (options) => this.queueStats(options),
    estimateJobs: () => this.estimateJobs(),
  };
  readonly steps: StoreSteps = {
    save: (ref, stepsJson, tx) => this.saveSteps(ref, stepsJson, tx),
    saveInTransaction: (ref, work, stepsJsonOf) =>
      this.saveStepsInTransaction(ref, work, stepsJsonOf),
  };
  readonly waits: StoreWaits = {
    sleep: (ref, stepsJson, delayMs) => this.sleepHeld(ref, stepsJson, delayMs),
    signal: (name, key, payloadJson) => this.signal(name, key, payloadJson),
    pruneSignals: (retentionMs, limit) => this.pruneSignals(retentionMs, limit),
    takeSignal: (ref, name, key, stepsJsonOf) => this.takeSignal(ref, name, key, stepsJsonOf),
    waitSignal: (ref, name, key, stepsJson, timeoutMs) =>
      this.waitSignal(ref, name, key, stepsJson, timeoutMs),
  };

  constructor(options: SqlJobStoreOptions) {
    this.name = options.name;
    this.label = options.label;
    // Scope limits, key modes, the blocked set, progress, logs, time limits and start marks are the SQL core's
    // own, on every dialect (as are all the abilities below).
    this.capabilities = {
      scopeLimits: true,
      keyModes: true,
      blockedSet: true,
      progress: true,
      startMarks: true,
      logs: true,
      timeLimits: true,
      ...(options.dialect.batchLimit === undefined
        ? {}
        : { batchLimit: options.dialect.batchLimit }),
      ...options.capabilities,
    };
    this.dialect = options.dialect;
    this.executor = options.executor;
    this.lockRetries = options.dialect.lockRetries?.() ?? null;
    this.context = sqlEnv(options.dialect, options.label, options.notify ?? null);
    const batched = options.dialect.ops.saveSteps;
    if (batched) this.steps.saveMany = (saves) => this.saveManySteps(batched, saves);
    const partitions = options.dialect.historyPartitions;
    if (partitions) this.history.partitionMs = partitions.partitionMs;
  }

  /**
   * Runs an operation, made afresh for each try: in one transaction when `transaction`, in the
   * caller's when `tx` is given, else statement by statement; again after a deadlock.
   */
  protected async run<T>(what: string, make: () => Operation<T>, options: Run): Promise<T> {
    const retries = options.tx === undefined ? (options.lockRetries ?? 0) : 0;
    const started = performance.now();
    for (let attempt = 0; ; attempt++) {
      try {
        if (this.closed) throw new StoreError(`[${this.label}] ${what}: the store is closed`);
        const runOptions: RunOptions = { transaction: options.transaction };
        if (options.tx !== undefined) runOptions.tx = options.tx;
        if (options.purpose !== undefined) runOptions.purpose = options.purpose;
        return await this.executor.run(make(), runOptions);
      } catch (error) {
        const wait =
          retries > 0 && this.dialect.isRetryable(error)
            ? this.deadlockRetryDelayMs(
                what,
                error,
                attempt + 1,
                retries,
                performance.now() - started,
              )
            : null;
        if (wait === null) throw this.wrap(what, error);
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  /**
   * After a deadlock or lock-wait error (`Dialect.isRetryable`) ended `what`: milliseconds to
   * wait before retry number `retry` (1 for the first), or null to give up. `elapsedMs`: time
   * since the operation's first try began. The dialect's `lockRetries` back off, bound the time
   * and count retries (`@jobs/mysql`'s `onRetry`); without them, at once, up to `retries` times.
   */
  protected deadlockRetryDelayMs(
    what: string,
    error: unknown,
    retry: number,
    retries: number,
    elapsedMs: number,
  ): number | null {
    if (this.lockRetries) return this.lockRetries.delayMs(what, error, retry, elapsedMs);
    return retry <= retries ? 0 : null;
  }

  /** A driver error as a `StoreError` naming the package and the operation. */
  protected wrap(what: string, error: unknown): JobsError {
    if (error instanceof JobsError) return error;
    const message = error instanceof Error ? error.message : String(error);
    return new StoreError(`[${this.label}] ${what}: ${message}`, { cause: error });
  }

  /**
   * Creates the tables if absent and applies newer schema versions under the database's
   * migration lock. Idempotent; safe when several processes call it at once. Returns the
   * versions it applied (none when the schema was up to date).
   */
  async migrate(): Promise<MigrationResult> {
    const { lock, unlock, transactional } = this.dialect.migrateLock;
    const applied = await this.run('migrate', () => locked(lock, migrate(this.context), unlock), {
      transaction: transactional,
      purpose: 'migrate',
    });
    return { applied, version: this.schemaVersion() };
  }

  /** The newest schema version this package knows (what `migrate()` brings a database to). */
  schemaVersion(): number {
    return Math.max(0, ...this.dialect.migrations.map((m) => m.version));
  }

  /**
   * See `JobStore.verifySchema`: the schema's version against the newest this package knows;
   * a missing or older schema says to run `migrate()`.
   */
  async verifySchema(): Promise<void> {
    const newest = Math.max(0, ...this.dialect.migrations.map((m) => m.version));
    // Null when there is no version table (a database never migrated); a database that cannot
    // be reached fails here as what it is, not as a missing migration.
    const version = await this.run('verifySchema', () => schemaVersion(this.context), {
      transaction: false,
    });
    if (version !== null && version >= newest) return;
    const found =
      version === null ? 'has no @jobs tables yet' : `is at schema version ${version} of ${newest}`;
    throw new JobsError(
      'SCHEMA',
      `[${this.label}] the database ${found}: run migrations first — \`await store.migrate()\` once at deploy, or \`npx jobsctl --db <url> migrate\``,
    );
  }

  /** The statements `migrate()` runs on an empty database, for applying them by hand. */
  migrationSql(): string {
    return migrationSql(this.context);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.executor.close();
  }

  now(): Promise<Date> {
    return this.run('now', () => jobOps.now(this.context), { transaction: false });
  }

  /**
   * Inserts jobs in one transaction; with `{ tx }`, in the caller's open transaction. Then,
   * outside the caller's transaction, blocks what limited jobs cannot start soon
   * (`rebalanceScopes`): in it, other rebalances would not see those writes until the caller
   * commits, so settles and the sweep take care of them instead.
   */
  async enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    const tx = options?.tx ?? undefined;
    const inCallerTx = tx !== undefined && tx !== null;
    const env = this.enqueueEnv(inCallerTx);
    const results = await this.run('enqueue', () => jobOps.enqueue(env, jobs), {
      // As the dialect's `enqueue` says, and always when a key mode changes a holder (it is
      // locked, then changed or given a follow-up, in one transaction).
      transaction:
        jobs.some(jobOps.changesHolder) ||
        needsTransaction(this.dialect.ops.enqueue, this.context, jobs),
      lockRetries: LOCK_RETRIES,
      ...(inCallerTx ? { tx } : {}),
    });
    if (!inCallerTx) this.enqueueCommitted(results);
    const scopes = inCallerTx ? [] : jobOps.limitedScopes(jobs);
    // Its own call: a retry of it must never insert the jobs again.
    if (scopes.length > 0) await this.rebalanceScopes(scopes).catch(() => 0);
    return results;
  }

  /**
   * The names an enqueue runs with: `this.context`, whose `notify` wakes engines in the
   * enqueuing statement. A store that wakes engines after commit instead (`enqueueCommitted`)
   * returns a copy without `notify` when the enqueue is not in the caller's transaction.
   */
  protected enqueueEnv(_inCallerTx: boolean): SqlEnv {
    return this.context;
  }

  /**
   * An enqueue outside the caller's transaction committed (`enqueueEnv`'s other half): by
   * default `jobsDue` with the jobs enqueued.
   */
  protected enqueueCommitted(results: readonly EnqueueResult[]): void {
    this.jobsDue(results.length);
  }

  /**
   * `count` jobs were made due by a committed write — an enqueue outside the caller's
   * transaction (`enqueueCommitted`), a signal's waiters, released jobs. The statement that did
   * it sent `notify` where the dialect has one; a store that wakes engines after commit instead
   * wakes them here.
   */
  protected jobsDue(_count: number): void {}

  /**
   * The enqueue operation itself, for a store whose executor can also run it synchronously
   * (`@jobs/sqlite`'s `enqueueSync` inside the caller's better-sqlite3 transaction).
   */
  protected enqueueOperation(jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
    return jobOps.enqueue(this.context, jobs);
  }

  async acquire(request: AcquireRequest): Promise<Job[]> {
    // Where acquisition takes the one write lock, a plain read first says whether to take it.
    if (
      this.dialect.probeBeforeAcquire &&
      !(await this.run('acquire', () => jobOps.anyCandidate(this.context, request), {
        transaction: false,
      }))
    ) {
      return [];
    }
    const token = randomUUID();
    const rows = await this.run('acquire', () => jobOps.acquire(this.context, request, token), {
      transaction: needsTransaction(this.dialect.ops.acquire, this.context, request, token),
      lockRetries: LOCK_RETRIES,
    });
    return this.acquired(rows, request, token);
  }

  /** Acquired rows as jobs, after the dialect's second step if it has one. */
  private async acquired(rows: SqlRow[], request: AcquireRequest, token: string): Promise<Job[]> {
    const locked = this.dialect.ops.acquireLocked;
    if (locked && rows.some((row) => row.needs_exclusive === true)) {
      // See `DialectOps.acquireLocked`: the first step took nothing.
      const c = this.context;
      const again = await this.run('acquire', () => locked.run(c, request, token), {
        transaction: needsTransaction(locked, c, request, token),
        lockRetries: LOCK_RETRIES,
      });
      return this.noteScopes(jobOps.toJobs(again));
    }
    return this.noteScopes(jobOps.toJobs(rows));
  }

  /**
   * `complete(done)` then `acquire(request)` in one call: one statement where the dialect fuses
   * them (PostgreSQL), else one transaction on one connection.
   */
  completeAndAcquire(
    done: readonly JobCompletion[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }> {
    return this.afterSettle(done, this.completeThenAcquire(done, request));
  }

  private async completeThenAcquire(
    done: readonly JobCompletion[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }> {
    const token = randomUUID();
    const c = this.context;
    const fused = this.dialect.ops.completeAndAcquire;
    const valid = done.filter((ref) => isJobId(ref.id));
    if (
      fused &&
      valid.length > 0 &&
      valid.length <= 1_000 &&
      request.limit > 0 &&
      request.types.length > 0
    ) {
      const keep = jobOps.keepsCompleted(c);
      const result = await this.run(
        'completeAndAcquire',
        () => fused.run(c, valid, request, token, keep),
        {
          transaction: needsTransaction(fused, c, valid, request, token, keep),
          lockRetries: LOCK_RETRIES,
        },
      );
      const completed = new Set(result.completed);
      return {
        lost: done.filter((ref) => !completed.has(ref.id)).map((ref) => ref.id),
        jobs: await this.acquired(result.rows, request, token),
      };
    }
    const result = await this.run(
      'completeAndAcquire',
      function* (): Operation<{ lost: string[]; rows: SqlRow[] }> {
        const { lost } = done.length > 0 ? yield* jobOps.complete(c, done) : { lost: [] };
        const rows = yield* jobOps.acquire(c, request, token);
        return { lost, rows };
      },
      {
        transaction:
          needsTransaction(c.d.ops.acquire, c, request, token) ||
          (done.length > 0 && needsTransaction(jobOps.completeOp(c), c, done)),
        lockRetries: LOCK_RETRIES,
      },
    );
    return {
      lost: result.lost,
      jobs: await this.acquired(result.rows, request, token),
    };
  }

  /**
   * See `JobStore.completeInTransaction`: `work`'s writes and the fenced completion commit
   * together, or not at all. Needs an executor with `transaction`.
   */
  completeInTransaction<T>(ref: JobCompletion, work: (tx: unknown) => Promise<T>): Promise<T> {
    return this.afterSettle([ref], this.completeWith(ref, work), false);
  }

  private async completeWith<T>(ref: JobCompletion, work: (tx: unknown) => Promise<T>): Promise<T> {
    if (!this.executor.transaction) {
      throw new StoreError(
        `[${this.label}] ctx.transaction: this store cannot open a transaction for a handler`,
      );
    }
    if (this.closed) throw new StoreError(`[${this.label}] ctx.transaction: the store is closed`);
    return this.executor.transaction<T>(async (handle, run) => {
      const result = await work(handle);
      // The fence: the completion changes nothing unless this lease is still the job's, and
      // then the whole transaction rolls back, the handler's writes with it.
      const { lost } = await run(jobOps.complete(this.context, [ref]));
      if (lost.length > 0) throw new LockLostError(ref.id);
      return result;
    });
  }

  /** See `JobStore.saveSteps`: one fenced UPDATE (in the caller's transaction with `tx`). */
  protected saveSteps(ref: JobRef, stepsJson: string, tx?: unknown): Promise<boolean> {
    const options: Run = { transaction: false, lockRetries: LOCK_RETRIES };
    if (tx !== undefined) options.tx = tx;
    return this.run('saveSteps', () => steps.saveSteps(this.context, ref, stepsJson), options);
  }

  /** See `StoreSteps.saveMany`: the dialect's one write for the batch (`DialectOps.saveSteps`). */
  protected async saveManySteps(
    op: OpSpec<[readonly StepSave[]], string[]>,
    saves: readonly StepSave[],
  ): Promise<string[]> {
    const valid = saves.filter((save) => isJobId(save.ref.id));
    const refused = saves.filter((save) => !isJobId(save.ref.id)).map((save) => save.ref.id);
    if (valid.length === 0) return refused;
    const c = this.context;
    const lost = await this.run('saveSteps', () => op.run(c, valid), {
      transaction: needsTransaction(op, c, valid),
      lockRetries: LOCK_RETRIES,
    });
    return [...refused, ...lost];
  }

  /**
   * See `JobStore.saveStepsInTransaction`: `work`'s writes and the fenced checkpoint commit
   * together, or not at all. Needs an executor with `transaction`.
   */
  protected async saveStepsInTransaction<T>(
    ref: JobRef,
    work: (tx: unknown) => Promise<T>,
    stepsJsonOf: (result: T) => string,
  ): Promise<T> {
    if (!this.executor.transaction) {
      throw new StoreError(
        `[${this.label}] ctx.step: this store cannot open a transaction for a step`,
      );
    }
    if (this.closed) throw new StoreError(`[${this.label}] ctx.step: the store is closed`);
    return this.executor.transaction<T>(async (handle, run) => {
      const result = await work(handle);
      // The fence: the checkpoint changes nothing unless this lease is still the job's, and
      // then the whole transaction rolls back, the step's writes with it.
      const saved = await run(steps.saveSteps(this.context, ref, stepsJsonOf(result)));
      if (!saved) throw new LockLostError(ref.id);
      return result;
    });
  }

  /** See `StoreWaits.sleep`: one fenced write; the job's scope slot is free at once. */
  protected sleepHeld(ref: JobRef, stepsJson: string, delayMs: number): Promise<boolean> {
    return this.afterSettle(
      [ref],
      this.run('sleep', () => waits.sleepHeld(this.context, ref, stepsJson, delayMs), {
        transaction: jobOps.settleNeedsTransaction(this.context),
        lockRetries: LOCK_RETRIES,
      }),
      false,
    );
  }

  /** See `StoreWaits.signal`: the signal commits, then its waiters are made due. */
  protected async signal(name: string, key: string, payloadJson: string): Promise<void> {
    const options: Run = { transaction: false, lockRetries: LOCK_RETRIES };
    await this.run(
      'signal',
      () => waits.storeSignal(this.context, name, key, payloadJson),
      options,
    );
    const woke = await this.run(
      'signal',
      () => waits.wakeWaiters(this.context, name, key),
      options,
    );
    if (woke > 0) this.jobsDue(woke);
  }

  /** See `StoreWaits.pruneSignals`: one statement, a small batch. */
  protected pruneSignals(retentionMs: number, limit: number): Promise<number> {
    return this.run('pruneSignals', () => waits.pruneSignals(this.context, retentionMs, limit), {
      transaction: false,
      lockRetries: LOCK_RETRIES,
    });
  }

  /** See `StoreWaits.takeSignal`: one transaction, fenced by the token. */
  protected takeSignal(
    ref: JobRef,
    name: string,
    key: string,
    stepsJsonOf: (payloadJson: string | null) => string | null,
  ): Promise<string | null> {
    return this.run(
      'takeSignal',
      () => waits.takeSignal(this.context, ref, name, key, stepsJsonOf),
      { transaction: true, lockRetries: LOCK_RETRIES },
    );
  }

  /** See `StoreWaits.waitSignal`: the sleep and the waiter commit together, then a look back. */
  protected async waitSignal(
    ref: JobRef,
    name: string,
    key: string,
    stepsJson: string,
    timeoutMs: number,
  ): Promise<boolean> {
    const c = this.context;
    const slept = await this.afterSettle(
      [ref],
      this.run(
        'waitSignal',
        function* () {
          if (!(yield* waits.sleepHeld(c, ref, stepsJson, timeoutMs))) return false;
          yield* waits.addWaiter(c, ref, name, key);
          return true;
        },
        { transaction: true, lockRetries: LOCK_RETRIES },
      ),
      false,
    );
    if (!slept) return false;
    const woke = await this.run('waitSignal', () => waits.wakeIfSignalled(c, ref.id, name, key), {
      transaction: false,
      lockRetries: LOCK_RETRIES,
    });
    if (woke) this.jobsDue(1);
    return true;
  }

  complete(jobs: readonly JobCompletion[]): Promise<SettleResult> {
    return this.afterSettle(
      jobs,
      this.run('complete', () => jobOps.complete(this.context, jobs), {
        transaction: needsTransaction(jobOps.completeOp(this.context), this.context, jobs),
        lockRetries: LOCK_RETRIES,
      }),
    );
  }

  fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    return this.afterSettle(
      failures,
      this.run('fail', () => jobOps.fail(this.context, failures), {
        transaction: needsTransaction(this.dialect.ops.fail, this.context, failures),
        lockRetries: LOCK_RETRIES,
      }),
    );
  }

  protected takeRateTokens(requests: readonly RateTokenRequest[]): Promise<RateTokenGrant[]> {
    return this.run('takeRateTokens', () => rateLimits.takeRateTokens(this.context, requests), {
      transaction: true,
      lockRetries: LOCK_RETRIES,
    });
  }

  protected deferJobs(jobs: readonly JobRef[], delayMs: number): Promise<SettleResult> {
    return this.afterSettle(
      jobs,
      this.run('deferJobs', () => rateLimits.deferJobs(this.context, jobs, delayMs), {
        transaction: jobOps.settleNeedsTransaction(this.context),
        lockRetries: LOCK_RETRIES,
      }),
    );
  }

  async release(jobs: readonly JobRef[]): Promise<SettleResult> {
    const result = await this.afterSettle(
      jobs,
      this.run('release', () => jobOps.release(this.context, jobs), {
        transaction: needsTransaction(this.dialect.ops.release, this.context, jobs),
        lockRetries: LOCK_RETRIES,
      }),
    );
    const released = jobs.length - result.lost.length;
    if (released > 0) this.jobsDue(released);
    return result;
  }

  renewLeases(
    owner: string,
    leaseMs: number,
    jobs: readonly LeaseRenewalRef[],
  ): Promise<RenewResult> {
    return this.run('renewLeases', () => jobOps.renewLeases(this.context, owner, leaseMs, jobs), {
      transaction: needsTransaction(this.dialect.ops.renew, this.context, owner, leaseMs, jobs),
      lockRetries: LOCK_RETRIES,
      purpose: 'heartbeat',
    });
  }

  /**
   * Also sweeps the blocked sets (see `JobStore.rebalanceScopes`): recovered jobs free slots.
   * One read first says whether any lease lapsed; only then are transactions opened.
   */
  recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    return this.afterChange(
      (async () => {
        const lapsed = await this.run(
          'recoverExpiredLeases',
          () => recover.anyExpiredLease(this.context),
          { transaction: false },
        );
        const result = lapsed
          ? await this.recoverLapsed(limit)
          : { requeued: [], deadlettered: [] };
        // Follow-ups whose holder ended without the step after its settle (a crash between,
        // another process's settle, a deleted holder).
        await this.releaseFollowups(null).catch(() => undefined);
        return result;
      })(),
    );
  }

  /** Ends up to `limit` lapsed leases: cancel-requested jobs first, they end cancelled. */
  private async recoverLapsed(limit: number): Promise<RecoverResult> {
    const cancelled = await this.run(
      'recoverExpiredLeases',
      () => recover.recoverCancelled(this.context, limit),
      { transaction: true, lockRetries: LOCK_RETRIES },
    );
    const result = await this.run(
      'recoverExpiredLeases',
      () => recover.recoverExpiredLeases(this.context, limit),
      {
        transaction: needsTransaction(this.dialect.ops.recover, this.context, limit),
        lockRetries: LOCK_RETRIES,
      },
    );
    return cancelled.length > 0 ? { ...result, cancelled } : result;
  }

  /** See `JobStore.rebalanceScopes` and `operations/blocked-set.ts`. */
  rebalanceScopes(scopes?: readonly string[], afterSettle = false): Promise<number> {
    // No transaction: every write re-checks the state it moves a row from.
    return this.run(
      'rebalanceScopes',
      () => blockedSet.rebalanceScopes(this.context, scopes, this.sweepCursor, afterSettle),
      { transaction: false, lockRetries: LOCK_RETRIES },
    );
  }

  /**
   * Remembers the scopes of limited jobs leased here, for settles whose refs do not say, and
   * which leased jobs hold a key (their settle may release a follow-up).
   */
  private noteScopes(jobs: Job[]): Job[] {
    for (const job of jobs) {
      const scope = limitedScopeOf(job);
      if (scope !== undefined) this.leasedScopes.set(job.id, scope);
      if (job.key !== null) this.leasedKeyed.add(job.id);
    }
    // Leases never settled here (lost, or settled by another process) must not pile up.
    for (const id of this.leasedScopes.keys()) {
      if (this.leasedScopes.size <= MAX_LEASED_SCOPES) break;
      this.leasedScopes.delete(id);
    }
    for (const id of this.leasedKeyed) {
      if (this.leasedKeyed.size <= MAX_LEASED_SCOPES) break;
      this.leasedKeyed.delete(id);
    }
    return jobs;
  }

  /**
   * Enqueues the follow-ups of keyed holders that are gone (`operations/followups.ts`): of
   * `holderIds` after their settle (one cheap read first; a transaction only when there is
   * one), or any orphaned ones (`null`, the recovery pass's sweep). A failure is left to the
   * next sweep.
   */
  private async releaseFollowups(holderIds: readonly string[] | null): Promise<void> {
    const found = await this.run('enqueue', () => followups.hasFollowups(this.context, holderIds), {
      transaction: false,
    });
    if (!found) return;
    await this.run('enqueue', () => followups.releaseFollowups(this.context, holderIds), {
      transaction: true,
      lockRetries: LOCK_RETRIES,
    });
  }

  /**
   * `settled`, after which the scopes of limited jobs among `refs` (named by the ref, or leased
   * here) get their next blocked jobs in. A failure there is not the settle's: the sweep after
   * the next expired-lease recovery lets those jobs in.
   */
  private async afterSettle<T>(
    refs: readonly JobRef[],
    settled: Promise<T>,
    /** A `SettleResult` whose refusals `refusalsExplained` tells apart (false: `work`'s result). */
    explain = true,
  ): Promise<T> {
    const done = await settled;
    const result: T = explain ? await this.refusalsExplained<T>(refs, done as SettleResult) : done;
    const scopes: string[] = [];
    const leased = this.leasedScopes.size > 0;
    const keyed: string[] = [];
    if (this.leasedKeyed.size > 0) {
      for (const ref of refs) if (this.leasedKeyed.delete(ref.id)) keyed.push(ref.id);
    }
    for (const ref of refs) {
      if (ref.scope !== undefined) scopes.push(ref.scope);
      if (!leased) continue;
      const scope = this.leasedScopes.get(ref.id);
      if (scope === undefined) continue;
      this.leasedScopes.delete(ref.id);
      if (ref.scope === undefined) scopes.push(scope);
    }
    if (scopes.length > 0) await this.rebalanceScopes(scopes, true).catch(() => 0);
    if (keyed.length > 0) await this.releaseFollowups(keyed).catch(() => undefined);
    return result;
  }

  /**
   * Tells a settle's refusals apart (`SettleResult`): a refused id whose job is still running
   * under the ref's token with a cancel request was refused for that request, not lost. The
   * operations report refusals as one list; this reads only those ids (rare: a lost lease or a
   * cancel request), so the hot path pays nothing. A read that fails leaves the id lost (its
   * lease runs out, and recovery ends a cancel-requested job as cancelled).
   */
  private async refusalsExplained<T>(refs: readonly JobRef[], settled: SettleResult): Promise<T> {
    const result = settled as SettleResult & T;
    if (result.lost.length === 0) return result;
    const tokens = new Map(refs.map((ref) => [ref.id, ref.token]));
    const lost: string[] = [];
    const cancelRequested: string[] = [];
    for (const id of result.lost) {
      const job = await this.getJob(id).catch(() => null);
      const refused =
        job?.state === 'running' &&
        job.cancelRequested === true &&
        job.lockToken === tokens.get(id);
      (refused ? cancelRequested : lost).push(id);
    }
    return cancelRequested.length > 0 ? { ...result, lost, cancelRequested } : result;
  }

  /**
   * `changed` (an operator's write, or a recovery pass), after which the filter's scope, when it
   * names one, is rebalanced, and a sweep takes the next scopes in turn (bounded).
   */
  private async afterChange<T>(changed: Promise<T>, filter?: JobFilter): Promise<T> {
    const result = await changed;
    if (filter?.scope !== undefined) await this.rebalanceScopes([filter.scope]).catch(() => 0);
    await this.rebalanceScopes().catch(() => 0);
    return result;
  }

  nextDueAt(request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>): Promise<Date | null> {
    return this.run('nextDueAt', () => jobOps.nextDueAt(this.context, request), {
      transaction: false,
    });
  }

  // ---- admin ----

  getJob(id: string): Promise<Job | null> {
    return this.run('getJob', () => admin.getJob(this.context, id), { transaction: false });
  }

  listJobs(request: ListJobsRequest): Promise<Job[]> {
    return this.run('listJobs', () => admin.listJobs(this.context, request), {
      transaction: false,
    });
  }

  retryDeadletter(id: string, retries: number): Promise<Job | null> {
    return this.afterChange(
      this.run('retryDeadletter', () => admin.retryDeadletter(this.context, id, retries), {
        transaction: true,
        lockRetries: LOCK_RETRIES,
      }),
    );
  }

  protected cancel(id: string): Promise<CancelOutcome> {
    return this.afterChange(
      this.run('cancel', () => cancel.cancel(this.context, id), {
        transaction: true,
        lockRetries: LOCK_RETRIES,
      }),
    );
  }

  protected cancelHeld(jobs: readonly JobCompletion[]): Promise<SettleResult> {
    return this.afterSettle(
      jobs,
      this.run('cancelHeld', () => cancel.cancelHeld(this.context, jobs), {
        transaction: true,
        lockRetries: LOCK_RETRIES,
      }),
    );
  }

  async deleteJob(id: string): Promise<boolean> {
    const deleted = await this.afterChange(
      this.run('deleteJob', () => admin.deleteJob(this.context, id), {
        transaction: admin.deleteNeedsTransaction(this.context),
        lockRetries: LOCK_RETRIES,
      }),
    );
    // A change queued for its key while it ran is enqueued now that it is gone, not at the next
    // recovery pass (as the memory store does). A failure there is left to that sweep.
    if (deleted) await this.releaseFollowups([id]).catch(() => undefined);
    return deleted;
  }

  protected countJobs(filter: JobFilter, cap?: number): Promise<number> {
    return this.run('countJobs', () => admin.countJobs(this.context, filter, cap), {
      transaction: false,
    });
  }

  protected retryDeadletterMany(
    filter: JobFilter,
    retries: number,
    limit: number,
  ): Promise<number> {
    return this.afterChange(
      this.run(
        'retryDeadletterMany',
        () => admin.retryDeadletterMany(this.context, filter, retries, limit),
        { transaction: true, lockRetries: LOCK_RETRIES },
      ),
      filter,
    );
  }

  protected async deleteMany(filter: JobFilter, limit: number): Promise<number> {
    const deleted = await this.afterChange(
      this.run('deleteMany', () => admin.deleteMany(this.context, filter, limit), {
        transaction: true,
        lockRetries: LOCK_RETRIES,
      }),
      filter,
    );
    // As deleteJob: the follow-ups of deleted holders are enqueued now (any orphaned one).
    if (deleted > 0) await this.releaseFollowups(null).catch(() => undefined);
    return deleted;
  }

  // ---- history ----

  /** See `JobStore.configureHistory`. Until called, the store keeps no history. */
  protected configureHistory(settings: HistorySettings): void {
    Object.assign(this.context.historySettings, {
      keep: settings.keep,
      retentionMs: settings.retentionMs,
    });
  }

  protected getHistory(id: string): Promise<JobHistoryRecord | null> {
    return this.run('getHistory', () => jobOps.getHistory(this.context, id), {
      transaction: false,
    });
  }

  protected amendHistory(
    id: string,
    resultJson: string | null,
    durationMs: number,
  ): Promise<boolean> {
    return this.run(
      'amendHistory',
      () => jobOps.amendHistory(this.context, id, resultJson, durationMs),
      { transaction: false, lockRetries: LOCK_RETRIES },
    );
  }

  protected listHistory(request: ListHistoryRequest): Promise<JobHistoryRecord[]> {
    return this.run('listHistory', () => jobOps.listHistory(this.context, request), {
      transaction: false,
    });
  }

  protected pruneHistory(retentionMs: number, limit: number): Promise<number | null> {
    return this.run('pruneHistory', () => jobOps.pruneHistory(this.context, retentionMs, limit), {
      // PostgreSQL's lock is transaction-scoped; SQLite's transaction is the lock.
      transaction: true,
      lockRetries: LOCK_RETRIES,
    });
  }

  suspend(filter: JobFilter): Promise<number> {
    return this.afterChange(
      this.run('suspend', () => admin.suspend(this.context, filter), {
        transaction: false,
        lockRetries: LOCK_RETRIES,
      }),
      filter,
    );
  }

  activate(filter: JobFilter): Promise<number> {
    return this.afterChange(
      this.run('activate', () => admin.activate(this.context, filter), {
        transaction: true,
        lockRetries: LOCK_RETRIES,
      }),
      filter,
    );
  }

  stats(): Promise<StatsRow[]> {
    return this.run('stats', () => admin.stats(this.context), { transaction: false });
  }

  protected overdueTypes(request: {
    excludeTypes: readonly string[];
    dueBefore: Date;
    limit: number;
  }): Promise<OverdueType[]> {
    return this.run('overdueTypes', () => admin.overdueTypes(this.context, request), {
      transaction: false,
    });
  }

  protected queueStats(options?: { newest?: number }): Promise<QueueStatsRow[]> {
    return this.run('queueStats', () => admin.queueStats(this.context, options), {
      transaction: false,
    });
  }

  protected estimateJobs(): Promise<number | null> {
    return this.run('estimateJobs', () => admin.estimateJobs(this.context), {
      transaction: false,
    });
  }

  // ---- schedules ----

  saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    return this.run('saveSchedule', () => schedules.saveSchedule(this.context, request), {
      transaction: true,
      lockRetries: LOCK_RETRIES,
    });
  }

  getSchedule(name: string): Promise<ScheduleRecord | null> {
    return this.run('getSchedule', () => schedules.getSchedule(this.context, name), {
      transaction: false,
    });
  }

  listSchedules(): Promise<ScheduleRecord[]> {
    return this.run('listSchedules', () => schedules.listSchedules(this.context), {
      transaction: false,
    });
  }

  deleteSchedule(name: string): Promise<boolean> {
    return this.run('deleteSchedule', () => schedules.deleteSchedule(this.context, name), {
      transaction: false,
      lockRetries: LOCK_RETRIES,
    });
  }

  setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.run(
      'setSchedulePaused',
      () => schedules.setSchedulePaused(this.context, name, paused),
      { transaction: true, lockRetries: LOCK_RETRIES },
    );
  }

  dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    return this.run('dueSchedules', () => schedules.dueSchedules(this.context, limit), {
      transaction: false,
    });
  }

  fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    return this.run('fireSchedule', () => schedules.fireSchedule(this.context, fire), {
      transaction: true,
      lockRetries: LOCK_RETRIES,
    });
  }
}

// ─── NotifyingSqlJobStore ────────────────────────────────────────────────────────────────────────
/*
 * The part of a store class every SQL store with wake-ups repeats: `subscribe` on its
 * notifier (LISTEN/NOTIFY, `PRAGMA data_version`, a polled wake signal) and closing it with
 * the store.
 */

/** Wakes subscribers when another connection or process may have made jobs acquirable. */
export interface StoreNotifier {
  /** Adds a subscriber; returns the function that removes it. */
  subscribe(listener: () => void): () => void;
  /** Stops waking anyone (the store is closing). */
  close(): void | Promise<void>;
  /** This process started an acquisition (a notifier that polls may pause meanwhile). */
  acquiring?(): void;
}

/**
 * A `SqlJobStore` whose `subscribe` wakes engines through `notifier`, which the subclass's
 * constructor sets (after `super`, so it may read through the store's own `run`).
 *
 * @example
 * class LibsqlJobStore extends NotifyingSqlJobStore {
 *   protected readonly notifier: StoreNotifier;
 *   constructor(client: Client) {
 *     super({ label: 'libsql-store', name: 'libsql', dialect, executor, capabilities });
 *     this.notifier = new ChangeWatcher(() => readVersion(client), 10);
 *   }
 * }
 */
export abstract class NotifyingSqlJobStore extends SqlJobStore {
  protected abstract readonly notifier: StoreNotifier;

  /** Calls `listener` when jobs may have been added elsewhere; returns the unsubscribe function. */
  subscribe(listener: () => void): () => void {
    if (this.closed) throw new StoreError(`[${this.label}] subscribe: the store is closed`);
    return this.notifier.subscribe(listener);
  }

  /** Tells the notifier when acquisitions start (`acquire`, `completeAndAcquire`). */
  protected override run<T>(
    what: string,
    make: () => Operation<T>,
    options: Parameters<SqlJobStore['run']>[2],
  ): Promise<T> {
    if (what === 'acquire' || what === 'completeAndAcquire') this.notifier.acquiring?.();
    return super.run(what, make, options);
  }

  /**
   * A notifier for a database that pushes none (MySQL): reads the dialect's `wakeSignal`
   * through this store every `intervalMs` while anyone subscribes.
   */
  protected watchWakeSignal(intervalMs: number): WakeSignalWatcher {
    const signal = this.dialect.wakeSignal as Query;
    const read = () =>
      this.closed
        ? null
        : this.run('subscribe', () => readWakeSignal(signal), { transaction: false });
    return new WakeSignalWatcher(read, intervalMs);
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    // Side by side: each gives a silent server about a second before it destroys sockets.
    await Promise.all([this.notifier.close(), super.close()]);
  }
}
