/**
 * What a settle call's answer means for each job: the events (completed, failed, retried,
 * deadlettered, released, cancelled), a lease reported lost, a settle refused for a cancel
 * request (`SettleResult.cancelRequested`: the job is cancelled now, no read needed), and
 * *uncertain settles* — a call that failed may have taken effect before it failed, so a retry
 * that finds the lease gone reads the job (and its history) to tell "our earlier call did it"
 * from "another owner ran it again".
 */
import {
  canCancel,
  type HistoryOutcome,
  type Job,
  type JobFailure,
  type SettleResult,
} from '../store.js';
import {
  cancelChildren,
  childCancelled,
  parentOf,
  pendingChildIds,
  wakeParentsIfDone,
} from './child-outcomes.js';
import type { HeldJob } from './held-jobs.js';
import type { EngineRuntime } from './runtime.js';

/** A failure to write: the held job, what the store is told, whether it will be retried. */
export interface PendingFailure {
  held: HeldJob;
  failure: JobFailure;
  willRetry: boolean;
}

export class SettleOutcomes {
  private readonly settleChecks = new Set<Promise<void>>();

  /**
   * @param scheduledJobsEnded called when jobs created by a schedule ended: a coalesced schedule
   *   fire waits for its previous occurrence to end, so the schedules must be looked at again.
   * @param cancelNow writes a job found cancel-requested after an uncertain settle as cancelled.
   */
  constructor(
    private readonly rt: EngineRuntime,
    private readonly scheduledJobsEnded: () => void,
    private readonly cancelNow: (held: HeldJob) => Promise<void>,
  ) {}

  afterCancel(cancels: HeldJob[], result: SettleResult): void {
    this.afterScheduledJobsEnded(cancels);
    const lost = new Set(result.lost);
    for (const held of cancels) {
      const cancelled = () =>
        this.rt.emit('cancelled', {
          job: held.job,
          durationMs: held.startedAt > 0 ? Date.now() - held.startedAt : null,
        });
      if (held.settleUncertain && lost.has(held.job.id)) {
        this.reportUncertain(held, (job) => this.endedByThisRun(held, job, 'cancelled'), cancelled);
        continue;
      }
      this.rt.jobs.settled(held);
      if (!lost.has(held.job.id)) {
        cancelled();
        this.workflowCancelled(held);
      } else this.rt.reportLeaseLost(held);
    }
  }

  /**
   * A job ended cancelled: its unfinished children are cancelled too, and when it is a child,
   * its parent is told (`child-outcomes.ts`).
   */
  private workflowCancelled(held: HeldJob): void {
    const { store } = this.rt.options;
    const steps = held.steps
      ? held.steps.entries.map((text) => JSON.parse(text) as { result: unknown })
      : held.job.steps;
    const isChild = parentOf(held.job) !== null;
    if (!isChild && pendingChildIds(steps).length === 0) return;
    this.rt.afterwards(
      Promise.all([
        cancelChildren(store, steps),
        isChild ? childCancelled(store, held.job) : null,
      ]).catch((error: unknown) => this.rt.reportError(error, 'cancel children')),
    );
  }

  /** Child jobs ended (completed, dead-lettered): their parents are woken when they were the last. */
  private childrenEnded(ended: HeldJob[]): void {
    if (ended.length === 0) return;
    const children = ended.map((held) => held.job);
    this.rt.afterwards(
      wakeParentsIfDone(this.rt.options.store, children).catch((error: unknown) =>
        this.rt.reportError(error, 'wake parent'),
      ),
    );
  }

  /** A coalesced schedule fire waits for its previous occurrence to end: look again now. */
  private afterScheduledJobsEnded(ended: readonly HeldJob[]): void {
    if (ended.some((h) => h.job.schedule !== null)) this.scheduledJobsEnded();
  }

  afterComplete(done: HeldJob[], result: SettleResult): void {
    this.afterScheduledJobsEnded(done);
    const lost = result.lost.length > 0 ? new Set(result.lost) : null;
    const refused = cancelRequestedIn(result);
    const now = Date.now();
    const listened = this.rt.listens('completed');
    const ended: HeldJob[] = [];
    for (const held of done) {
      if (refused?.has(held.job.id)) {
        this.cancelRefused(held);
        continue;
      }
      if (!lost?.has(held.job.id)) {
        this.rt.jobs.settled(held);
        if (listened) {
          this.rt.emit('completed', { job: held.job, durationMs: now - held.startedAt });
        }
        if (parentOf(held.job) !== null) ended.push(held);
        continue;
      }
      const completed = () =>
        this.rt.emit('completed', { job: held.job, durationMs: now - held.startedAt });
      if (held.settleUncertain) {
        // An earlier call may have deleted it: then the job is gone, and it was ours — unless
        // another owner ran it again after the lease ran out and completed it (history tells).
        this.reportUncertain(held, (job) => this.endedByThisRun(held, job, 'completed'), completed);
      } else {
        this.rt.jobs.settled(held);
        this.rt.reportLeaseLost(held);
      }
    }
    this.childrenEnded(ended);
  }

  afterFail(fails: PendingFailure[], result: SettleResult): void {
    this.afterScheduledJobsEnded(fails.map((f) => f.held));
    const lost = new Set(result.lost);
    const refused = cancelRequestedIn(result);
    const ended: HeldJob[] = [];
    for (const { held, failure, willRetry } of fails) {
      if (refused?.has(held.job.id)) {
        this.cancelRefused(held);
        continue;
      }
      const failed = () => {
        this.rt.emit('failed', {
          job: held.job,
          error: failure.error,
          willRetry,
          retryDelayMs: failure.retryDelayMs,
        });
        if (willRetry) this.rt.emit('retried', { job: held.job });
        else this.rt.emit('deadlettered', { job: held.job, error: failure.error });
      };
      if (!lost.has(held.job.id)) {
        this.rt.jobs.settled(held);
        failed();
        if (!willRetry && parentOf(held.job) !== null) ended.push(held);
      } else if (held.settleUncertain) {
        // An earlier call may have recorded the failure: then the job carries our error (it may
        // have been retried, even run and finished, since). A lease that really ran out carries
        // the lease-expired error instead.
        this.reportUncertain(
          held,
          (job) => job === null || job.lastError?.message === failure.error.message,
          failed,
        );
      } else {
        this.rt.jobs.settled(held);
        this.rt.reportLeaseLost(held);
      }
    }
    this.childrenEnded(ended);
    // A retry is a new timer: let the loop see its due time.
    if (fails.some((f) => f.willRetry)) this.rt.wakeup.wake();
  }

  afterRelease(releases: HeldJob[], result: SettleResult): void {
    const lost = new Set(result.lost);
    for (const held of releases) this.rt.jobs.settled(held);
    const jobs = releases.filter((h) => !lost.has(h.job.id)).map((h) => h.job);
    if (jobs.length > 0) {
      this.rt.emit('released', { jobs });
      this.rt.wakeup.wake();
    }
  }

  /**
   * An uncertain settle's job may have met a cancel request (`complete` and `fail` leave
   * cancelled jobs to their owner): the read then checks for one.
   */
  private mayBeCancelled(): boolean {
    return canCancel(this.rt.options.store);
  }

  /**
   * A completion or failure the store refused for a cancel request: the job is still ours,
   * flagged, and is cancelled now (it stays settling until then); `stop()` waits for it.
   */
  private cancelRefused(held: HeldJob): void {
    held.cancelRequested = true;
    held.settleUncertain = false;
    const cancel = this.cancelNow(held).catch((error: unknown) => {
      this.rt.reportError(error, `cancel job ${held.job.id} after a refused settle`);
    });
    this.settleChecks.add(cancel);
    void cancel.finally(() => this.settleChecks.delete(cancel));
  }

  /**
   * After a settle call that failed (maybe having taken effect) and a retry that found the lease
   * gone: reads the job to tell "our earlier call did it" (`report`), "an operator cancelled
   * it" (still ours, flagged: cancelled now, never retried) and a lease really lost. `stop()` waits for these reads (and the
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
          const job = await this.rt.options.store.getJob(held.job.id);
          if (job?.cancelRequested && job.lockToken === held.ref.token && this.mayBeCancelled()) {
            // Still ours, flagged: it is cancelled now (it stays settling until then).
            held.cancelRequested = true;
            held.settleUncertain = false;
            await this.cancelNow(held);
            return;
          }
          this.rt.jobs.settled(held);
          if (await ours(job)) report();
          else this.rt.reportLeaseLost(held);
          return;
        } catch (error) {
          if (attempt >= 3) {
            this.rt.jobs.settled(held);
            this.rt.reportError(error, `read job ${held.job.id} after an uncertain settle`);
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
    const record = await this.rt.options.store.history?.get(held.job.id);
    if (!record) return true;
    return (
      record.outcome === outcome &&
      record.attempts === held.job.attempts &&
      record.lockOwner === this.rt.options.owner
    );
  }

  /** Waits for the reads that decide how uncertain settles are reported. */
  async uncertainSettlesChecked(): Promise<void> {
    while (this.settleChecks.size > 0) await Promise.all(this.settleChecks);
  }
}

/** The ids a settle refused for a cancel request, or null when none. */
function cancelRequestedIn(result: SettleResult): ReadonlySet<string> | null {
  return result.cancelRequested && result.cancelRequested.length > 0
    ? new Set(result.cancelRequested)
    : null;
}
