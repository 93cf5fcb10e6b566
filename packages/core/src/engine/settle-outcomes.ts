/**
 * What a settle call's answer means for each job: the events (completed, failed, retried,
 * deadlettered, released, cancelled), a lease reported lost, and *uncertain settles* — a call
 * that failed may have taken effect before it failed, so a retry that finds the lease gone reads
 * the job (and its history) to tell "our earlier call did it" from "another owner ran it again".
 */
import type { HistoryOutcome, Job, SettleResult } from '../store.js';
import { canCancel } from './cancellation.js';
import type { EngineContext } from './context.js';
import type { HeldJob } from './held-jobs.js';
import type { PendingFailure } from './settlement.js';

export class SettleOutcomes {
  private readonly settleChecks = new Set<Promise<void>>();

  /**
   * @param scheduledJobsEnded called when jobs created by a schedule ended: a coalesced schedule
   *   fire waits for its previous occurrence to end, so the schedules must be looked at again.
   * @param cancelNow writes a job found cancel-requested after an uncertain settle as cancelled.
   */
  constructor(
    private readonly ctx: EngineContext,
    private readonly scheduledJobsEnded: () => void,
    private readonly cancelNow: (held: HeldJob) => Promise<void>,
  ) {}

  afterCancel(cancels: HeldJob[], result: SettleResult): void {
    this.afterScheduledJobsEnded(cancels);
    const lost = new Set(result.lost);
    for (const held of cancels) {
      this.ctx.jobs.forget(held);
      const cancelled = () =>
        this.ctx.emit('cancelled', {
          job: held.job,
          durationMs: held.startedAt > 0 ? Date.now() - held.startedAt : null,
        });
      if (!lost.has(held.job.id)) cancelled();
      else if (held.settleUncertain) {
        this.reportUncertain(held, (job) => this.endedByThisRun(held, job, 'cancelled'), cancelled);
      } else this.ctx.reportLeaseLost(held);
    }
  }

  /** A coalesced schedule fire waits for its previous occurrence to end: look again now. */
  private afterScheduledJobsEnded(ended: readonly HeldJob[]): void {
    if (ended.some((h) => h.job.schedule !== null)) this.scheduledJobsEnded();
  }

  afterComplete(done: HeldJob[], result: SettleResult): void {
    this.afterScheduledJobsEnded(done);
    const lost = result.lost.length > 0 ? new Set(result.lost) : null;
    const now = Date.now();
    const listened = this.ctx.listens('completed');
    for (const held of done) {
      this.ctx.jobs.forget(held);
      if (!lost?.has(held.job.id)) {
        if (listened) {
          this.ctx.emit('completed', { job: held.job, durationMs: now - held.startedAt });
        }
        continue;
      }
      const completed = () =>
        this.ctx.emit('completed', { job: held.job, durationMs: now - held.startedAt });
      if (held.settleUncertain) {
        // An earlier call may have deleted it: then the job is gone, and it was ours — unless
        // another owner ran it again after the lease ran out and completed it (history tells).
        this.reportUncertain(held, (job) => this.endedByThisRun(held, job, 'completed'), completed);
      } else if (this.mayBeCancelled()) {
        this.reportUncertain(held, () => false, completed);
      } else this.ctx.reportLeaseLost(held);
    }
  }

  afterFail(fails: PendingFailure[], result: SettleResult): void {
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
      } else if (this.mayBeCancelled()) {
        this.reportUncertain(held, () => false, failed);
      } else this.ctx.reportLeaseLost(held);
    }
    // A retry is a new timer: let the loop see its due time.
    if (fails.some((f) => f.willRetry)) this.ctx.wakeup.wake();
  }

  afterRelease(releases: HeldJob[], result: SettleResult): void {
    const lost = new Set(result.lost);
    for (const held of releases) this.ctx.jobs.forget(held);
    const jobs = releases.filter((h) => !lost.has(h.job.id)).map((h) => h.job);
    if (jobs.length > 0) {
      this.ctx.emit('released', { jobs });
      this.ctx.wakeup.wake();
    }
  }

  /**
   * A completion or failure the store refused may have met a cancel request (`complete` and
   * `fail` leave cancelled jobs to their owner): worth a read before calling the lease lost.
   */
  private mayBeCancelled(): boolean {
    return canCancel(this.ctx.options.store);
  }

  /**
   * After a settle call that failed (maybe having taken effect) and a retry that found the lease
   * gone, or a refused settle on a store that can cancel: reads the job to tell "our earlier
   * call did it" (`report`), "an operator cancelled it" (still ours, flagged: cancelled now,
   * never retried) and a lease really lost. `stop()` waits for these reads (and the
   * cancellations they write). When the job cannot be read, only the error is reported.
   */
  private reportUncertain(
    held: HeldJob,
    ours: (job: Job | null) => boolean | Promise<boolean>,
    report: () => void,
  ): void {
    const check = (async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          const job = await this.ctx.options.store.getJob(held.job.id);
          if (job?.cancelRequested && job.lockToken === held.ref.token && this.mayBeCancelled()) {
            held.cancelRequested = true;
            held.settleUncertain = false;
            await this.cancelNow(held);
          } else if (await ours(job)) report();
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
   * After an uncertain settle found the job gone: did this run end it (`outcome`), or did
   * another owner run it again after the lease ran out and end it? The history record tells —
   * same attempt, this owner. Without a record (no history, or history not keeping this outcome)
   * it cannot be told apart, and the job counts as ended by this run.
   */
  private async endedByThisRun(
    held: HeldJob,
    job: Job | null,
    outcome: HistoryOutcome,
  ): Promise<boolean> {
    if (job !== null) return false;
    const record = await this.ctx.options.store.getHistory?.(held.job.id);
    if (!record) return true;
    return (
      record.outcome === outcome &&
      record.attempts === held.job.attempts &&
      record.lockOwner === this.ctx.options.owner
    );
  }

  /** Waits for the reads that decide how uncertain settles are reported. */
  async uncertainSettlesChecked(): Promise<void> {
    while (this.settleChecks.size > 0) await Promise.all(this.settleChecks);
  }
}
