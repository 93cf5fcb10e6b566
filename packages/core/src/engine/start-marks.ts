/**
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
import { monotonicNow } from '../clock.js';
import type { LeaseRenewalRef } from '../store.js';
import { cancelRequested } from './cancellation.js';
import type { HeldJob } from './held-jobs.js';
import { renew, renewalRef } from './renewals.js';
import type { EngineRuntime } from './runtime.js';
import type { Settler } from './settlement.js';

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
