/**
 * Dispatch: starts buffered jobs while slots are free, runs each handler with its context
 * (`ctx.signal`, attempt, occurrence, shard, logger), and hands the outcome to settlement —
 * a completion, a failure with its retry decision (`retry.ts`), or a release after `stop()`.
 */
import { CancelledError, JobsError, LockLostError } from '../errors.js';
import { historyResultJson } from '../history.js';
import { decideRetry } from '../retry.js';
import type { Job, JobCompletion } from '../store.js';
import { canCancel, reportProgress } from './cancellation.js';
import type { EngineContext } from './context.js';
import { type HeldJob, JobAbort } from './held-jobs.js';
import { callThrough } from './hooks.js';
import type { ResolvedHandler } from './options.js';
import type { PendingFailure, Settlement } from './settlement.js';
import { firedFromTimer } from './timer-firing.js';
import type { JobContext, Logger } from './types.js';

export class Dispatcher {
  constructor(
    private readonly ctx: EngineContext,
    private readonly settlement: Settlement,
  ) {}

  /** The engine's logger (`ctx.log`). */
  get logger(): Logger {
    return this.ctx.options.logger;
  }

  /**
   * Holds freshly acquired jobs and starts as many as there are free slots. `sentAt` is when
   * the acquiring call was sent (monotonic ms): their leases count from then.
   */
  take(jobs: Job[], sentAt: number): void {
    this.ctx.jobs.add(jobs, sentAt);
    this.ctx.emit('acquired', { jobs });
    if (jobs.some((job) => job.cancelRequested) && canCancel(this.ctx.options.store)) {
      // Cancelled while running elsewhere, then released or recovered: never started again.
      const { buffer } = this.ctx.jobs;
      for (const held of buffer.filter((h) => h.job.cancelRequested)) {
        buffer.splice(buffer.indexOf(held), 1);
        held.cancelRequested = true;
        this.settlement.queueCancel(held);
      }
      this.settlement.settleSoon();
    }
    if (!this.ctx.running) {
      // Acquired by a call that answered after stop() began: give them back at once.
      this.settlement.queueRelease(this.ctx.jobs.buffer.splice(0));
      this.settlement.settleSoon();
      return;
    }
    this.dispatch();
  }

  private dispatch(): void {
    const { jobs } = this.ctx;
    while (
      this.ctx.running &&
      jobs.executing < this.ctx.options.concurrency &&
      jobs.buffer.length > 0
    ) {
      this.execute(jobs.buffer.shift() as HeldJob);
    }
  }

  private execute(held: HeldJob): void {
    const { job } = held;
    const resolved = this.ctx.options.handlers.get(job.type) as ResolvedHandler;
    this.ctx.jobs.executing += 1;
    const abort = new JobAbort();
    held.controller = abort;
    held.startedAt = Date.now();
    if (firedFromTimer(job) && this.ctx.listens('timer-fired')) {
      this.ctx.emit('timer-fired', { job });
    }
    if (this.ctx.listens('started')) this.ctx.emit('started', { job });
    const ctx = new RunContext(this, held, abort);
    // On a later microtask, never inside dispatch's loop.
    const run = () => Promise.resolve().then(() => resolved.handler(job, ctx));
    const hooks = this.ctx.hooks.run;
    (hooks.length === 0 ? run() : callThrough(hooks, [job], run)).then(
      (result: unknown) => this.finish(held, null, result),
      (error: unknown) => this.finish(held, error ?? new Error('handler threw a falsy value')),
    );
  }

  /** `ctx.progress(value)` of `held`'s run. */
  progressOf(held: HeldJob, value: unknown): void {
    reportProgress(this.ctx, held, value);
  }

  /** `ctx.rateLimited(ms)` of `held`'s run. */
  rateLimitedOf(held: HeldJob, delayMs: number): Promise<void> {
    return this.ctx.rateLimits.pushBack(held.job, delayMs);
  }

  /** `ctx.transaction`: the handler's writes and the job's completion commit together. */
  async completeInTransaction<T, Tx>(held: HeldJob, work: (tx: Tx) => T | Promise<T>): Promise<T> {
    const { store } = this.ctx.options;
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
    if (held.lost) throw new LockLostError(held.job.id);
    if (held.cancelRequested) throw new CancelledError(held.job.id);
    // The handler has not returned yet: the record has its duration so far and no result.
    const completion = { ...held.ref, durationMs: Date.now() - held.startedAt };
    let result: T;
    try {
      result = await store.completeInTransaction(completion, async (tx) => work(tx as Tx));
    } catch (error) {
      throw await this.cancelledInstead(held, error);
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
    const { store } = this.ctx.options;
    if (!(error instanceof LockLostError) || !canCancel(store)) return error;
    const job = await store.getJob(held.job.id).catch(() => null);
    if (!job?.cancelRequested || job.lockToken !== held.ref.token) return error;
    held.cancelRequested = true;
    return new CancelledError(held.job.id);
  }

  private finish(held: HeldJob, error: unknown, result?: unknown): void {
    const { jobs } = this.ctx;
    jobs.executing -= 1;
    held.finished = true;
    const ranMs = Date.now() - held.startedAt;
    jobs.noteRun(ranMs);
    const pushBackMs = this.ctx.rateLimits.takePushBack(held.job.id);
    if (held.completedInTransaction) {
      // Completed in the handler's own transaction: nothing left to write.
      jobs.forget(held);
      if (error !== null) {
        this.ctx.options.logger.warn(
          `job ${held.job.id} threw after ctx.transaction completed it; it stays completed`,
          { error },
        );
      }
      this.ctx.emit('completed', { job: held.job, durationMs: ranMs });
    } else if (held.lost) {
      // Lease lost while running: someone else may own the job now; nothing of ours is written.
      jobs.forget(held);
    } else if (held.cancelRequested) {
      // An operator cancelled it: it ends cancelled whatever the handler did, never retried.
      held.completion = { ...held.ref, durationMs: ranMs };
      this.settlement.queueCancel(held);
    } else if (pushBackMs !== null) {
      // `ctx.rateLimited(ms)`: back to waiting for ms, whatever the handler returned.
      this.deferRateLimited(held, pushBackMs);
    } else if (error === null) {
      // Also after stop() aborted it: a handler that succeeded in the grace is done.
      const completion: JobCompletion = { ...held.ref, durationMs: ranMs };
      // Serialised only when history keeps it: `keep: 'none'` costs nothing here.
      if (this.ctx.options.history.keep === 'all') {
        completion.resultJson = historyResultJson(result);
      }
      held.completion = completion;
      this.settlement.queueCompletion(held);
    } else if (held.shutdownAborted) {
      // Failed because stop() aborted it: not a failed attempt; another engine runs it.
      this.settlement.queueRelease([held]);
    } else {
      this.settlement.queueFailure(this.failureOf(held, error));
    }
    this.settlement.settleSoon();
    this.dispatch();
    if (jobs.room() >= jobs.refillBatch()) this.ctx.wakeup.wake();
    jobs.changed();
  }

  /** Puts a rate-limited job back waiting; it stays held (its lease renewed) until then. */
  private deferRateLimited(held: HeldJob, delayMs: number): void {
    const { jobs } = this.ctx;
    this.ctx.rateLimits
      .defer(held.ref, delayMs)
      .then(
        (kept) => {
          if (!kept) this.ctx.reportLeaseLost(held);
        },
        (error: unknown) => this.ctx.reportError(error, 'defer'),
      )
      .finally(() => {
        jobs.forget(held);
        jobs.changed();
      });
  }

  private failureOf(held: HeldJob, error: unknown): PendingFailure {
    const { handlers, retryPolicy } = this.ctx.options;
    const typePolicy = handlers.get(held.job.type)?.policy ?? retryPolicy;
    const decision = decideRetry(held.job, error, typePolicy);
    return {
      held,
      willRetry: decision.willRetry,
      failure: {
        ...held.ref,
        error: decision.error,
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
  readonly log: Logger;
  private made: Partial<Pick<JobContext, 'transaction' | 'progress' | 'rateLimited'>> | null = null;

  constructor(
    private readonly dispatcher: Dispatcher,
    private readonly held: HeldJob,
    private readonly abort: JobAbort,
  ) {
    const { job } = held;
    this.attempt = job.attempts;
    this.occurrence = job.occurrence;
    this.shard = job.shard;
    this.log = dispatcher.logger;
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get transaction(): JobContext['transaction'] {
    this.made ??= {};
    this.made.transaction ??= (work) => this.dispatcher.completeInTransaction(this.held, work);
    return this.made.transaction;
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
