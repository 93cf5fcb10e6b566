/**
 * The acquisition loop: leases up to `concurrency + prefetch` jobs in batches and hands them to
 * dispatch; between acquisitions it does the housekeeping (`maintenance.ts`) and sleeps until
 * the next due job, schedule or poll.
 *
 * A job enqueued through a running engine wakes the loop at once; other processes are woken by
 * the store's notifications, and polling (adaptive when the store has none) is the fallback.
 * A pass woken only for housekeeping acquires nothing unless the housekeeping made jobs
 * acquirable (recovered leases, fired schedules): an idle engine's statements are its poll's.
 * Pending completions ride on the next acquisition when the store has `completeAndAcquire` and
 * runs one call at a time (`Settlement.foldsCompletions`).
 */

import { monotonicNow } from '../clock.js';
import type { AcquireRequest, Job } from '../store.js';
import type { Dispatcher } from './dispatch.js';
import type { Maintenance } from './maintenance.js';
import { MIN_POLL_MS, PREFETCH_HORIZON_MS } from './options.js';
import type { EngineRuntime } from './runtime.js';
import { type CompletionFold, completionOf } from './settlement.js';

/**
 * Longest pause after failed passes, whatever `pollIntervalMs`: a store that answers again is
 * used again within seconds.
 */
const MAX_ERROR_DELAY_MS = 5_000;

export class AcquisitionLoop {
  private unsubscribe: (() => void) | null = null;
  private done: Promise<void> | null = null;
  /** The due time last found passed with nothing acquired, and the wait before trying it again. */
  private overdue: { dueAt: number; retryMs: number } | null = null;
  /**
   * While idle, what is left until the next acquisition when nothing wakes the loop before:
   * `leftMs` of the wait `idleWait` chose (counted down by the sleeps), or the next due time
   * on the engine's clock, if one was read; null while the loop acquires.
   */
  private idle: { leftMs: number; dueAt: number | null } | null = null;

  constructor(
    private readonly rt: EngineRuntime,
    private readonly maintenance: Maintenance,
    private readonly settlement: CompletionFold,
    private readonly dispatcher: Dispatcher,
  ) {}

  /** Listens to the store's notifications (when it has them) and starts the loop. */
  start(): void {
    const { store } = this.rt.options;
    if (store.capabilities.notifications && store.subscribe) {
      this.unsubscribe = store.subscribe(() => this.rt.wakeup.wake());
    }
    this.done = this.run();
  }

  /** Stops listening and waits for the current pass to end (the engine is no longer running). */
  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.rt.wakeup.wake();
    await this.done;
  }

  private async run(): Promise<void> {
    const { rt } = this;
    const { jobs, wakeup } = rt;
    const { pollIntervalMs } = rt.options;
    let idleDelay = MIN_POLL_MS;
    let errorDelay = 100;
    const notifies = this.unsubscribe !== null;
    while (rt.running) {
      const woken = wakeup.woken;
      wakeup.reset();
      try {
        const madeAcquirable = await this.maintenance.run();
        const left = this.msUntilAcquisition();
        if (!woken && !madeAcquirable && left > 0) {
          // Woken for housekeeping only: nothing said a job is due before then.
          await this.sleepIdle(left);
          continue;
        }
        this.idle = null;
        const room = jobs.room();
        if (room <= 0 || (room < jobs.refillBatch() && jobs.size > 0)) {
          // Full enough: refill in batches, not one job at a time. A finishing job wakes us
          // once there is room for a batch.
          await wakeup.sleep(pollIntervalMs);
          continue;
        }
        const sentAt = monotonicNow();
        const leased = await this.acquireBatch(room);
        jobs.noteRoundTrip(monotonicNow() - sentAt);
        // Jobs over a rate limit go back waiting until their window ends (`rate-limits.ts`).
        const acquired = await rt.rateLimits.admit(leased);
        rt.reportSuccess('acquire');
        this.adaptPrefetch(room, acquired.length);
        errorDelay = 100;
        if (acquired.length > 0) {
          idleDelay = MIN_POLL_MS;
          this.dispatcher.take(acquired, sentAt);
          if (acquired.length === room) continue;
        }
        if (wakeup.woken || !rt.running) continue;
        const wait = await this.idleWait(
          notifies ? pollIntervalMs : idleDelay,
          acquired.length === 0 ? idleDelay : 0,
        );
        await this.sleepIdle(wait);
        if (acquired.length === 0) idleDelay = Math.min(idleDelay * 2, pollIntervalMs, 1_000);
      } catch (error) {
        rt.reportError(error, 'acquire');
        await wakeup.sleep(errorDelay);
        errorDelay = Math.min(errorDelay * 2, pollIntervalMs, MAX_ERROR_DELAY_MS);
      }
    }
  }

  /**
   * Adaptive prefetch: a full batch means a backlog is waiting, so lease bigger batches
   * (fewer round trips per job); a batch less than half full means it is gone, so hold fewer.
   * Never more than start within `PREFETCH_HORIZON_MS` at the handlers' average run time: fast
   * jobs get big batches, slow ones stay on the database for idle nodes to take.
   */
  private adaptPrefetch(requested: number, got: number): void {
    const { concurrency, minPrefetch, maxPrefetch } = this.rt.options;
    const { jobs } = this.rt;
    const prefetch = jobs.capacity - concurrency;
    let next = prefetch;
    if (got === requested && requested > 0) next = Math.min(maxPrefetch, Math.max(1, prefetch * 2));
    else if (got < requested / 2) next = Math.max(minPrefetch, Math.floor(prefetch / 2));
    if (minPrefetch < maxPrefetch && jobs.runMs !== null && jobs.runMs > 0) {
      const horizon = Math.floor((concurrency * PREFETCH_HORIZON_MS) / jobs.runMs);
      next = Math.max(minPrefetch, Math.min(next, horizon));
    }
    jobs.capacity = concurrency + next;
  }

  private acquireRequest(limit: number): AcquireRequest {
    const { owner, leaseMs, types, queues, tenants, concurrency } = this.rt.options;
    const request: AcquireRequest = { owner, limit, leaseMs, types, queues, tenants };
    const { startMarks } = this.dispatcher;
    if (startMarks.enabled) {
      // The jobs that start at once are recorded as started by the acquisition itself, and
      // those expected to start within one round trip too (see `start-marks.ts`).
      const { jobs } = this.rt;
      request.start = Math.max(0, Math.min(limit, concurrency - jobs.executing - jobs.starting));
      request.startAhead = Math.min(limit - request.start, startMarks.aheadCount());
    }
    return request;
  }

  private async acquireBatch(limit: number): Promise<Job[]> {
    const request = this.acquireRequest(limit);
    const store = this.rt.options.store;
    if (
      store.completeAndAcquire &&
      this.settlement.foldsCompletions() &&
      this.settlement.hasPendingCompletions()
    ) {
      const done = this.settlement.takePendingCompletions();
      try {
        const result = await store.completeAndAcquire(done.map(completionOf), request);
        this.settlement.landed(done, result);
        return result.jobs;
      } catch (error) {
        this.settlement.retryCompletions(done);
        throw error;
      }
    }
    return store.acquire(request);
  }

  /**
   * Milliseconds until the next acquisition when nothing is due: until the next due job (on the
   * store's clock, to the millisecond) or poll; kept in `idle`.
   *
   * A due time still ahead is slept to exactly, whatever the idle back-off. A due time already
   * passed with nothing acquired (`floor` > 0) is either an early wake-up (this clock a few ms
   * ahead of the store's, a timer firing a little early) or a job that cannot start yet (its
   * exclusive scope is busy, a rate limit): the same due time is then tried again after 1, 2,
   * 4 … ms, doubling up to `floor` (the adaptive idle delay), so an early wake-up costs a few
   * ms and a blocked job never makes the loop spin.
   */
  private async idleWait(max: number, floor: number): Promise<number> {
    const { store, clock, types, queues, tenants } = this.rt.options;
    const next = await store.nextDueAt({ types, queues, tenants });
    const now = clock.now();
    let wait = max;
    if (next) {
      const due = next.getTime();
      if (due > now) {
        // Rounded up: a timer never fires before its time, but may fire within the ms before.
        wait = Math.min(wait, Math.ceil(due - now));
        this.overdue = null;
      } else if (floor > 0) {
        const retry = this.overdue?.dueAt === due ? Math.min(this.overdue.retryMs * 2, floor) : 1;
        this.overdue = { dueAt: due, retryMs: retry };
        wait = Math.min(wait, retry);
      } else {
        wait = 0;
      }
    } else {
      this.overdue = null;
    }
    this.idle = { leftMs: wait, dueAt: next && next.getTime() > now ? next.getTime() : null };
    return wait;
  }

  /** Ms left until the next acquisition while idle (0: acquire now). */
  private msUntilAcquisition(): number {
    if (!this.idle) return 0;
    const { leftMs, dueAt } = this.idle;
    const untilDue = dueAt === null ? leftMs : Math.ceil(dueAt - this.rt.options.clock.now());
    return Math.max(0, Math.min(leftMs, untilDue));
  }

  /**
   * Sleeps `ms` towards the next acquisition, or less when housekeeping is due sooner
   * (schedules, lease recovery), counting it off what is left.
   */
  private async sleepIdle(ms: number): Promise<void> {
    const { clock } = this.rt.options;
    const slept = Math.max(0, Math.min(ms, this.maintenance.msUntilNextPass(clock.now())));
    await this.rt.wakeup.sleep(slept);
    if (this.idle) this.idle.leftMs -= slept;
  }
}
