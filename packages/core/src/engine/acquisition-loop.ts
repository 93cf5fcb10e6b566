/**
 * The acquisition loop: leases up to `concurrency + prefetch` jobs in batches and hands them to
 * dispatch; between acquisitions it does the housekeeping (`maintenance.ts`) and sleeps until
 * the next due job, schedule or poll.
 *
 * A job enqueued through a running engine wakes the loop at once; other processes are woken by
 * the store's notifications, and polling (adaptive when the store has none) is the fallback.
 * Pending completions ride on the next acquisition when the store has `completeAndAcquire` and
 * runs one call at a time (`Settlement.foldsCompletions`).
 */
import type { AcquireRequest, Job } from '../store.js';
import type { EngineContext } from './context.js';
import type { Dispatcher } from './dispatch.js';
import { monotonicNow } from './lease-renewal.js';
import type { Maintenance } from './maintenance.js';
import { MIN_POLL_MS, PREFETCH_HORIZON_MS } from './options.js';
import { completionOf, type Settlement } from './settlement.js';

/** The loop's sleep, and what cuts it short (`engine.poll()`, a notification, a finished job). */
export class Wakeup {
  private pending = false;
  private wakeSleeper: (() => void) | null = null;

  constructor(private readonly isRunning: () => boolean) {}

  /** A wake-up arrived since the loop's pass began. */
  get woken(): boolean {
    return this.pending;
  }

  /** Ends the current sleep, or makes the next one return at once. */
  wake(): void {
    this.pending = true;
    const wake = this.wakeSleeper;
    this.wakeSleeper = null;
    wake?.();
  }

  /** Starts a pass: earlier wake-ups are answered by it. */
  reset(): void {
    this.pending = false;
  }

  sleep(ms: number): Promise<void> {
    if (this.pending || !this.isRunning()) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wakeSleeper = null;
        resolve();
      }, ms);
      this.wakeSleeper = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

export class AcquisitionLoop {
  private unsubscribe: (() => void) | null = null;
  private done: Promise<void> | null = null;

  constructor(
    private readonly ctx: EngineContext,
    private readonly maintenance: Maintenance,
    private readonly settlement: Settlement,
    private readonly dispatcher: Dispatcher,
  ) {}

  /** Listens to the store's notifications (when it has them) and starts the loop. */
  start(): void {
    const { store } = this.ctx.options;
    if (store.capabilities.notifications && store.subscribe) {
      this.unsubscribe = store.subscribe(() => this.ctx.wakeup.wake());
    }
    this.done = this.run();
  }

  /** Stops listening and waits for the current pass to end (the engine is no longer running). */
  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.ctx.wakeup.wake();
    await this.done;
  }

  private async run(): Promise<void> {
    const { ctx } = this;
    const { jobs, wakeup } = ctx;
    const { pollIntervalMs } = ctx.options;
    let idleDelay = MIN_POLL_MS;
    let errorDelay = 100;
    const notifies = this.unsubscribe !== null;
    while (ctx.running) {
      wakeup.reset();
      try {
        await this.maintenance.run();
        const room = jobs.room();
        if (room <= 0 || (room < jobs.refillBatch() && jobs.executing + jobs.buffer.length > 0)) {
          // Full enough: refill in batches, not one job at a time. A finishing job wakes us
          // once there is room for a batch.
          await wakeup.sleep(pollIntervalMs);
          continue;
        }
        const sentAt = monotonicNow();
        // Jobs over a rate limit go back waiting until their window ends (`rate-limits.ts`).
        const acquired = await ctx.rateLimits.admit(await this.acquireBatch(room));
        ctx.reportSuccess('acquire');
        this.adaptPrefetch(room, acquired.length);
        errorDelay = 100;
        if (acquired.length > 0) {
          idleDelay = MIN_POLL_MS;
          this.dispatcher.take(acquired, sentAt);
          if (acquired.length === room) continue;
        }
        if (wakeup.woken || !ctx.running) continue;
        // A job that is due but was not acquirable (its exclusive scope is busy) must not make
        // the loop spin: after an empty acquisition, wait at least the adaptive idle delay.
        const floor = acquired.length === 0 ? idleDelay : 0;
        const wait = await this.idleWait(notifies ? pollIntervalMs : idleDelay, floor);
        await wakeup.sleep(wait);
        if (acquired.length === 0) idleDelay = Math.min(idleDelay * 2, pollIntervalMs, 1_000);
      } catch (error) {
        ctx.reportError(error, 'acquire');
        await wakeup.sleep(errorDelay);
        errorDelay = Math.min(errorDelay * 2, pollIntervalMs);
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
    const { concurrency, minPrefetch, maxPrefetch } = this.ctx.options;
    const { jobs } = this.ctx;
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
    const { owner, leaseMs, types, queues, tenants } = this.ctx.options;
    return { owner, limit, leaseMs, types, queues, tenants };
  }

  private async acquireBatch(limit: number): Promise<Job[]> {
    const request = this.acquireRequest(limit);
    const store = this.ctx.options.store;
    if (
      store.completeAndAcquire &&
      this.settlement.foldsCompletions() &&
      this.settlement.hasPendingCompletions()
    ) {
      const done = this.settlement.takePendingCompletions();
      try {
        const result = await store.completeAndAcquire(done.map(completionOf), request);
        this.settlement.outcomes.afterComplete(done, result);
        this.settlement.wakeForScopes(done);
        return result.jobs;
      } catch (error) {
        this.settlement.retryCompletions(done);
        throw error;
      }
    }
    return store.acquire(request);
  }

  /** Milliseconds to sleep when nothing is due: until the next due job, schedule or poll. */
  private async idleWait(max: number, floor: number): Promise<number> {
    const { store, clock, types, queues, tenants } = this.ctx.options;
    const next = await store.nextDueAt({ types, queues, tenants });
    const now = clock.now();
    let wait = max;
    if (next) wait = Math.min(wait, Math.max(floor, next.getTime() - now));
    return Math.min(wait, this.maintenance.msUntilNextPass(now));
  }
}
