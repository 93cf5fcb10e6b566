/**
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
 *       skipLocked: false, transactionalEnqueue: false, multiProcess: true } });
 *   }
 * }
 */
import { randomUUID } from 'node:crypto';
import { JobsError, LockLostError, StoreError } from '../errors.js';
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
  StoreCapabilities,
} from '../store.js';
import { limitedScopeOf } from '../store.js';
import { type Dialect, isJobId } from './dialect.js';
import type { Executor, Operation, Query, RunOptions } from './executor.js';
import type { LockRetries } from './lock-retries.js';
import { migrate, migrationSql } from './migrate.js';
import * as acquisition from './operations/acquire.js';
import * as admin from './operations/admin.js';
import * as cancellation from './operations/cancel.js';
import { type SqlContext, sqlContext } from './operations/context.js';
import * as enqueueing from './operations/enqueue.js';
import * as history from './operations/history.js';
import * as limits from './operations/limits.js';
import * as recovery from './operations/recover.js';
import * as schedules from './operations/schedules.js';
import * as blocking from './operations/scopes.js';
import * as settlement from './operations/settle.js';
import { readBool, type SqlRow } from './rows.js';

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

/** Times a whole operation is run again after a deadlock or lock-wait error. */
const WRITE_RETRIES = 3;

interface Run {
  transaction: boolean;
  retries?: number;
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
  protected readonly context: SqlContext;
  protected readonly label: string;
  /** Deadlock / lock-wait retries with backoff, where the dialect has them (MySQL/MariaDB). */
  protected readonly lockRetries: LockRetries | null;
  protected closed = false;
  /** Limited jobs leased by this store and not settled through it yet: id → scope. */
  private readonly leasedScopes = new Map<string, string>();
  /** Where the next blocked-set sweep goes on from (see `operations/scopes.ts`). */
  private readonly sweepCursor: blocking.SweepCursor = { blocked: null, waiting: null };

  constructor(options: SqlJobStoreOptions) {
    this.name = options.name;
    this.label = options.label;
    // Scope limits, key modes, rate limits, cancellation and progress are the SQL core's own,
    // on every dialect.
    this.capabilities = {
      scopeLimits: true,
      keyModes: true,
      rateLimits: true,
      cancellation: true,
      progress: true,
      ...(options.dialect.batchLimit === undefined
        ? {}
        : { batchLimit: options.dialect.batchLimit }),
      ...options.capabilities,
    };
    this.dialect = options.dialect;
    this.executor = options.executor;
    this.lockRetries = options.dialect.lockRetries?.() ?? null;
    this.context = sqlContext(options.dialect, options.label, options.notify ?? null);
  }

  /**
   * Runs an operation, made afresh for each try: in one transaction when `transaction`, in the
   * caller's when `tx` is given, else statement by statement; again after a deadlock.
   */
  protected async run<T>(what: string, make: () => Operation<T>, options: Run): Promise<T> {
    const retries = options.tx === undefined ? (options.retries ?? 0) : 0;
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
            ? this.retryDelayMs(what, error, attempt + 1, retries, performance.now() - started)
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
  protected retryDelayMs(
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
   * migration lock. Idempotent; safe when several processes call it at once.
   */
  async migrate(): Promise<void> {
    const { lock, unlock, transactional } = this.dialect.migrateLock;
    await this.run('migrate', () => locked(lock, migrate(this.context), unlock), {
      transaction: transactional,
      purpose: 'migrate',
    });
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
    return this.run('now', () => enqueueing.now(this.context), { transaction: false });
  }

  /**
   * Inserts jobs in one transaction; with `{ tx }`, in the caller's open transaction. Then,
   * outside the caller's transaction, blocks what limited jobs cannot start soon
   * (`rebalanceScopes`): in it, other rebalances would not see those writes until the caller
   * commits, so settles and the sweep take care of them instead.
   */
  async enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    const tx = options?.tx ?? undefined;
    const results = await this.run('enqueue', () => enqueueing.enqueue(this.context, jobs), {
      // A dialect's own enqueue is one statement (plus reads): atomic without a transaction,
      // unless the dialect says these jobs need one.
      transaction: this.dialect.enqueueJobs
        ? (this.dialect.enqueueNeedsTransaction?.(jobs) ?? false)
        : true,
      retries: WRITE_RETRIES,
      ...(tx === undefined || tx === null ? {} : { tx }),
    });
    const scopes = tx === undefined || tx === null ? enqueueing.limitedScopes(jobs) : [];
    // Its own call: a retry of it must never insert the jobs again.
    if (scopes.length > 0) await this.rebalanceScopes(scopes).catch(() => 0);
    return results;
  }

  /**
   * The enqueue operation itself, for a store whose executor can also run it synchronously
   * (`@jobs/sqlite`'s `enqueueSync` inside the caller's better-sqlite3 transaction).
   */
  protected enqueueOperation(jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
    return enqueueing.enqueue(this.context, jobs);
  }

  async acquire(request: AcquireRequest): Promise<Job[]> {
    // Where acquisition takes the one write lock, a plain read first says whether to take it.
    if (
      this.dialect.probeBeforeAcquire &&
      !(await this.run('acquire', () => acquisition.anyCandidate(this.context, request), {
        transaction: false,
      }))
    ) {
      return [];
    }
    const token = randomUUID();
    const rows = await this.run(
      'acquire',
      () => acquisition.acquire(this.context, request, token),
      {
        transaction: this.dialect.acquireInTransaction,
        retries: WRITE_RETRIES,
      },
    );
    return this.acquired(rows, request, token);
  }

  /** Acquired rows as jobs, after the dialect's second step if it has one. */
  private async acquired(rows: SqlRow[], request: AcquireRequest, token: string): Promise<Job[]> {
    const exclusive = this.dialect.acquireExclusive;
    if (exclusive && rows.some((row) => row.needs_exclusive === true)) {
      // See `Dialect.acquireExclusive`: the first step took nothing.
      const locked = await this.run('acquire', () => exclusive.call(this.dialect, request, token), {
        transaction: true,
        retries: WRITE_RETRIES,
      });
      return this.noteScopes(acquisition.toJobs(locked));
    }
    return this.noteScopes(acquisition.toJobs(await this.recheck(rows, token)));
  }

  /** See `Dialect.recheckExclusive`. */
  private async recheck(rows: SqlRow[], token: string): Promise<SqlRow[]> {
    const recheck = this.dialect.recheckExclusive;
    if (!recheck || !rows.some((row) => readBool(row.exclusive) && row.scope !== null)) return rows;
    return this.run('acquire', () => recheck.call(this.dialect, rows, token), {
      transaction: true,
      retries: WRITE_RETRIES,
    });
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
        () => fused.call(this.dialect, valid, request, token, history.keepsCompleted(c)),
        { transaction: false, retries: WRITE_RETRIES },
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
        const { lost } = done.length > 0 ? yield* settlement.complete(c, done) : { lost: [] };
        const rows = yield* acquisition.acquire(c, request, token);
        return { lost, rows };
      },
      {
        transaction:
          this.dialect.acquireInTransaction ||
          (done.length > 0 && settlement.completeNeedsTransaction(c)),
        retries: WRITE_RETRIES,
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
    return this.afterSettle([ref], this.completeWith(ref, work));
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
      const { lost } = await run(settlement.complete(this.context, [ref]));
      if (lost.length > 0) throw new LockLostError(ref.id);
      return result;
    });
  }

  complete(jobs: readonly JobCompletion[]): Promise<SettleResult> {
    return this.afterSettle(
      jobs,
      this.run('complete', () => settlement.complete(this.context, jobs), {
        // `Dialect.completeHeld` is one statement: no transaction needed (unless history is kept).
        transaction: settlement.completeNeedsTransaction(this.context),
        retries: WRITE_RETRIES,
      }),
    );
  }

  fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    return this.afterSettle(
      failures,
      this.run('fail', () => settlement.fail(this.context, failures), {
        transaction:
          !this.dialect.failHeldAtomic &&
          (settlement.settleNeedsTransaction(this.context) || failures.length > 1),
        retries: WRITE_RETRIES,
      }),
    );
  }

  takeRateTokens(requests: readonly RateTokenRequest[]): Promise<RateTokenGrant[]> {
    return this.run('takeRateTokens', () => limits.takeRateTokens(this.context, requests), {
      transaction: true,
      retries: WRITE_RETRIES,
    });
  }

  deferJobs(jobs: readonly JobRef[], delayMs: number): Promise<SettleResult> {
    return this.afterSettle(
      jobs,
      this.run('deferJobs', () => limits.deferJobs(this.context, jobs, delayMs), {
        transaction: settlement.settleNeedsTransaction(this.context),
        retries: WRITE_RETRIES,
      }),
    );
  }

  release(jobs: readonly JobRef[]): Promise<SettleResult> {
    return this.afterSettle(
      jobs,
      this.run('release', () => settlement.release(this.context, jobs), {
        transaction: settlement.settleNeedsTransaction(this.context),
        retries: WRITE_RETRIES,
      }),
    );
  }

  renewLeases(
    owner: string,
    leaseMs: number,
    jobs: readonly LeaseRenewalRef[],
  ): Promise<RenewResult> {
    return this.run(
      'renewLeases',
      () => settlement.renewLeases(this.context, owner, leaseMs, jobs),
      { transaction: false, retries: WRITE_RETRIES, purpose: 'heartbeat' },
    );
  }

  /** Also sweeps the blocked sets (see `JobStore.rebalanceScopes`): recovered jobs free slots. */
  recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    return this.afterChange(
      this.run('recoverExpiredLeases', () => recovery.recoverExpiredLeases(this.context, limit), {
        transaction: !this.dialect.recoverExpiredLeases,
        retries: WRITE_RETRIES,
      }),
    );
  }

  /** See `JobStore.rebalanceScopes` and `operations/scopes.ts`. */
  rebalanceScopes(scopes?: readonly string[], afterSettle = false): Promise<number> {
    // No transaction: every write re-checks the state it moves a row from.
    return this.run(
      'rebalanceScopes',
      () => blocking.rebalanceScopes(this.context, scopes, this.sweepCursor, afterSettle),
      { transaction: false, retries: WRITE_RETRIES },
    );
  }

  /** Remembers the scopes of limited jobs leased here, for settles whose refs do not say. */
  private noteScopes(jobs: Job[]): Job[] {
    for (const job of jobs) {
      const scope = limitedScopeOf(job);
      if (scope !== undefined) this.leasedScopes.set(job.id, scope);
    }
    // Leases never settled here (lost, or settled by another process) must not pile up.
    for (const id of this.leasedScopes.keys()) {
      if (this.leasedScopes.size <= MAX_LEASED_SCOPES) break;
      this.leasedScopes.delete(id);
    }
    return jobs;
  }

  /**
   * `settled`, after which the scopes of limited jobs among `refs` (named by the ref, or leased
   * here) get their next blocked jobs in. A failure there is not the settle's: the sweep after
   * the next expired-lease recovery lets those jobs in.
   */
  private async afterSettle<T>(refs: readonly JobRef[], settled: Promise<T>): Promise<T> {
    const result = await settled;
    const scopes: string[] = [];
    const leased = this.leasedScopes.size > 0;
    for (const ref of refs) {
      if (ref.scope !== undefined) scopes.push(ref.scope);
      if (!leased) continue;
      const scope = this.leasedScopes.get(ref.id);
      if (scope === undefined) continue;
      this.leasedScopes.delete(ref.id);
      if (ref.scope === undefined) scopes.push(scope);
    }
    if (scopes.length > 0) await this.rebalanceScopes(scopes, true).catch(() => 0);
    return result;
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
    return this.run('nextDueAt', () => acquisition.nextDueAt(this.context, request), {
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
        retries: WRITE_RETRIES,
      }),
    );
  }

  cancel(id: string): Promise<CancelOutcome> {
    return this.afterChange(
      this.run('cancel', () => cancellation.cancel(this.context, id), {
        transaction: true,
        retries: WRITE_RETRIES,
      }),
    );
  }

  cancelHeld(jobs: readonly JobCompletion[]): Promise<SettleResult> {
    return this.afterSettle(
      jobs,
      this.run('cancelHeld', () => cancellation.cancelHeld(this.context, jobs), {
        transaction: true,
        retries: WRITE_RETRIES,
      }),
    );
  }

  deleteJob(id: string): Promise<boolean> {
    return this.afterChange(
      this.run('deleteJob', () => admin.deleteJob(this.context, id), {
        transaction: admin.deleteNeedsTransaction(this.context),
        retries: WRITE_RETRIES,
      }),
    );
  }

  countJobs(filter: JobFilter, cap?: number): Promise<number> {
    return this.run('countJobs', () => admin.countJobs(this.context, filter, cap), {
      transaction: false,
    });
  }

  retryDeadletterMany(filter: JobFilter, retries: number, limit: number): Promise<number> {
    return this.afterChange(
      this.run(
        'retryDeadletterMany',
        () => admin.retryDeadletterMany(this.context, filter, retries, limit),
        { transaction: true, retries: WRITE_RETRIES },
      ),
      filter,
    );
  }

  deleteMany(filter: JobFilter, limit: number): Promise<number> {
    return this.afterChange(
      this.run('deleteMany', () => admin.deleteMany(this.context, filter, limit), {
        transaction: true,
        retries: WRITE_RETRIES,
      }),
      filter,
    );
  }

  // ---- history ----

  /** See `JobStore.configureHistory`. Until called, the store keeps no history. */
  configureHistory(settings: HistorySettings): void {
    Object.assign(this.context.historySettings, {
      keep: settings.keep,
      retentionMs: settings.retentionMs,
    });
  }

  getHistory(id: string): Promise<JobHistoryRecord | null> {
    return this.run('getHistory', () => history.getHistory(this.context, id), {
      transaction: false,
    });
  }

  listHistory(request: ListHistoryRequest): Promise<JobHistoryRecord[]> {
    return this.run('listHistory', () => history.listHistory(this.context, request), {
      transaction: false,
    });
  }

  pruneHistory(retentionMs: number, limit: number): Promise<number | null> {
    return this.run('pruneHistory', () => history.pruneHistory(this.context, retentionMs, limit), {
      // PostgreSQL's lock is transaction-scoped; SQLite's transaction is the lock.
      transaction: true,
      retries: WRITE_RETRIES,
    });
  }

  suspend(filter: JobFilter): Promise<number> {
    return this.afterChange(
      this.run('suspend', () => admin.suspend(this.context, filter), {
        transaction: false,
        retries: WRITE_RETRIES,
      }),
      filter,
    );
  }

  activate(filter: JobFilter): Promise<number> {
    return this.afterChange(
      this.run('activate', () => admin.activate(this.context, filter), {
        transaction: true,
        retries: WRITE_RETRIES,
      }),
      filter,
    );
  }

  stats(): Promise<StatsRow[]> {
    return this.run('stats', () => admin.stats(this.context), { transaction: false });
  }

  overdueTypes(request: {
    excludeTypes: readonly string[];
    dueBefore: Date;
    limit: number;
  }): Promise<OverdueType[]> {
    return this.run('overdueTypes', () => admin.overdueTypes(this.context, request), {
      transaction: false,
    });
  }

  queueStats(options?: { newest?: number }): Promise<QueueStatsRow[]> {
    return this.run('queueStats', () => admin.queueStats(this.context, options), {
      transaction: false,
    });
  }

  estimateJobs(): Promise<number | null> {
    return this.run('estimateJobs', () => admin.estimateJobs(this.context), {
      transaction: false,
    });
  }

  // ---- schedules ----

  saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    return this.run('saveSchedule', () => schedules.saveSchedule(this.context, request), {
      transaction: true,
      retries: WRITE_RETRIES,
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
      retries: WRITE_RETRIES,
    });
  }

  setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.run(
      'setSchedulePaused',
      () => schedules.setSchedulePaused(this.context, name, paused),
      { transaction: true, retries: WRITE_RETRIES },
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
      retries: WRITE_RETRIES,
    });
  }
}
