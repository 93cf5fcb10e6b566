/**
 * Settlement: everything between a handler's outcome and the store's answer.
 * - `Settlement`: writes the outcome of finished jobs (complete, fail, release) in batched store
 *   calls, and reports each job's fate once the store answered.
 * - What a settle call's answer means for each job (events, a lost lease, a cancel request, an
 *   uncertain settle read back).
 * - `renew`: one lease renewal call and what it answered, shared by the heartbeat, the start
 *   marks and the settle flush.
 * - The child's side of `ctx.run`: how a child job's outcome reaches its parent.
 *
 * Each section below keeps its own header.
 */

import { UnrecoverableError } from '../errors.js';
import { jsonText } from '../rules.js';
import {
  assertCanCancel,
  type CancelOutcome,
  canCancel,
  type HistoryOutcome,
  type Job,
  type JobCompletion,
  type JobFailure,
  type JobRef,
  type JobStore,
  type LeaseRenewalRef,
  type SettleResult,
} from '../store.js';
import { FLOW_TYPE, flowNodeCanStart } from './flow-model.js';
import type { EngineRuntime, HeldJob } from './runtime.js';
import { MAX_SIGNAL_PAYLOAD_BYTES } from './waits.js';

// ─── Settlement ──────────────────────────────────────────────────────────────────────────────────
/*
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

// ─── what a settle's answer means ────────────────────────────────────────────────────────────────
/*
 * What a settle call's answer means for each job: the events (completed, failed, retried,
 * deadlettered, released, cancelled), a lease reported lost, a settle refused for a cancel
 * request (`SettleResult.cancelRequested`: the job is cancelled now, no read needed), and
 * *uncertain settles* — a call that failed may have taken effect before it failed, so a retry
 * that finds the lease gone reads the job (and its history) to tell "our earlier call did it"
 * from "another owner ran it again".
 */

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
   * its parent is told (`settlement.ts`).
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

// ─── one renewal call ────────────────────────────────────────────────────────────────────────────
/*
 * One lease renewal call and what it answered: shared by the heartbeat (`lease-renewal.ts`),
 * the start marks (`dispatch.ts`) and the settle flush, which writes the last progress and
 * log lines before a job settles.
 */

/** What one renewal answered for a held job. */
export type RenewalAnswer = 'renewed' | 'lost' | 'cancel-requested';

/**
 * Sends one renewal for `refs` of `holding` (same order) and reads the answer per job; the
 * progress written is marked clean. Shared by the heartbeat and the start marks.
 */
export async function renew(
  rt: EngineRuntime,
  holding: readonly HeldJob[],
  refs: readonly LeaseRenewalRef[],
): Promise<RenewalAnswer[]> {
  const { store, owner, leaseMs } = rt.options;
  const result = await store.renewLeases(owner, leaseMs, refs);
  const lost = result.lost.length > 0 ? new Set(result.lost) : null;
  const cancelled = result.cancelRequested?.length ? new Set(result.cancelRequested) : null;
  return refs.map((ref, i) => {
    const held = holding[i] as HeldJob;
    // Written, unless the handler reported again while the call was in flight.
    if (ref.progressJson != null && held.progressJson === ref.progressJson) {
      held.progressDirty = false;
    }
    if (ref.logsJson != null && held.logsJson === ref.logsJson) held.logsDirty = false;
    if (lost?.has(held.job.id)) return 'lost';
    return cancelled?.has(held.job.id) ? 'cancel-requested' : 'renewed';
  });
}

/**
 * A copy of `ref` (its id, token and scope) to add fields to, built property by property: V8
 * builds a spread with properties added (`{ ...ref, durationMs }`) on its slow path, ~2 µs, and
 * refs are copied per job settled or renewed.
 */
export function copyRef(ref: JobRef): JobRef {
  const copy: JobRef = { id: ref.id, token: ref.token };
  if (ref.scope !== undefined) copy.scope = ref.scope;
  return copy;
}

/**
 * The renewal ref of `held`, with its progress and log when the store keeps them and they
 * changed, and `start` when given (see `LeaseRenewalRef.start`).
 */
export function renewalRef(rt: EngineRuntime, held: HeldJob, start?: boolean): LeaseRenewalRef {
  const { capabilities } = rt.options.store;
  const progress = capabilities.progress === true && held.progressDirty;
  const logs = capabilities.logs === true && held.logsDirty;
  if (!progress && !logs && start === undefined) return held.ref;
  const ref: LeaseRenewalRef = copyRef(held.ref);
  if (progress) ref.progressJson = held.progressJson ?? null;
  if (logs) ref.logsJson = held.logsJson ?? null;
  if (start !== undefined) ref.start = start;
  return ref;
}

/**
 * Progress and log lines reported after the last renewal are written before the job settles
 * (one renewal call for the whole batch, only when any finished job has such), so the final
 * values are durable and go to history. A failure here is reported; the settle goes on.
 */
export async function writeFinalProgress(
  rt: EngineRuntime,
  finished: readonly HeldJob[],
): Promise<void> {
  const { capabilities } = rt.options.store;
  const dirty = finished.filter(
    (held) =>
      held.phase !== 'lost' &&
      ((held.progressDirty && capabilities.progress === true) ||
        (held.logsDirty && capabilities.logs === true)),
  );
  if (dirty.length === 0) return;
  try {
    await renew(
      rt,
      dirty,
      dirty.map((held) => renewalRef(rt, held)),
    );
  } catch (error) {
    rt.reportError(error, 'write progress');
  }
}

// ─── a child's outcome ───────────────────────────────────────────────────────────────────────────
/*
 * The child's side of `ctx.run` (the parent's side is `children.ts`): how a child job's outcome
 * reaches its parent, and how a cancel reaches a parent's children. Everything goes through the
 * store's `waits` signals, so it works on every store with `waits` and needs no table of its own.
 *
 * - A child carries its parent's id in `Job.meta` (`PARENT_META`).
 * - **Its result first, its completion second.** Before a child's completion is written, the
 *   engine stores a signal `$child` keyed by the child's id whose payload is the outcome
 *   (`{ outcome: 'completed', result }`). The result is durable before the child leaves the
 *   live table, so it reaches the parent with history off; the parent *takes* it in the same
 *   transaction that checkpoints it (`StoreWaits.takeSignal`). Should the completion then be
 *   lost (the lease lapsed), the child runs again and its later signal is never taken: the
 *   parent keeps the first result.
 * - **Completed in `ctx.transaction`, its result after.** The completion commits before the
 *   handler returns, so its result is sent afterwards; the history record the transaction writes
 *   says so meanwhile (`RESULT_PENDING_JSON`, replaced by the result when the handler returns).
 *   A parent that finds the child completed with that marker and no result signal keeps waiting
 *   (rechecking) for a lease after the completion; then the result went with the child's process
 *   and `ctx.run` throws `ChildJobError` (`lost`) — never a `null` the child did not return.
 * - **The wake-up, after the child ended** (completed, dead-lettered, cancelled): the settler
 *   reads the parent's step list (its `ctx.run` checkpoints name the children it waits for) and
 *   sends the signal `$children` keyed by the parent's id only when none of those children is
 *   still unfinished (live and not dead-lettered). Each settler looks after its own settle
 *   committed, so the last of several finishing at once sees the others gone: the parent is
 *   woken once the last child ended (two may both send it; the parent takes the spare one when
 *   it resumes). A settler that dies before it wakes the parent loses nothing but time: a
 *   parked parent looks at its children again every `childRecheckMs`.
 */

/** The `Job.meta` header that names a child job's parent (its id). */
export const PARENT_META = 'jobs.parent';
/** The signal carrying a child's outcome to its parent, keyed by the child's id. */
export const RESULT_SIGNAL = '$child';
/** The signal that wakes a parent whose children all ended, keyed by the parent's id. */
export const WAKE_SIGNAL = '$children';

/**
 * The history result of a child job completed in `ctx.transaction` until its handler returned
 * (a `HistoryResultMarker`): its result is still to be sent.
 */
export const RESULT_PENDING_JSON = '{"$jobs":"result-pending"}';

/** Whether a history record's result is `RESULT_PENDING_JSON`'s marker. */
export function isResultPending(result: unknown): boolean {
  return (
    typeof result === 'object' &&
    result !== null &&
    (result as { $jobs?: unknown }).$jobs === 'result-pending'
  );
}

/** How a child ended, as its result signal and the parent's checkpoint say it. */
export interface ChildOutcomeRecord {
  outcome: 'completed' | 'cancelled';
  result?: unknown;
}

/** The id of `job`'s parent when it is a child job (`ctx.run`), else null. */
export function parentOf(job: Job): string | null {
  return job.meta?.[PARENT_META] ?? null;
}

/**
 * The ids of the children a job with these steps waits for: its `ctx.run` checkpoints
 * (`{ $child: id }`) that have no outcome yet.
 */
export function pendingChildIds(steps: ReadonlyArray<{ result: unknown }> | undefined): string[] {
  const ids: string[] = [];
  for (const step of steps ?? []) {
    const result = step.result as { $child?: unknown; outcome?: unknown } | null;
    if (typeof result !== 'object' || result === null) continue;
    if (typeof result.$child === 'string' && result.outcome === undefined) ids.push(result.$child);
  }
  return ids;
}

/**
 * The payload of a completed child's result signal, or an `UnrecoverableError` when the result
 * cannot travel (more than a signal holds): the child then fails for good, saying why.
 */
export function completedPayload(childId: string, result: unknown): string {
  const text = `{"outcome":"completed","result":${jsonText(result ?? null, 'result')}}`;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_SIGNAL_PAYLOAD_BYTES) {
    throw new UnrecoverableError(
      `child job ${childId} returned ${bytes} bytes of JSON, more than its parent can receive (${MAX_SIGNAL_PAYLOAD_BYTES}, MAX_SIGNAL_PAYLOAD_BYTES): store large data elsewhere and return a reference`,
    );
  }
  return text;
}

const CANCELLED_PAYLOAD = '{"outcome":"cancelled"}';

/** Stores child `job`'s outcome for its parent (before its completion is written). */
export async function sendChildOutcome(
  store: JobStore,
  job: Job,
  payloadJson: string,
): Promise<void> {
  await store.waits?.signal(RESULT_SIGNAL, job.id, payloadJson);
}

/**
 * After jobs ended (one settle's worth): wakes each parent among theirs when none of the
 * children it waits for is unfinished — one look per parent, however many of its children the
 * settle ended. The look goes from the last child enqueued back and stops at the first
 * unfinished one: children start in the order they were enqueued, so the last ones are the
 * likeliest to be unfinished, and a settle costs a read or two per parent until the last child.
 */
export async function wakeParentsIfDone(store: JobStore, ended: readonly Job[]): Promise<void> {
  const byParent = new Map<string, Set<string>>();
  for (const job of ended) {
    const parentId = parentOf(job);
    if (parentId === null) continue;
    const done = byParent.get(parentId) ?? new Set<string>();
    done.add(job.id);
    byParent.set(parentId, done);
  }
  for (const [parentId, done] of byParent) await wakeParent(store, parentId, done);
}

async function wakeParent(store: JobStore, parentId: string, done: Set<string>): Promise<void> {
  if (!store.waits) return;
  const parent = await store.getJob(parentId);
  if (!parent) return;
  // A flow job is woken as soon as one of its nodes can start, not only after its last node.
  if (parent.type === FLOW_TYPE && (await flowNodeCanStart(store, parent, done))) {
    await store.waits.signal(WAKE_SIGNAL, parentId, 'null');
    return;
  }
  const siblings = pendingChildIds(parent.steps).filter((id) => !done.has(id));
  for (let i = siblings.length - 1; i >= 0; i--) {
    const sibling = await store.getJob(siblings[i] as string);
    if (sibling !== null && sibling.state !== 'deadletter') return;
  }
  await store.waits.signal(WAKE_SIGNAL, parentId, 'null');
}

/**
 * A cancelled child: its outcome for its parent, then the parent's wake-up — unless the parent
 * is gone (cancelled with it): nobody would take the outcome.
 */
export async function childCancelled(store: JobStore, job: Job): Promise<void> {
  const parentId = parentOf(job);
  if (parentId === null || (await store.getJob(parentId)) === null) return;
  await sendChildOutcome(store, job, CANCELLED_PAYLOAD);
  await wakeParentsIfDone(store, [job]);
}

/**
 * Cancels the unfinished children of a cancelled parent whose step list is `steps`, and
 * theirs in turn. Their parent is gone, so no outcome is sent to it.
 */
export async function cancelChildren(
  store: JobStore,
  steps: ReadonlyArray<{ result: unknown }> | undefined,
): Promise<void> {
  for (const id of pendingChildIds(steps)) await cancelTree(store, id, false);
}

/**
 * `admin.cancel(id)` with its cascade: cancels job `id`, then its unfinished children (and
 * theirs); a cancelled child's parent gets its outcome when `tellParent`.
 */
export async function cancelTree(
  store: JobStore,
  id: string,
  tellParent: boolean,
): Promise<CancelOutcome> {
  const cancellation = assertCanCancel(store, 'admin.cancel');
  const job = store.waits ? await store.getJob(id) : null;
  const outcome = await cancellation.cancel(id);
  if (job === null) return outcome;
  await cancelChildren(store, job.steps);
  // A running child ends cancelled on its owner, which tells the parent then.
  if (tellParent && outcome === 'cancelled') await childCancelled(store, job);
  return outcome;
}
