/**
 * Settlement: writes the outcome of finished jobs (complete, fail, release) in batched store
 * calls, and reports each job's fate once the store answered.
 *
 * - Failures and releases are written on the next tick (`setImmediate` coalescing).
 * - When the store offers `completeAndAcquire`, completions wait up to `COMPLETION_HOLD_MS` for
 *   the acquisition loop's next call and ride on it (one round trip for both); after that they
 *   are written on their own.
 * - A failed call is retried with backoff, well inside the lease. Because it may have taken
 *   effect before it failed, a retry that finds the lease gone reads the job to tell "our earlier
 *   call did it" from a lease really lost (an *uncertain settle*).
 */
import type { Job, JobCompletion, JobFailure, SettleResult } from '../store.js';
import type { EngineContext } from './context.js';
import type { HeldJob } from './held-jobs.js';

/**
 * How long a completion may wait to ride on the next acquisition (`completeAndAcquire`). A busy
 * engine refills within a millisecond or two; a slow one writes its completions on their own.
 */
const COMPLETION_HOLD_MS = 10;
/** Longest wait before retrying a failed settle call (never more than a quarter lease). */
const MAX_SETTLE_RETRY_MS = 5_000;

export interface PendingFailure {
  held: HeldJob;
  failure: JobFailure;
  willRetry: boolean;
}

/** What completing `held` writes: its claim, plus its result and duration for history. */
export function completionOf(held: HeldJob): JobCompletion {
  return held.completion ?? held.ref;
}

export class Settlement {
  private pendingComplete: HeldJob[] = [];
  private pendingFail: PendingFailure[] = [];
  private pendingRelease: HeldJob[] = [];
  private flushScheduled = false;
  private flushing: Promise<void> | null = null;
  private flushFailures = 0;
  /** A batch of failures was refused: write them one by one until a round lands whole. */
  private splitFailures = false;
  private completionTimer: NodeJS.Timeout | null = null;
  private readonly settleChecks = new Set<Promise<void>>();

  /**
   * @param scheduledJobsEnded called when jobs created by a schedule ended: a coalesced schedule
   *   fire waits for its previous occurrence to end, so the schedules must be looked at again.
   */
  constructor(
    private readonly ctx: EngineContext,
    private readonly scheduledJobsEnded: () => void,
  ) {}

  /** Finished jobs whose completion, failure or release is being written. */
  get pendingCount(): number {
    return this.pendingComplete.length + this.pendingFail.length + this.pendingRelease.length;
  }

  hasPendingCompletions(): boolean {
    return this.pendingComplete.length > 0;
  }

  /** Whether a settle call for `held` is pending (its handler has finished). */
  isSettling(held: HeldJob): boolean {
    return (
      this.pendingComplete.includes(held) ||
      this.pendingRelease.includes(held) ||
      this.pendingFail.some((f) => f.held === held)
    );
  }

  queueCompletion(held: HeldJob): void {
    this.pendingComplete.push(held);
  }

  queueFailure(failure: PendingFailure): void {
    this.pendingFail.push(failure);
  }

  queueRelease(held: readonly HeldJob[]): void {
    this.pendingRelease.push(...held);
  }

  /** Takes every pending completion for one store call; the next one starts a new hold. */
  takePendingCompletions(): HeldJob[] {
    if (this.completionTimer) {
      clearTimeout(this.completionTimer);
      this.completionTimer = null;
    }
    return this.pendingComplete.splice(0);
  }

  /** Completions taken for a `completeAndAcquire` that failed: write them again, uncertain. */
  retryCompletions(done: HeldJob[]): void {
    for (const held of done) held.settleUncertain = true;
    this.pendingComplete.unshift(...done);
    this.scheduleFlush(true);
  }

  /**
   * Writes what is pending soon: failures and releases on the next tick; completions too, unless
   * they can ride on the loop's next acquisition (the store does both in one call).
   */
  settleSoon(): void {
    const folds = this.ctx.options.store.completeAndAcquire !== undefined && this.ctx.running;
    if (this.pendingFail.length + this.pendingRelease.length > 0 || !folds) {
      this.scheduleFlush(false);
    } else if (this.pendingComplete.length > 0) {
      this.holdCompletions();
    }
  }

  /**
   * Leaves completions for the acquisition loop (woken by dispatch once there is room for a
   * batch); whatever it has not taken after `COMPLETION_HOLD_MS` is written on its own.
   */
  private holdCompletions(): void {
    if (this.completionTimer) return;
    this.completionTimer = setTimeout(() => {
      this.completionTimer = null;
      if (this.pendingComplete.length > 0) this.scheduleFlush(false);
    }, COMPLETION_HOLD_MS);
  }

  scheduleFlush(afterFailure: boolean): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    const run = (): void => {
      this.flushScheduled = false;
      void this.flush();
    };
    if (afterFailure) {
      // Retry well inside the lease: a completion written after the lease ran out is lost work.
      const cap = Math.max(10, Math.min(MAX_SETTLE_RETRY_MS, this.ctx.options.leaseMs / 4));
      const delay = Math.min(cap, 50 * 2 ** Math.min(this.flushFailures, 7));
      setTimeout(run, delay);
    } else {
      setImmediate(run);
    }
  }

  private flush(): Promise<void> {
    if (this.flushing) {
      // A flush is in flight: what arrives meanwhile goes in the next batch.
      return this.flushing.then(() => this.flush());
    }
    this.flushing = this.flushOnce().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async flushOnce(): Promise<void> {
    const { store } = this.ctx.options;
    const completes = this.takePendingCompletions();
    const fails = this.pendingFail.splice(0);
    const releases = this.pendingRelease.splice(0);
    if (completes.length + fails.length + releases.length === 0) return;
    // After a batch of failures was refused, each is written on its own: one job's bad write
    // (a value the database cannot hold) never holds back the others (invariant 17).
    const splitFails = this.splitFailures && fails.length > 1;
    const results = await Promise.allSettled([
      completes.length > 0 ? store.complete(completes.map(completionOf)) : null,
      fails.length > 0 && !splitFails ? store.fail(fails.map((f) => f.failure)) : null,
      releases.length > 0 ? store.release(releases.map((h) => h.ref)) : null,
      splitFails ? this.failOneByOne(fails) : null,
    ]);
    const [completed, failed, released, split] = results;
    let anyFailed = false;
    if (completed?.status === 'fulfilled') {
      if (completed.value) {
        this.ctx.reportSuccess('complete');
        this.afterComplete(completes, completed.value);
      }
    } else {
      anyFailed = true;
      for (const held of completes) held.settleUncertain = true;
      this.pendingComplete.unshift(...completes);
      this.ctx.reportError(completed?.reason, 'complete');
    }
    if (split?.status === 'fulfilled' && split.value) {
      if (split.value.refused > 0) anyFailed = true;
      else this.splitFailures = false;
    } else if (failed?.status === 'fulfilled') {
      if (failed.value) {
        this.ctx.reportSuccess('fail');
        this.afterFail(fails, failed.value);
      }
    } else {
      anyFailed = true;
      for (const { held } of fails) held.settleUncertain = true;
      this.pendingFail.unshift(...fails);
      if (fails.length > 1) this.splitFailures = true;
      this.ctx.reportError(failed?.reason, 'fail');
    }
    if (released?.status === 'fulfilled') {
      if (released.value) {
        this.ctx.reportSuccess('release');
        this.afterRelease(releases, released.value);
      }
    } else {
      anyFailed = true;
      this.pendingRelease.unshift(...releases);
      this.ctx.reportError(released?.reason, 'release');
    }
    this.flushFailures = anyFailed ? this.flushFailures + 1 : 0;
    if (anyFailed) this.scheduleFlush(true);
    else this.settleSoon();
    this.ctx.jobs.changed();
  }

  /** Writes each failure in its own store call; the refused ones wait for the next flush. */
  private async failOneByOne(fails: PendingFailure[]): Promise<{ refused: number }> {
    const { store } = this.ctx.options;
    const results = await Promise.allSettled(fails.map((f) => store.fail([f.failure])));
    let refused = 0;
    results.forEach((result, i) => {
      const pending = fails[i] as PendingFailure;
      if (result.status === 'fulfilled') {
        this.afterFail([pending], result.value);
        return;
      }
      refused += 1;
      pending.held.settleUncertain = true;
      this.pendingFail.push(pending);
      this.ctx.reportError(result.reason, 'fail');
    });
    return { refused };
  }

  /** A coalesced schedule fire waits for its previous occurrence to end: look again now. */
  private afterScheduledJobsEnded(ended: readonly HeldJob[]): void {
    if (ended.some((h) => h.job.schedule !== null)) this.scheduledJobsEnded();
  }

  afterComplete(done: HeldJob[], result: SettleResult): void {
    this.afterScheduledJobsEnded(done);
    const lost = new Set(result.lost);
    const now = Date.now();
    for (const held of done) {
      this.ctx.jobs.forget(held);
      const completed = () =>
        this.ctx.emit('completed', { job: held.job, durationMs: now - held.startedAt });
      if (!lost.has(held.job.id)) completed();
      else if (held.settleUncertain) {
        // An earlier call may have deleted it: then the job is gone, and it was ours.
        this.reportUncertain(held, (job) => job === null, completed);
      } else this.ctx.reportLeaseLost(held);
    }
  }

  private afterFail(fails: PendingFailure[], result: SettleResult): void {
    this.afterScheduledJobsEnded(fails.map((f) => f.held));
    const lost = new Set(result.lost);
    for (const { held, failure, willRetry } of fails) {
      this.ctx.jobs.forget(held);
      const failed = () => {
        this.ctx.emit('failed', {
          job: held.job,
          error: failure.error,
          willRetry,
          retryDelayMs: failure.retryDelayMs,
        });
        if (willRetry) this.ctx.emit('retried', { job: held.job });
        else this.ctx.emit('deadlettered', { job: held.job, error: failure.error });
      };
      if (!lost.has(held.job.id)) failed();
      else if (held.settleUncertain) {
        // An earlier call may have recorded the failure: then the job carries our error (it may
        // have been retried, even run and finished, since). A lease that really ran out carries
        // the lease-expired error instead.
        this.reportUncertain(
          held,
          (job) => job === null || job.lastError?.message === failure.error.message,
          failed,
        );
      } else this.ctx.reportLeaseLost(held);
    }
    // A retry is a new timer: let the loop see its due time.
    if (fails.some((f) => f.willRetry)) this.ctx.wakeup.wake();
  }

  private afterRelease(releases: HeldJob[], result: SettleResult): void {
    const lost = new Set(result.lost);
    for (const held of releases) this.ctx.jobs.forget(held);
    const jobs = releases.filter((h) => !lost.has(h.job.id)).map((h) => h.job);
    if (jobs.length > 0) {
      this.ctx.emit('released', { jobs });
      this.ctx.wakeup.wake();
    }
  }

  /**
   * After a settle call that failed (maybe having taken effect) and a retry that found the lease
   * gone: reads the job to tell "our earlier call did it" (`report`) from a lease really lost.
   * `stop()` waits for these reads. When the job cannot be read, only the error is reported.
   */
  private reportUncertain(
    held: HeldJob,
    ours: (job: Job | null) => boolean,
    report: () => void,
  ): void {
    const check = (async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          const job = await this.ctx.options.store.getJob(held.job.id);
          if (ours(job)) report();
          else this.ctx.reportLeaseLost(held);
          return;
        } catch (error) {
          if (attempt >= 3) {
            this.ctx.reportError(error, `read job ${held.job.id} after an uncertain settle`);
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
        }
      }
    })();
    this.settleChecks.add(check);
    void check.finally(() => this.settleChecks.delete(check));
  }

  /**
   * Flushes until nothing is pending, retrying failed store calls until `deadline` (epoch ms;
   * default: one lease from now).
   */
  async flushUntilEmpty(deadline = Date.now() + this.ctx.options.leaseMs): Promise<void> {
    while (this.pendingCount > 0) {
      await this.flush();
      if (this.pendingCount === 0) break;
      if (Date.now() > deadline) {
        this.ctx.options.logger.warn(
          'could not write all finished jobs before stopping; their leases will expire',
          { pending: this.pendingCount },
        );
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (this.flushing) await this.flushing;
  }

  /** Waits for the reads that decide how uncertain settles are reported. */
  async uncertainSettlesChecked(): Promise<void> {
    while (this.settleChecks.size > 0) await Promise.all(this.settleChecks);
  }
}
