/**
 * Dispatch: starts buffered jobs while slots are free, runs each handler with its context
 * (`ctx.signal`, attempt, occurrence, shard, logger) — or, for a batch handler, hands the job
 * to its batch (`batches.ts`) — and hands the outcome to settlement: a completion, a failure
 * with its retry decision (`retry.ts`), or a release after `stop()`.
 */

import { monotonicNow } from '../clock.js';
import {
  CancelledError,
  JobsError,
  JobTimeoutError,
  LockLostError,
  toJobError,
  UnrecoverableError,
} from '../errors.js';
import { historyResultJson } from '../history.js';
import { decideRetry } from '../rules/failure.js';
import { canCancel, type Job, type JobCompletion } from '../store.js';
import { Batches } from './batches.js';
import { cancelRequested, reportProgress } from './cancellation.js';
import {
  completedPayload,
  parentOf,
  RESULT_PENDING_JSON,
  sendChildOutcome,
  wakeParentsIfDone,
} from './child-outcomes.js';
import { type ChildRunOptions, runChild } from './children.js';
import { FLOW_META, flowContextOf } from './flow-model.js';
import type { HeldJob, JobAbort } from './held-jobs.js';
import { callThrough } from './hooks.js';
import { jobLog } from './job-log.js';
import type { ResolvedHandler } from './options.js';
import { copyRef } from './renewals.js';
import type { EngineRuntime } from './runtime.js';
import { firedFromTimer } from './schedule-firing.js';
import type { PendingFailure } from './settle-outcomes.js';
import type { Settler } from './settlement.js';
import { StartMarks } from './start-marks.js';
import { refuseNestedTransaction, runStep, type StepOptions } from './steps.js';
import type { FlowContext, JobContext, JobLog, Logger } from './types.js';
import { runSleep, runWaitFor, type WaitForOptions } from './waits.js';

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
   * A child job succeeded: its result is stored for its parent first (`child-outcomes.ts`),
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
