/**
 * Dispatch: from a buffered job to a handler's outcome.
 * - `Dispatch`: starts buffered jobs while slots are free, runs each handler with its context
 *   (`ctx.signal`, attempt, occurrence, shard, logger) — or hands the job to its batch — and
 *   hands the outcome to settlement: a completion, a failure with its retry decision, or a
 *   release after `stop()`.
 * - Start marks: a job's start recorded in the store before its handler starts (DESIGN
 *   invariant 4), so a crash charges an attempt only to jobs whose handler started.
 * - Cancellation and progress on the engine's side (invariant 20).
 * - Batch handlers: started jobs of a batch type gathered into one handler call.
 *
 * Each section below keeps its own header.
 */
import { monotonicNow } from '../clock.js';
import {
  CancelledError,
  JobsError,
  JobTimeoutError,
  LockLostError,
  toJobError,
  UnrecoverableError,
  ValidationError,
} from '../errors.js';
import { checkPayload, decideRetry, firedFromTimer, historyResultJson } from '../rules.js';
import {
  canCancel,
  type Job,
  type JobCompletion,
  type LeaseRenewalRef,
  MAX_PROGRESS_BYTES,
} from '../store.js';
import { type ChildRunOptions, runChild } from './children.js';
import { FLOW_META, flowContextOf } from './flow-model.js';
import { callThrough } from './hooks.js';
import { jobLog } from './job-log.js';
import type { ResolvedBatch, ResolvedHandler } from './options.js';
import type { EngineRuntime, HeldJob, JobAbort } from './runtime.js';
import {
  completedPayload,
  copyRef,
  type PendingFailure,
  parentOf,
  RESULT_PENDING_JSON,
  renew,
  renewalRef,
  type Settler,
  sendChildOutcome,
  wakeParentsIfDone,
} from './settlement.js';
import { refuseNestedTransaction, runStep, type StepOptions } from './steps.js';
import type { BatchContext, FlowContext, JobContext, JobLog, Logger } from './types.js';
import { runSleep, runWaitFor, type WaitForOptions } from './waits.js';

// ─── Dispatch ────────────────────────────────────────────────────────────────────────────────────
/*
 * Dispatch: starts buffered jobs while slots are free, runs each handler with its context
 * (`ctx.signal`, attempt, occurrence, shard, logger) — or, for a batch handler, hands the job
 * to its batch (`dispatch.ts`) — and hands the outcome to settlement: a completion, a failure
 * with its retry decision (`retry.ts`), or a release after `stop()`.
 */

export class Dispatcher {
  /** Types already warned about: an acquired job no handler here runs (once each). */
  private readonly unknownTypes = new Set<string>();
  readonly startMarks: StartMarks;
  private readonly batches: Batches;

  constructor(
    private readonly rt: EngineRuntime,
    private readonly settlement: Settler,
  ) {
    this.batches = new Batches(
      rt,
      {
        startRun: (held) => this.startRun(held, rt.options.handlers.get(held.job.type)),
        finish: (held, error, result) => this.finish(held, error, result),
      },
      () => rt.jobs.executing >= rt.options.concurrency,
    );
    this.startMarks = new StartMarks(
      rt,
      settlement,
      (held) => this.execute(held),
      () => this.dispatch(),
    );
  }

  /** The engine's logger (`ctx.log`). */
  get logger(): Logger {
    return this.rt.options.logger;
  }

  /**
   * Holds freshly acquired jobs and starts as many as there are free slots. `sentAt` is when
   * the acquiring call was sent (monotonic ms): their leases count from then, and a job whose
   * local deadline passed before the answer arrived is given back, never started.
   */
  take(jobs: Job[], sentAt: number): void {
    const { jobs: held } = this.rt;
    const added = held.add(jobs, sentAt, this.startMarks.enabled);
    this.rt.emit('acquired', { jobs });
    if (jobs.some((job) => job.cancelRequested) && canCancel(this.rt.options.store)) {
      // Cancelled while held elsewhere, then released: never started again.
      for (const h of added) {
        if (h.job.cancelRequested) cancelRequested(this.rt, this.settlement, h);
      }
    }
    if (!this.rt.running) {
      // Acquired by a call that answered after stop() began: give them back at once.
      this.settlement.queueRelease(held.drainBuffer());
      this.settlement.settleSoon();
      return;
    }
    this.dispatch();
    // Recorded as started but still waiting for a slot: taken back if they wait long.
    if (held.bufferedCount > 0) this.startMarks.watchAhead();
  }

  /** Fills free slots from the buffer, in acquisition order. */
  dispatch(): void {
    const { jobs } = this.rt;
    const { concurrency } = this.rt.options;
    const lapsed: HeldJob[] = [];
    while (this.rt.running && jobs.executing + jobs.starting < concurrency) {
      const now = monotonicNow();
      const held = jobs.takeForSlot(now);
      if (!held) break;
      if (held.phase === 'buffered') this.execute(held, now);
      else if (held.phase === 'starting') this.startMarks.request(held);
      else lapsed.push(held);
    }
    this.callBatchesIfFull();
    if (lapsed.length > 0) {
      // Their local deadline passed while they waited (a late answer, a stalled process).
      this.settlement.queueRelease(lapsed);
      this.settlement.settleSoon();
    }
  }

  /**
   * Starts the handler of `held`, whose start the store records (or needs not record), if its
   * local deadline is still ahead at `now` (this process's clock).
   */
  execute(held: HeldJob, now = monotonicNow()): void {
    const { job } = held;
    const resolved = this.rt.options.handlers.get(job.type);
    if (!resolved) {
      // Acquired by a type this engine does not run (a store that compares names loosely):
      // given back, never called.
      this.giveBackUnknown(held);
      return;
    }
    if (!this.rt.jobs.begin(held, now)) {
      // The local deadline passed before it could start: another owner may hold it now.
      this.rt.reportLeaseLost(held);
      return;
    }
    if (resolved.batch) {
      // Running from now on (it holds its slot); its handler is called with its batch.
      this.batches.join(held, resolved.batch);
      this.callBatchesIfFull();
      return;
    }
    this.callBatchesIfFull();
    const abort = this.startRun(held, resolved);
    const ctx = new RunContext(this, held, abort);
    // On a later microtask, never inside dispatch's loop.
    const run =
      job.meta?.[FLOW_META] === undefined
        ? () => Promise.resolve().then(() => resolved.handler(job, ctx))
        : // A flow node reads its parents' results first (`ctx.flow`).
          () =>
            flowContextOf(this.rt.options.store, job).then((flow) => {
              ctx.flow = flow;
              return resolved.handler(job, ctx);
            });
    const hooks = this.rt.hooks.run;
    (hooks.length === 0 ? run() : callThrough(hooks, [job], run)).then(
      (result: unknown) => this.finish(held, null, result),
      (error: unknown) => this.finish(held, error ?? new Error('handler threw a falsy value')),
    );
  }

  /** Calls every batch being filled now (`stop()`: no other job will join them). */
  callOpenBatches(): void {
    this.batches.callAll();
  }

  /**
   * Every slot holds a running job: no other job can join a batch being filled, so the open
   * batches are called (after the current burst of starts, which may still join them).
   */
  private callBatchesIfFull(): void {
    if (this.batches.openCount > 0 && this.rt.jobs.executing >= this.rt.options.concurrency) {
      this.batches.callAllSoon();
    }
  }

  /** `held`'s run starts now: its time limit is armed and `started` emitted. */
  private startRun(held: HeldJob, resolved: ResolvedHandler | undefined): JobAbort {
    const { job } = held;
    const abort = held.controller as JobAbort;
    const limit = job.timeoutMs ?? resolved?.timeoutMs;
    if (limit !== undefined && limit !== null) {
      // The run's time limit: its signal aborts, and the attempt fails when it returns.
      held.limitTimer = setTimeout(() => {
        held.timedOut = true;
        abort.abort(new JobTimeoutError(job.id, limit));
      }, limit);
    }
    if (firedFromTimer(job) && this.rt.listens('timer-fired')) {
      this.rt.emit('timer-fired', { job });
    }
    if (this.rt.listens('started')) this.rt.emit('started', { job });
    return abort;
  }

  private giveBackUnknown(held: HeldJob): void {
    const { type } = held.job;
    if (!this.unknownTypes.has(type)) {
      this.unknownTypes.add(type);
      this.rt.options.logger.warn(
        `the store handed this engine job ${held.job.id} of type ${JSON.stringify(type)}, which it has no handler for; given back unstarted, due again after a poll interval`,
        { type },
      );
    }
    this.rt.jobs.toSettling(held);
    const { store, pollIntervalMs } = this.rt.options;
    if (!store.rateLimits) {
      this.settlement.queueRelease([held]);
      this.settlement.settleSoon();
      return;
    }
    // Due again only after a poll interval: a store that keeps handing it over is not asked
    // again at once (no hot loop); an engine that runs the type takes it then.
    this.rt.rateLimits
      .defer(held.ref, pollIntervalMs)
      .catch((error: unknown) => this.rt.reportError(error, 'defer'))
      .finally(() => {
        this.rt.jobs.settled(held);
        this.rt.jobs.changed();
      });
  }

  /** `ctx.progress(value)` of `held`'s run. */
  progressOf(held: HeldJob, value: unknown): void {
    reportProgress(this.rt, held, value);
  }

  /** `ctx.step(name, fn, options)` of `held`'s run. */
  stepOf<T>(
    held: HeldJob,
    abort: JobAbort,
    name: string,
    fn: (tx?: unknown) => T | Promise<T>,
    options?: StepOptions,
  ): Promise<T> {
    return runStep(this.rt, held, abort, name, fn, options);
  }

  /** `ctx.sleep(name, duration)` of `held`'s run. */
  sleepOf(
    held: HeldJob,
    abort: JobAbort,
    name: string,
    duration: number | string | Date,
  ): Promise<void> {
    return runSleep(this.rt, held, abort, name, duration);
  }

  /** `ctx.waitFor(name, options)` of `held`'s run. */
  waitForOf<T>(
    held: HeldJob,
    abort: JobAbort,
    name: string,
    options: WaitForOptions,
  ): Promise<T | null> {
    return runWaitFor<T>(this.rt, held, abort, name, options);
  }

  /** `ctx.run(name, type, payload, options)` of `held`'s run. */
  runOf<T>(
    held: HeldJob,
    abort: JobAbort,
    name: string,
    type: string,
    payload: unknown,
    options?: ChildRunOptions,
  ): Promise<T> {
    return runChild<T>(this.rt, held, abort, name, type, payload, options);
  }

  /** `ctx.rateLimited(ms)` of `held`'s run. */
  rateLimitedOf(held: HeldJob, delayMs: number): Promise<void> {
    return this.rt.rateLimits.pushBack(held.job, delayMs);
  }

  /** `ctx.transaction`: the handler's writes and the job's completion commit together. */
  async completeInTransaction<T, Tx>(held: HeldJob, work: (tx: Tx) => T | Promise<T>): Promise<T> {
    const { store } = this.rt.options;
    if (!store.completeInTransaction) {
      throw new JobsError(
        'STORE',
        `[@jobs/core] ctx.transaction: the ${store.name} store has no transactions for handlers`,
      );
    }
    if (held.completedInTransaction) {
      throw new JobsError(
        'INVALID_STATE',
        `[@jobs/core] ctx.transaction: job ${held.job.id} was already completed by an earlier ctx.transaction`,
      );
    }
    refuseNestedTransaction(held, 'ctx.transaction');
    if (held.phase !== 'running') throw new LockLostError(held.job.id);
    if (held.cancelRequested) throw new CancelledError(held.job.id);
    // The handler has not returned yet: the record has its duration so far and no result —
    // a child's says its result is still to come, so its parent does not take it for null.
    const completion: JobCompletion = copyRef(held.ref);
    completion.durationMs = Date.now() - held.startedAt;
    if (parentOf(held.job) !== null && this.rt.options.history.keep === 'all') {
      completion.resultJson = RESULT_PENDING_JSON;
    }
    let result: T;
    held.openTransaction = 'ctx.transaction';
    try {
      result = await store.completeInTransaction(completion, async (tx) => work(tx as Tx));
    } catch (error) {
      throw await this.cancelledInstead(held, error);
    } finally {
      held.openTransaction = undefined;
    }
    held.completedInTransaction = true;
    return result;
  }

  /**
   * `ctx.transaction`'s completion was refused (`LockLostError`): when that is because an
   * operator cancelled the job (still ours, flagged), the handler gets a `CancelledError` and
   * the job ends cancelled; else the error as it was.
   */
  private async cancelledInstead(held: HeldJob, error: unknown): Promise<unknown> {
    const { store } = this.rt.options;
    if (!(error instanceof LockLostError) || !canCancel(store)) return error;
    const job = await store.getJob(held.job.id).catch(() => null);
    if (!job?.cancelRequested || job.lockToken !== held.ref.token) return error;
    held.cancelRequested = true;
    return new CancelledError(held.job.id);
  }

  private finish(held: HeldJob, error: unknown, result?: unknown): void {
    const { jobs } = this.rt;
    if (held.limitTimer) clearTimeout(held.limitTimer);
    const phase = jobs.handlerReturned(held);
    const ranMs = Date.now() - held.startedAt;
    jobs.noteRun(ranMs);
    const pushBackMs = this.rt.rateLimits.takePushBack(held.job.id);
    if (held.timedOut && !held.completedInTransaction && !held.cancelRequested) {
      // Over its time limit: the attempt fails, whatever the handler returned.
      const limit = held.job.timeoutMs ?? this.rt.options.handlers.get(held.job.type)?.timeoutMs;
      error = new JobTimeoutError(held.job.id, limit ?? ranMs);
    }
    if (held.completedInTransaction) {
      // Completed in the handler's own transaction: nothing left to write but the truth for
      // history — what the handler returned and how long it ran (the record was written when
      // its transaction committed, while it still ran).
      jobs.toSettling(held);
      jobs.settled(held);
      if (error !== null) {
        this.rt.options.logger.warn(
          `job ${held.job.id} threw after ctx.transaction completed it; it stays completed`,
          { error },
        );
      }
      this.amendHistory(held, error === null ? result : undefined, ranMs);
      this.rt.emit('completed', { job: held.job, durationMs: ranMs });
      if (parentOf(held.job) !== null) {
        this.tellParentLate(held, error === null ? result : null);
      }
    } else if (phase !== 'running') {
      // Lease lost while running: someone else may own the job now; nothing of ours is written.
    } else if (held.cancelRequested) {
      // An operator cancelled it: it ends cancelled whatever the handler did, never retried.
      held.completion = copyRef(held.ref);
      held.completion.durationMs = ranMs;
      jobs.toSettling(held);
      this.settlement.queueCancel(held);
    } else if (held.wait) {
      // `ctx.sleep`: back to waiting with its checkpoint, whatever the handler returned.
      jobs.toSettling(held);
      this.putToSleep(held, held.wait);
    } else if (pushBackMs !== null) {
      // `ctx.rateLimited(ms)`: back to waiting for ms, whatever the handler returned.
      jobs.toSettling(held);
      this.deferRateLimited(held, pushBackMs);
    } else if (error === null) {
      // Also after stop() aborted it: a handler that succeeded in the grace is done.
      const completion: JobCompletion = copyRef(held.ref);
      completion.durationMs = ranMs;
      // Serialised only when history keeps it: `keep: 'none'` costs nothing here.
      if (this.rt.options.history.keep === 'all') {
        completion.resultJson = historyResultJson(result);
      }
      held.completion = completion;
      jobs.toSettling(held);
      if (parentOf(held.job) !== null) this.completeChild(held, result);
      else this.settlement.queueCompletion(held);
    } else if (held.shutdownAborted) {
      // Failed because stop() aborted it: not a failed attempt; another engine runs it.
      jobs.toSettling(held);
      this.settlement.queueRelease([held]);
    } else {
      jobs.toSettling(held);
      this.settlement.queueFailure(this.failureOf(held, error));
    }
    this.settlement.settleSoon();
    this.dispatch();
    if (jobs.room() >= jobs.refillBatch()) this.rt.wakeup.wake();
    jobs.changed();
  }

  /**
   * A child job succeeded: its result is stored for its parent first (`settlement.ts`),
   * then it is completed. A result that cannot be stored fails the attempt instead.
   */
  private completeChild(held: HeldJob, result: unknown): void {
    const done = (error: unknown) => {
      if (error === null) this.settlement.queueCompletion(held);
      else this.settlement.queueFailure(this.failureOf(held, error));
      this.settlement.settleSoon();
    };
    let payload: string;
    try {
      payload = completedPayload(held.job.id, result);
    } catch (error) {
      done(error);
      return;
    }
    this.rt.afterwards(
      sendChildOutcome(this.rt.options.store, held.job, payload).then(
        () => done(null),
        (error: unknown) => {
          this.rt.reportError(error, 'child result');
          done(error);
        },
      ),
    );
  }

  /** A child completed in its handler's transaction: its result for its parent, afterwards. */
  private tellParentLate(held: HeldJob, result: unknown): void {
    const { store } = this.rt.options;
    this.rt.afterwards(
      Promise.resolve()
        .then(() => sendChildOutcome(store, held.job, completedPayload(held.job.id, result)))
        .then(() => wakeParentsIfDone(store, [held.job]))
        .catch((error: unknown) => this.rt.reportError(error, 'child result')),
    );
  }

  /** The history record of a job completed in its handler's transaction, made true. */
  private amendHistory(held: HeldJob, result: unknown, ranMs: number): void {
    const { store, history } = this.rt.options;
    if (!store.history || history.keep !== 'all') return;
    const resultJson = historyResultJson(result);
    this.rt.afterwards(
      store.history.amend(held.job.id, resultJson, ranMs).catch((error: unknown) => {
        this.rt.reportError(error, 'amend history');
      }),
    );
  }

  /** `ctx.log` of `held`'s run. */
  logOf(held: HeldJob): JobLog {
    return jobLog(this.rt, held);
  }

  /**
   * Gives a sleeping job back to waiting with its steps (`StoreWaits.sleep`, fenced by the
   * token); it stays held (its lease renewed) until the store answered.
   */
  private putToSleep(held: HeldJob, wait: NonNullable<HeldJob['wait']>): void {
    const { jobs, options } = this.rt;
    const waits = options.store.waits as NonNullable<typeof options.store.waits>;
    (wait.signal
      ? waits.waitSignal(held.ref, wait.signal.name, wait.signal.key, wait.stepsJson, wait.delayMs)
      : waits.sleep(held.ref, wait.stepsJson, wait.delayMs)
    )
      .then(
        (kept) => {
          if (!kept) this.rt.reportLeaseLost(held);
          else if (this.rt.listens('sleeping')) {
            this.rt.emit('sleeping', {
              job: held.job,
              name: wait.name,
              until: new Date(wait.until),
            });
          }
        },
        (error: unknown) => this.rt.reportError(error, 'sleep'),
      )
      .finally(() => {
        jobs.settled(held);
        jobs.changed();
      });
  }

  /** Puts a rate-limited job back waiting; it stays held (its lease renewed) until then. */
  private deferRateLimited(held: HeldJob, delayMs: number): void {
    const { jobs } = this.rt;
    this.rt.rateLimits
      .defer(held.ref, delayMs)
      .then(
        (kept) => {
          if (!kept) this.rt.reportLeaseLost(held);
        },
        (error: unknown) => this.rt.reportError(error, 'defer'),
      )
      .finally(() => {
        jobs.settled(held);
        jobs.changed();
      });
  }

  private failureOf(held: HeldJob, error: unknown): PendingFailure {
    const { handlers, retryPolicy } = this.rt.options;
    const typePolicy = handlers.get(held.job.type)?.policy ?? retryPolicy;
    const unrecoverable = error instanceof UnrecoverableError;
    const decision = decideRetry(held.job, { unrecoverable }, typePolicy);
    return {
      held,
      willRetry: decision.willRetry,
      failure: {
        ...held.ref,
        error: toJobError(error),
        deadletter: !decision.willRetry,
        retryDelayMs: decision.delayMs,
      },
    };
  }
}

/**
 * A handler's `ctx`: one object per run. Its functions are made when first read, so a handler
 * that uses none costs one allocation, and each still works when destructured
 * (`async (job, { signal, progress }) => …`).
 */
class RunContext implements JobContext {
  readonly attempt: number;
  readonly occurrence: Date | null;
  readonly shard: { index: number; count: number } | null;
  flow: FlowContext | null = null;
  private made: Partial<
    Pick<
      JobContext,
      'transaction' | 'progress' | 'rateLimited' | 'log' | 'step' | 'sleep' | 'waitFor' | 'run'
    >
  > | null = null;

  constructor(
    private readonly dispatcher: Dispatcher,
    private readonly held: HeldJob,
    private readonly abort: JobAbort,
  ) {
    const { job } = held;
    this.attempt = job.attempts;
    this.occurrence = job.occurrence;
    this.shard = job.shard;
  }

  get log(): JobLog {
    this.made ??= {};
    this.made.log ??= this.dispatcher.logOf(this.held);
    return this.made.log;
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get transaction(): JobContext['transaction'] {
    this.made ??= {};
    this.made.transaction ??= (work) => this.dispatcher.completeInTransaction(this.held, work);
    return this.made.transaction;
  }

  get step(): JobContext['step'] {
    this.made ??= {};
    this.made.step ??= ((name: string, fn: (tx?: unknown) => unknown, options?: StepOptions) =>
      this.dispatcher.stepOf(this.held, this.abort, name, fn, options)) as JobContext['step'];
    return this.made.step;
  }

  get sleep(): JobContext['sleep'] {
    this.made ??= {};
    this.made.sleep ??= (name, duration) =>
      this.dispatcher.sleepOf(this.held, this.abort, name, duration);
    return this.made.sleep;
  }

  get waitFor(): JobContext['waitFor'] {
    this.made ??= {};
    this.made.waitFor ??= ((name: string, options: WaitForOptions) =>
      this.dispatcher.waitForOf(this.held, this.abort, name, options)) as JobContext['waitFor'];
    return this.made.waitFor;
  }

  get run(): JobContext['run'] {
    this.made ??= {};
    this.made.run ??= ((name: string, type: string, payload?: unknown, options?: ChildRunOptions) =>
      this.dispatcher.runOf(
        this.held,
        this.abort,
        name,
        type,
        payload,
        options,
      )) as JobContext['run'];
    return this.made.run;
  }

  get progress(): JobContext['progress'] {
    this.made ??= {};
    this.made.progress ??= (value) => this.dispatcher.progressOf(this.held, value);
    return this.made.progress;
  }

  get rateLimited(): JobContext['rateLimited'] {
    this.made ??= {};
    this.made.rateLimited ??= (delayMs) => this.dispatcher.rateLimitedOf(this.held, delayMs);
    return this.made.rateLimited;
  }
}

// ─── start marks ─────────────────────────────────────────────────────────────────────────────────
/*
 * Start marks (DESIGN invariant 4, seed 000's "acquired" vs "executing"): on a store with
 * `capabilities.startMarks`, a prefetched job's start is recorded in the store before its
 * handler starts, so a crash charges an attempt only to jobs whose handler started — a
 * `retries: 0` job is never dead-lettered without having run — while a job that kills its
 * worker every time is still charged each time and reaches the dead-letter area.
 *
 * - The acquisition records the jobs that start at once (`AcquireRequest.start`).
 * - A buffered job taking a free slot is `starting`: its start rides on one renewal per tick
 *   (`LeaseRenewalRef.start`, which also renews its lease), and its handler starts when the
 *   store answered, if its local deadline is still ahead.
 * - Ahead: when handlers finish faster than a round trip, waiting for a renewal would leave
 *   slots idle, so the jobs expected to start within one round trip are recorded ahead — only
 *   those with retries left. A crash may charge those an attempt without running them: at most
 *   what would have started within one round trip, never a job's last chance.
 */

/** Backoff before asking again after a failed start renewal. */
const RETRY_MS = 100;

/** Shortest wait before a start recorded ahead of time is taken back. */
const MIN_AHEAD_WINDOW_MS = 20;

export class StartMarks {
  private pending: HeldJob[] = [];
  private scheduled = false;
  private readonly inFlight = new Set<Promise<void>>();
  private aheadTimer: NodeJS.Timeout | null = null;
  /** A renewal taking back starts recorded ahead; start renewals wait for it (ordering). */
  private takingBack: Promise<void> | null = null;

  /**
   * @param start starts a job whose start the store recorded (`Dispatcher.execute`).
   * @param retry asks dispatch to fill slots again (after a failed renewal gave jobs back).
   */
  constructor(
    private readonly rt: EngineRuntime,
    private readonly settlement: Settler,
    private readonly start: (held: HeldJob) => void,
    private readonly retry: () => void,
  ) {}

  /** The store records when handlers start: prefetched jobs wait for a start mark. */
  get enabled(): boolean {
    return this.rt.options.store.capabilities.startMarks === true;
  }

  /**
   * How many jobs beyond the free slots to record as started ahead: those expected to start
   * within one round trip at the handlers' average run time (none until both are known).
   */
  aheadCount(): number {
    const { runMs, roundTripMs } = this.rt.jobs;
    if (runMs === null || roundTripMs === null) return 0;
    const { concurrency } = this.rt.options;
    if (runMs <= 0) return Number.MAX_SAFE_INTEGER;
    return Math.floor((concurrency * roundTripMs) / runMs);
  }

  /** How long a start recorded ahead may wait for a slot before it is taken back. */
  private aheadWindowMs(): number {
    return Math.max(MIN_AHEAD_WINDOW_MS, 4 * (this.rt.jobs.roundTripMs ?? MIN_AHEAD_WINDOW_MS));
  }

  /**
   * Watches buffered jobs whose start the store records although they wait for a slot (marked
   * ahead, or acquired to start while the slots filled up): those still waiting after the
   * window are taken back (`LeaseRenewalRef.start` false), so a crash does not charge them —
   * the pace of the handlers changed, and they will not start within a round trip after all.
   */
  watchAhead(): void {
    if (!this.enabled || this.aheadTimer) return;
    this.aheadTimer = setTimeout(() => {
      this.aheadTimer = null;
      this.takeBackStale();
    }, this.aheadWindowMs());
    this.aheadTimer.unref();
  }

  private takeBackStale(): void {
    const { rt } = this;
    const now = monotonicNow();
    const window = this.aheadWindowMs();
    const stale: HeldJob[] = [];
    let waiting = false;
    for (const held of rt.jobs.bufferedJobs()) {
      if (!held.startMarked || held.markedAheadAt === null) continue;
      if (now - held.markedAheadAt >= window) stale.push(held);
      else waiting = true;
    }
    if (waiting) this.watchAhead();
    if (stale.length === 0) return;
    for (const held of stale) {
      held.startMarked = false;
      held.markedAheadAt = null;
    }
    const refs = stale.map((held) => renewalRef(rt, held, false));
    const sentAt = monotonicNow();
    const run = renew(rt, stale, refs).then(
      (answers) => {
        answers.forEach((answer, i) => {
          const held = stale[i] as HeldJob;
          if (answer === 'lost') {
            if (rt.jobs.lose(held)) rt.reportLeaseLost(held);
          } else if (held.phase !== 'lost' && held.phase !== 'done') {
            rt.jobs.confirmed(held, sentAt);
          }
        });
      },
      (error: unknown) => rt.reportError(error, 'start'),
    );
    const taking: Promise<void> = run.finally(() => {
      if (this.takingBack === taking) this.takingBack = null;
    });
    this.takingBack = taking;
  }

  /** `held` is `starting`: its start is recorded with the next renewal, then it starts. */
  request(held: HeldJob): void {
    this.pending.push(held);
    if (this.scheduled) return;
    this.scheduled = true;
    // On the next tick: the slots freed by one burst of finished handlers share one renewal.
    setImmediate(() => {
      this.scheduled = false;
      const run = this.send();
      this.inFlight.add(run);
      void run.finally(() => this.inFlight.delete(run));
    });
  }

  /** Waits for the start renewals in flight (`stop()`). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0 || this.scheduled) {
      await Promise.all(this.inFlight);
      if (this.scheduled) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Buffered jobs to record ahead: the next unrecorded ones with retries left. */
  private aheadCandidates(): HeldJob[] {
    let want = this.aheadCount();
    if (want <= 0) return [];
    const picked: HeldJob[] = [];
    for (const held of this.rt.jobs.bufferedJobs()) {
      if (want <= 0) break;
      want -= 1;
      if (!held.startMarked && held.job.retriesLeft > 0) picked.push(held);
    }
    return picked;
  }

  private async send(): Promise<void> {
    const { rt } = this;
    // A start taken back must land before the same job's start is recorded again.
    if (this.takingBack) await this.takingBack;
    const starting = this.pending.splice(0).filter((held) => held.phase === 'starting');
    if (starting.length === 0) return;
    const ahead = this.aheadCandidates();
    const holding = [...starting, ...ahead];
    const refs: LeaseRenewalRef[] = holding.map((held) => renewalRef(rt, held, true));
    const sentAt = monotonicNow();
    let answers: Awaited<ReturnType<typeof renew>>;
    try {
      answers = await renew(rt, holding, refs);
      rt.jobs.noteRoundTrip(monotonicNow() - sentAt);
      rt.reportSuccess('start');
    } catch (error) {
      rt.reportError(error, 'start');
      // Back to the buffer: the next try checks each one's deadline again.
      for (const held of starting) rt.jobs.unstart(held);
      setTimeout(this.retry, RETRY_MS).unref();
      return;
    }
    let queued = false;
    answers.forEach((answer, i) => {
      const held = holding[i] as HeldJob;
      const wasStarting = i < starting.length;
      if (wasStarting ? held.phase !== 'starting' : held.phase !== 'buffered') return;
      if (answer === 'lost') {
        if (rt.jobs.lose(held)) rt.reportLeaseLost(held);
        return;
      }
      rt.jobs.confirmed(held, sentAt);
      held.startMarked = true;
      if (!wasStarting) held.markedAheadAt = sentAt;
      if (answer === 'cancel-requested' || held.cancelRequested) {
        held.cancelRequested = false;
        if (wasStarting) rt.jobs.unstart(held);
        cancelRequested(rt, this.settlement, held);
        return;
      }
      if (!wasStarting) return;
      if (!rt.running) {
        // stop() began while the renewal was in flight: give it back unstarted.
        rt.jobs.toSettling(held);
        this.settlement.queueRelease([held]);
        queued = true;
        return;
      }
      this.start(held);
    });
    if (queued) this.settlement.settleSoon();
    if (ahead.length > 0) this.watchAhead();
  }
}

// ─── cancellation and progress ───────────────────────────────────────────────────────────────────
/*
 * Cancellation and progress on the engine's side (invariant 20). An operator's cancel reaches a
 * running job through its owner's next lease renewal (`lease-renewal.ts`), on every store: a
 * job not started yet is cancelled at once, a running one's `ctx.signal` aborts with a
 * `CancelledError` and it ends `cancelled` when its handler returns (`dispatch.ts`), never
 * retried. Progress (`ctx.progress`) is kept here and written by the next renewal.
 */

/**
 * A renewal (or an acquisition) said an operator cancelled `held`: a job not started leaves
 * the buffer and is cancelled at once; a running one is aborted with a `CancelledError` and
 * cancelled when its handler returns; one whose handler returned is left to its settle call
 * (`complete` and `fail` refuse it, and the refusal leads here again through settlement).
 */
export function cancelRequested(rt: EngineRuntime, settlement: Settler, held: HeldJob): void {
  if (held.cancelRequested) return;
  if (held.phase !== 'buffered' && held.phase !== 'starting' && held.phase !== 'running') return;
  held.cancelRequested = true;
  if (held.phase === 'buffered') {
    rt.jobs.toSettling(held);
    settlement.queueCancel(held);
    settlement.settleSoon();
    return;
  }
  // A starting job is cancelled when its start mark answers (`dispatch.ts`).
  held.controller?.abort(new CancelledError(held.job.id));
}

/**
 * `ctx.progress(value)`: checks the value (JSON, at most `MAX_PROGRESS_BYTES`) and keeps it as
 * the job's latest progress, for the next renewal to write; emits `progress`.
 */
export function reportProgress(rt: EngineRuntime, held: HeldJob, value: unknown): void {
  const checked = checkPayload(value, MAX_PROGRESS_BYTES, 'progress');
  held.progressJson = JSON.stringify(checked);
  held.progressDirty = true;
  held.job.progress = checked;
  rt.emit('progress', { job: held.job, progress: checked });
}

// ─── batch handlers ──────────────────────────────────────────────────────────────────────────────
/*
 * Batch handlers (`BatchHandlerDefinition`): gathers the started jobs of a batch type into one
 * handler call of up to `batch.size` jobs, made when the batch is full, when no slot is left for
 * another job to join, or `batch.waitMs` after its first job joined — and hands each job's
 * outcome back to dispatch, which settles it exactly as a single run's.
 *
 * A job joins a batch only once `HeldJobs.begin` moved it to `running` (its local lease
 * deadline was still ahead), so it holds its slot and its lease is renewed while it waits. At
 * the call, jobs that lost their lease or were cancelled meanwhile are left out and settled
 * as such; the rest are started (time limit, `started` event) and called together.
 */

/** What dispatch does for the jobs of a batch: the same as for a single run. */
export interface BatchRuns {
  /** `held`'s run starts now (its time limit, the `started` event). */
  startRun(held: HeldJob): void;
  /** `held`'s run ended with `error` (null: it succeeded with `result`); settles it. */
  finish(held: HeldJob, error: unknown, result?: unknown): void;
}

/** One job's outcome of a call: `error` null when it succeeded with `result`. */
interface Settled {
  error: unknown;
  result?: unknown;
}

/** A batch being filled: its jobs in the order they joined, and the timer that calls it. */
interface OpenBatch {
  batch: ResolvedBatch;
  members: HeldJob[];
  timer: NodeJS.Timeout | null;
}

export class Batches {
  /** The batch being filled, per job type (at most one each; a full one is called at once). */
  private readonly open = new Map<string, OpenBatch>();
  private callingSoon = false;

  /**
   * @param starved whether every slot holds a running job (checked again before the call).
   */
  constructor(
    private readonly rt: EngineRuntime,
    private readonly runs: BatchRuns,
    private readonly starved: () => boolean,
  ) {}

  /** Batches being filled (jobs joined, handler not called yet). */
  get openCount(): number {
    return this.open.size;
  }

  /** `held` (running: its handler not called) joins the open batch of its type. */
  join(held: HeldJob, batch: ResolvedBatch): void {
    const { type } = held.job;
    let open = this.open.get(type);
    if (!open) {
      open = { batch, members: [], timer: null };
      this.open.set(type, open);
    }
    open.members.push(held);
    if (open.members.length >= batch.size) {
      this.call(type);
    } else if (open.timer === null) {
      open.timer = setTimeout(() => this.call(type), batch.waitMs);
    }
  }

  /** Calls every open batch now. */
  callAll(): void {
    for (const type of [...this.open.keys()]) this.call(type);
  }

  /**
   * Calls every open batch once the current burst of settles and starts is done (a microtask):
   * no slot is free, so no other job can join them. Jobs that join in the same burst (slots
   * freed by one batch's settles) still make one call.
   */
  callAllSoon(): void {
    if (this.callingSoon) return;
    this.callingSoon = true;
    queueMicrotask(() => {
      this.callingSoon = false;
      if (this.starved()) this.callAll();
    });
  }

  /** Calls the open batch of `type` with its jobs still running and not cancelled. */
  private call(type: string): void {
    const open = this.open.get(type);
    if (!open) return;
    this.open.delete(type);
    if (open.timer) clearTimeout(open.timer);
    const { jobs } = this.rt;
    const live: HeldJob[] = [];
    for (const held of open.members) {
      // Its deadline passed while it waited: lost (reported), never called.
      jobs.checkDeadline(held);
      if (held.phase !== 'running') {
        this.runs.finish(held, new LockLostError(held.job.id));
      } else if (held.cancelRequested) {
        this.runs.finish(held, new CancelledError(held.job.id));
      } else {
        live.push(held);
      }
    }
    if (live.length === 0) return;
    for (const held of live) this.runs.startRun(held);
    if (this.rt.hooks.run.length === 0) {
      void this.outcomes(open.batch, live).then((settled) => {
        live.forEach((held, i) => {
          const { error, result } = settled[i] as Settled;
          this.runs.finish(held, error, result);
        });
      });
    } else {
      this.callThroughHooks(open.batch, live);
    }
  }

  /**
   * Each job's run hooks wrap its share of the one call, as they wrap a single run: the handler
   * is called once every job's hooks called `next()` (or returned without calling it: that job
   * is left out and settles with what its hooks gave).
   */
  private callThroughHooks(batch: ResolvedBatch, live: HeldJob[]): void {
    const shares = new Map<HeldJob, (settled: Settled) => void>();
    let waiting = live.length;
    const ready = () => {
      waiting -= 1;
      if (waiting > 0) return;
      const inside = live.filter((held) => shares.has(held));
      if (inside.length === 0) return;
      void this.outcomes(batch, inside).then((settled) => {
        inside.forEach((held, i) => {
          shares.get(held)?.(settled[i] as Settled);
        });
      });
    };
    for (const held of live) {
      let counted = false;
      const share = () =>
        new Promise<unknown>((resolve, reject) => {
          shares.set(held, ({ error, result }) =>
            error === null ? resolve(result) : reject(error),
          );
          counted = true;
          ready();
        });
      const done = () => {
        if (!counted) {
          counted = true;
          ready();
        }
      };
      callThrough(this.rt.hooks.run, [held.job], share).then(
        (result) => {
          done();
          this.runs.finish(held, null, result);
        },
        (error: unknown) => {
          done();
          this.runs.finish(held, error ?? new Error('a run hook threw a falsy value'));
        },
      );
    }
  }

  /**
   * Calls the handler once with `members` and reads its answer: one outcome per job, in order.
   * A thrown error, or an answer of the wrong shape, is every job's error.
   */
  private async outcomes(batch: ResolvedBatch, members: HeldJob[]): Promise<Settled[]> {
    const ctx = new BatchRunContext(members, this.rt.options.logger);
    let answer: unknown;
    try {
      // On a later microtask, never inside the caller's loop.
      answer = await Promise.resolve().then(() =>
        batch.handler(
          members.map((held) => held.job),
          ctx,
        ),
      );
    } catch (error) {
      const thrown = error ?? new Error('batch handler threw a falsy value');
      return members.map(() => ({ error: thrown }));
    }
    if (!Array.isArray(answer) || answer.length !== members.length) {
      const type = members[0]?.job.type ?? '';
      const got = Array.isArray(answer) ? `${answer.length} outcomes` : describeAnswer(answer);
      const error = new JobsError(
        'VALIDATION',
        `[@jobs/core] handlers.${type}: a batch handler must return an array of one outcome per job, in order; it returned ${got} for ${members.length} jobs`,
      );
      return members.map(() => ({ error }));
    }
    return answer.map((outcome: unknown) =>
      outcome instanceof Error ? { error: outcome } : { error: null, result: outcome },
    );
  }
}

function describeAnswer(value: unknown): string {
  if (value === null) return 'null';
  return typeof value === 'object' ? 'an object that is not an array' : typeof value;
}

/** A batch handler's `ctx`: one per call; per-job signals are the jobs' own. */
class BatchRunContext implements BatchContext {
  private readonly byId = new Map<string, HeldJob>();
  private whole: AbortController | null = null;

  constructor(
    private readonly members: readonly HeldJob[],
    readonly log: Logger,
  ) {
    for (const held of members) this.byId.set(held.job.id, held);
  }

  signalOf(job: Job): AbortSignal {
    const held = job && typeof job === 'object' ? this.byId.get(job.id) : undefined;
    if (!held) {
      throw new ValidationError('ctx.signalOf(job)', 'the job is not in this batch');
    }
    return (held.controller as JobAbort).signal;
  }

  get signal(): AbortSignal {
    if (!this.whole) {
      const whole = new AbortController();
      this.whole = whole;
      const signals = this.members.map((held) => (held.controller as JobAbort).signal);
      const check = () => {
        if (!whole.signal.aborted && signals.every((signal) => signal.aborted)) {
          whole.abort(signals[signals.length - 1]?.reason);
        }
      };
      for (const signal of signals) signal.addEventListener('abort', check, { once: true });
      check();
    }
    return this.whole.signal;
  }
}
