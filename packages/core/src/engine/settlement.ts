/**
 * Settlement: writes the outcome of finished jobs (complete, fail, release) in batched store
 * calls, and reports each job's fate once the store answered.
 *
 * - Failures and releases are written on the next tick (`setImmediate` coalescing).
 * - When the store offers `completeAndAcquire` and runs one call at a time (no
 *   `capabilities.concurrentCalls`), completions wait up to `COMPLETION_HOLD_MS` for the next
 *   acquisition and ride on it (one round trip for both), else they are written on their own:
 *   on a pool at once, beside the acquisitions, so the database works on both in parallel.
 * - A failed call is retried with backoff, well inside the lease. Because it may have taken
 *   effect before it failed, a retry that finds the lease gone reads the job to tell "our earlier
 *   call did it" from a lease really lost (an *uncertain settle*).
 */
import type { JobCompletion, SettleResult } from '../store.js';
import type { HeldJob } from './held-jobs.js';
import { writeFinalProgress } from './renewals.js';
import type { EngineRuntime } from './runtime.js';
import { type PendingFailure, SettleOutcomes } from './settle-outcomes.js';

export type { PendingFailure } from './settle-outcomes.js';

/** How long a completion may wait to ride on the next acquisition (a busy engine: 1–2 ms). */
const COMPLETION_HOLD_MS = 10;
/** Longest wait before retrying a failed settle call (never more than a quarter lease). */
const MAX_SETTLE_RETRY_MS = 5_000;

/** What completing `held` writes: its claim, plus its result and duration for history. */
export function completionOf(held: HeldJob): JobCompletion {
  return held.completion ?? held.ref;
}

/**
 * The face a finished run (dispatch, cancellation, lease renewal, start marks) hands its outcome
 * to: queue it, and ask for it to be written soon.
 */
export interface Settler {
  queueCompletion(held: HeldJob): void;
  queueFailure(failure: PendingFailure): void;
  queueRelease(held: readonly HeldJob[]): void;
  queueCancel(held: HeldJob): void;
  settleSoon(): void;
}

/**
 * The acquisition loop's face: the completions it folds into its next `completeAndAcquire`, and
 * what the store answered for them (`landed`) or that the call failed (`retryCompletions`).
 */
export interface CompletionFold {
  foldsCompletions(): boolean;
  hasPendingCompletions(): boolean;
  takePendingCompletions(): HeldJob[];
  landed(done: HeldJob[], result: SettleResult): void;
  retryCompletions(done: HeldJob[]): void;
}

/** Shutdown's face: write what is queued before the deadline, then let go. */
export interface Drain {
  readonly pendingCount: number;
  queueRelease(held: readonly HeldJob[]): void;
  scheduleFlush(afterFailure: boolean): void;
  flushUntilEmpty(deadline?: number): Promise<void>;
  uncertainSettlesChecked(): Promise<void>;
  detach(): void;
}

export class Settlement implements Settler, CompletionFold, Drain {
  private pendingComplete: HeldJob[] = [];
  private pendingFail: PendingFailure[] = [];
  private pendingRelease: HeldJob[] = [];
  /** Jobs an operator cancelled, to delete as cancelled (`JobStore.cancelHeld`). */
  private pendingCancel: HeldJob[] = [];
  private flushScheduled = false;
  private flushing: Promise<void> | null = null;
  private flushFailures = 0;
  /** stop() has returned: retries no longer keep the process alive, and end with the lease. */
  private detached = false;
  /** A batch of failures was refused: write them one by one until a round lands whole. */
  private splitFailures = false;
  private completionTimer: NodeJS.Timeout | null = null;
  private readonly outcomes: SettleOutcomes;

  /**
   * @param scheduledJobsEnded called when jobs created by a schedule ended: a coalesced schedule
   *   fire waits for its previous occurrence to end, so the schedules must be looked at again.
   */
  constructor(
    private readonly rt: EngineRuntime,
    scheduledJobsEnded: () => void,
  ) {
    this.outcomes = new SettleOutcomes(rt, scheduledJobsEnded, async (held) => {
      this.queueCancel(held);
      await this.flush();
    });
  }

  /** Finished jobs whose completion, failure or release is being written. */
  get pendingCount(): number {
    return (
      this.pendingComplete.length +
      this.pendingFail.length +
      this.pendingRelease.length +
      this.pendingCancel.length
    );
  }

  hasPendingCompletions(): boolean {
    return this.pendingComplete.length > 0;
  }

  /**
   * Completions ride on the next acquisition (`completeAndAcquire`) only where the store runs
   * one call at a time; on a pool they run beside it, on another connection (~1.15× on PostgreSQL).
   */
  foldsCompletions(): boolean {
    const { store } = this.rt.options;
    return store.completeAndAcquire !== undefined && store.capabilities.concurrentCalls !== true;
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

  queueCancel(held: HeldJob): void {
    if (!this.pendingCancel.includes(held)) this.pendingCancel.push(held);
  }

  /**
   * Takes the pending completions for one store call; the next one starts a new hold. Those
   * with progress or log lines not yet written stay for `flush`, which writes them first.
   */
  takePendingCompletions(): HeldJob[] {
    const taken = this.takeAllCompletions();
    const dirty = (held: HeldJob) => held.progressDirty === true || held.logsDirty === true;
    if (!taken.some(dirty)) return taken;
    this.pendingComplete = taken.filter(dirty);
    this.scheduleFlush(false);
    return taken.filter((held) => !dirty(held));
  }

  /** The pending completions, less those of runs this engine has leased again (lost). */
  private takeAllCompletions(): HeldJob[] {
    if (this.completionTimer) {
      clearTimeout(this.completionTimer);
      this.completionTimer = null;
    }
    const taken = this.pendingComplete.splice(0);
    for (const lost of this.rt.jobs.takeSuperseded(taken, (held) => held)) {
      this.rt.reportLeaseLost(lost);
    }
    return taken;
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
    const folds = this.foldsCompletions() && this.rt.running;
    if (
      this.pendingFail.length + this.pendingRelease.length + this.pendingCancel.length > 0 ||
      !folds
    ) {
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

  /** Completions folded into an acquisition were written: report them, wake for their scopes. */
  landed(done: HeldJob[], result: SettleResult): void {
    this.outcomes.afterComplete(done, result);
    this.wakeForScopes(done);
  }

  /** Waits for the reads and cancellations that decide how refused settles are reported. */
  uncertainSettlesChecked(): Promise<void> {
    return this.outcomes.uncertainSettlesChecked();
  }

  /**
   * Limited jobs settled: each freed a slot of its scope, so the scope's next job may be
   * acquirable now (let back in from blocked, on a store with a blocked set, or simply next in
   * line). A property of the settled jobs, not of the store: every store wakes alike.
   */
  private wakeForScopes(settled: readonly HeldJob[]): void {
    if (settled.some((h) => h.ref.scope)) this.rt.wakeup.wake();
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
      const cap = Math.max(10, Math.min(MAX_SETTLE_RETRY_MS, this.rt.options.leaseMs / 4));
      const delay = Math.min(cap, 50 * 2 ** Math.min(this.flushFailures, 7));
      const timer = setTimeout(run, delay);
      if (this.detached) timer.unref();
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
    const { store } = this.rt.options;
    const completes = this.takeAllCompletions();
    const fails = this.pendingFail.splice(0);
    const releases = this.pendingRelease.splice(0);
    const cancels = this.pendingCancel.splice(0);
    // A job cancelled is gone like one completed (a failed or released one comes back).
    for (const lost of this.rt.jobs.takeSuperseded(cancels, (held) => held)) {
      this.rt.reportLeaseLost(lost);
    }
    if (completes.length + fails.length + releases.length + cancels.length === 0) return;
    if (this.detached) {
      // After stop(): a write for a lease that ran out is dropped (the store would refuse it).
      const { jobs } = this.rt;
      const self = (held: HeldJob) => held;
      const left =
        jobs.forgetLapsed(completes, self) +
        jobs.forgetLapsed(fails, (f) => f.held) +
        jobs.forgetLapsed(releases, self) +
        jobs.forgetLapsed(cancels, self);
      if (left === 0) return;
    }
    await writeFinalProgress(this.rt, [...completes, ...fails.map((f) => f.held), ...cancels]);
    // After a batch of failures was refused, each is written on its own: one job's bad write
    // (a value the database cannot hold) never holds back the others (invariant 17).
    const splitFails = this.splitFailures && fails.length > 1;
    const [completed, failed, released, split, cancelled] = await Promise.allSettled([
      completes.length > 0 ? store.complete(completes.map(completionOf)) : null,
      fails.length > 0 && !splitFails ? store.fail(fails.map((f) => f.failure)) : null,
      releases.length > 0 ? store.release(releases.map((h) => h.ref)) : null,
      splitFails ? this.failOneByOne(fails) : null,
      cancels.length > 0 ? store.cancellation?.cancelHeld(cancels.map(completionOf)) : null,
    ]);
    this.wakeForScopes([...completes, ...fails.map((f) => f.held), ...releases, ...cancels]);
    let anyFailed = false;
    if (cancelled?.status === 'fulfilled') {
      if (cancelled.value) {
        this.rt.reportSuccess('cancel');
        this.outcomes.afterCancel(cancels, cancelled.value);
      }
    } else {
      anyFailed = true;
      for (const held of cancels) held.settleUncertain = true;
      this.pendingCancel.unshift(...cancels);
      this.rt.reportError(cancelled?.reason, 'cancel');
    }
    if (completed?.status === 'fulfilled') {
      if (completed.value) {
        this.rt.reportSuccess('complete');
        this.outcomes.afterComplete(completes, completed.value);
      }
    } else {
      anyFailed = true;
      for (const held of completes) held.settleUncertain = true;
      this.pendingComplete.unshift(...completes);
      this.rt.reportError(completed?.reason, 'complete');
    }
    if (split?.status === 'fulfilled' && split.value) {
      if (split.value.refused > 0) anyFailed = true;
      else this.splitFailures = false;
    } else if (failed?.status === 'fulfilled') {
      if (failed.value) {
        this.rt.reportSuccess('fail');
        this.outcomes.afterFail(fails, failed.value);
      }
    } else {
      anyFailed = true;
      for (const { held } of fails) held.settleUncertain = true;
      this.pendingFail.unshift(...fails);
      if (fails.length > 1) this.splitFailures = true;
      this.rt.reportError(failed?.reason, 'fail');
    }
    if (released?.status === 'fulfilled') {
      if (released.value) {
        this.rt.reportSuccess('release');
        this.outcomes.afterRelease(releases, released.value);
      }
    } else {
      anyFailed = true;
      this.pendingRelease.unshift(...releases);
      this.rt.reportError(released?.reason, 'release');
    }
    this.flushFailures = anyFailed ? this.flushFailures + 1 : 0;
    if (anyFailed) this.scheduleFlush(true);
    else this.settleSoon();
    this.rt.jobs.changed();
  }

  /** Writes each failure in its own store call; the refused ones wait for the next flush. */
  private async failOneByOne(fails: PendingFailure[]): Promise<{ refused: number }> {
    const { store } = this.rt.options;
    const results = await Promise.allSettled(fails.map((f) => store.fail([f.failure])));
    let refused = 0;
    results.forEach((result, i) => {
      const pending = fails[i] as PendingFailure;
      if (result.status === 'fulfilled') {
        this.outcomes.afterFail([pending], result.value);
        return;
      }
      refused += 1;
      pending.held.settleUncertain = true;
      this.pendingFail.push(pending);
      this.rt.reportError(result.reason, 'fail');
    });
    return { refused };
  }

  /**
   * After stop() returned, the engine lets go: pending writes are retried without keeping the
   * process alive, and only while this engine's lease on the job may still be live.
   */
  detach(): void {
    this.detached = true;
  }

  /**
   * Flushes until nothing is pending, retrying failed store calls until `deadline` (epoch ms;
   * default: one lease from now).
   */
  async flushUntilEmpty(deadline = Date.now() + this.rt.options.leaseMs): Promise<void> {
    while (this.pendingCount > 0) {
      await this.flush();
      if (this.pendingCount === 0) break;
      if (Date.now() > deadline) {
        this.rt.options.logger.warn(
          'could not write all finished jobs before stopping; their leases will expire',
          { pending: this.pendingCount },
        );
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (this.flushing) await this.flushing;
  }
}
