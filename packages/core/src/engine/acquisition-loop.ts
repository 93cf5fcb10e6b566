/**
 * The acquisition loop and what it does between acquisitions.
 * - `AcquisitionLoop`: leases up to `concurrency + prefetch` jobs in batches and hands them to
 *   dispatch; between acquisitions it runs the housekeeping and sleeps until the next due job,
 *   schedule or poll.
 * - `Maintenance`: the housekeeping, as one list of periodic tasks — clock sync, lease
 *   recovery, schedule firing, the unhandled-type check, history pruning.
 * - `ScheduleFiring`: when the loop next runs the schedule runner.
 *
 * Each section below keeps its own header.
 */
import { monotonicClock, monotonicNow } from '../clock.js';
import { HISTORY_PRUNE_BATCH } from '../rules.js';
import type { ScheduleRunner } from '../schedule/index.js';
import type { AcquireRequest, Job } from '../store.js';
import type { JobAdmin } from './admin.js';
import type { Dispatcher } from './dispatch.js';
import { MIN_POLL_MS, PREFETCH_HORIZON_MS } from './options.js';
import type { EngineRuntime } from './runtime.js';
import { type CompletionFold, completionOf } from './settlement.js';

// ─── AcquisitionLoop ─────────────────────────────────────────────────────────────────────────────
/*
 * The acquisition loop: leases up to `concurrency + prefetch` jobs in batches and hands them to
 * dispatch; between acquisitions it does the housekeeping (`acquisition-loop.ts`) and sleeps until
 * the next due job, schedule or poll.
 *
 * A job enqueued through a running engine wakes the loop at once; other processes are woken by
 * the store's notifications, and polling (adaptive when the store has none) is the fallback.
 * A pass woken only for housekeeping acquires nothing unless the housekeeping made jobs
 * acquirable (recovered leases, fired schedules): an idle engine's statements are its poll's.
 * Pending completions ride on the next acquisition when the store has `completeAndAcquire` and
 * runs one call at a time (`Settlement.foldsCompletions`).
 */

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
        // Jobs over a rate limit go back waiting until their window ends (`runtime.ts`).
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
      // those expected to start within one round trip too (see `dispatch.ts`).
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

// ─── Maintenance ─────────────────────────────────────────────────────────────────────────────────
/*
 * Housekeeping the acquisition loop does between acquisitions, as one list of periodic tasks
 * (`Maintenance.tasks`): keeping the clock in sync with the store, recovering expired leases (a
 * dead owner's jobs become acquirable again, or go to the dead-letter area after max attempts),
 * firing due schedules (`acquisition-loop.ts`), looking for due jobs no handler here runs, and
 * pruning history and signals nobody took past their retention (in the background, batch by
 * batch).
 *
 * Every interval here is measured on the monotonic clock (`monotonicClock`), never the wall
 * clock: a step of the machine's clock (NTP, a resumed VM) must neither hold these tasks back
 * for as long as it stepped back nor run them all at once.
 */

const CLOCK_SYNC_INTERVAL_MS = 60_000;
/**
 * The wall clock moved this much more or less than the monotonic clock since the last sync: it
 * was stepped, or the machine slept (a suspended VM's monotonic clock stands still), so the
 * store's clock is read again at once.
 */
const CLOCK_STEP_MS = 1_000;
/** How often an engine looks for due jobs no handler of it runs (see `JobStats.unhandled`). */
const UNHANDLED_CHECK_INTERVAL_MS = 30_000;
/** How often an engine prunes history past its retention. */
export const HISTORY_PRUNE_INTERVAL_MS = 5 * 60_000;
/** How often an engine deletes signals nobody took, past `signalRetention`. */
export const SIGNAL_PRUNE_INTERVAL_MS = 5 * 60_000;
/** Batches per pruning pass: a backlog is worked off over several passes, never in one go. */
const PRUNE_BATCHES_PER_PASS = 20;
/** Signals deleted per statement: a short write that holds few row locks. */
export const SIGNAL_PRUNE_BATCH = 500;

/**
 * One housekeeping task. A pass runs, in list order, every task that is due: `everyMs` after it
 * last ran (on the monotonic clock), or whenever `due` says so; without either, on every pass.
 * A `background` task is started and not awaited (acquisition never waits for it), and is not
 * started again while it still runs. `run` resolves `true` when the task may have made jobs
 * acquirable, so the pass acquires even when no poll is due.
 */
interface PeriodicTask {
  readonly name: string;
  readonly everyMs?: () => number;
  readonly due?: (local: number) => boolean;
  readonly background?: boolean;
  run(): Promise<unknown>;
}

export class Maintenance {
  /** Monotonic and wall-clock readings at the last clock sync. */
  private lastClockSyncAt = Number.NEGATIVE_INFINITY;
  private wallAtClockSync = 0;
  /** When each task last started (monotonic ms), by name. */
  private readonly lastRunAt = new Map<string, number>();
  /** Background tasks still running, by name. */
  private readonly inBackground = new Set<string>();
  /** Types already reported, so each is logged once until its jobs are taken care of. */
  private reportedUnhandled = new Set<string>();

  /** Everything an engine does between acquisitions, in the order a pass runs it. */
  private readonly tasks: readonly PeriodicTask[] = [
    {
      // The store's clock, read again every minute or at once after a wall-clock step.
      name: 'clock sync',
      due: (local) => Boolean(this.rt.options.syncedClock) && this.clockSyncDue(local),
      run: () => this.syncClock(),
    },
    {
      // A dead owner's jobs become acquirable again (or dead-letter after max attempts).
      name: 'lease recovery',
      everyMs: () => this.recoverIntervalMs(),
      run: () => this.recoverLeases(),
    },
    {
      // Every pass: the schedules keep their own next check time (`acquisition-loop.ts`).
      name: 'schedule firing',
      run: () => this.timers.fireDueSchedules(),
    },
    {
      name: 'unhandled-type check',
      everyMs: () => UNHANDLED_CHECK_INTERVAL_MS,
      run: () => this.checkUnhandled(),
    },
    {
      name: 'history pruning',
      everyMs: () => HISTORY_PRUNE_INTERVAL_MS,
      background: true,
      run: () => this.pruneHistory(),
    },
    {
      name: 'signal pruning',
      everyMs: () => SIGNAL_PRUNE_INTERVAL_MS,
      background: true,
      run: () => this.pruneSignals(),
    },
  ];

  constructor(
    private readonly rt: EngineRuntime,
    private readonly timers: ScheduleFiring,
    private readonly admin: JobAdmin,
  ) {}

  async syncClock(): Promise<void> {
    const { syncedClock } = this.rt.options;
    if (!syncedClock) return;
    await syncedClock.sync();
    this.lastClockSyncAt = monotonicClock.now();
    this.wallAtClockSync = Date.now();
  }

  /**
   * One housekeeping pass: each task of the list runs when it is due. True when a task may have
   * made jobs acquirable (it recovered leases, or looked at the schedules).
   */
  async run(): Promise<boolean> {
    const local = monotonicClock.now();
    let madeAcquirable = false;
    for (const task of this.tasks) {
      if (!this.isDue(task, local)) continue;
      this.lastRunAt.set(task.name, local);
      if (!task.background) {
        if ((await task.run()) === true) madeAcquirable = true;
        continue;
      }
      this.inBackground.add(task.name);
      void task
        .run()
        .catch(() => undefined)
        .finally(() => this.inBackground.delete(task.name));
    }
    return madeAcquirable;
  }

  private isDue(task: PeriodicTask, local: number): boolean {
    if (task.background && this.inBackground.has(task.name)) return false;
    if (task.due) return task.due(local);
    if (!task.everyMs) return true;
    const last = this.lastRunAt.get(task.name) ?? Number.NEGATIVE_INFINITY;
    return local - last >= task.everyMs();
  }

  /** True when jobs became acquirable again (requeued, or released unstarted). */
  private async recoverLeases(): Promise<boolean> {
    const recovered = await this.rt.options.store.recoverExpiredLeases(1000);
    if (recovered.requeued.length > 0 || recovered.deadlettered.length > 0) {
      this.rt.emit('leases-recovered', recovered);
    }
    return recovered.requeued.length > 0 || (recovered.released?.length ?? 0) > 0;
  }

  /** The clock sync is due: its interval passed, or the wall clock stepped since the last one. */
  private clockSyncDue(local: number): boolean {
    const elapsed = local - this.lastClockSyncAt;
    if (elapsed >= CLOCK_SYNC_INTERVAL_MS) return true;
    const stepped = Date.now() - this.wallAtClockSync - elapsed;
    if (Math.abs(stepped) < CLOCK_STEP_MS) return false;
    this.rt.options.logger.info(
      "this machine's clock stepped since the store's clock was last read; reading it again",
      { steppedMs: Math.round(stepped) },
    );
    return true;
  }

  /**
   * Deletes history records past the retention, `HISTORY_PRUNE_BATCH` per short transaction,
   * until a batch comes back short or another process holds the pruning lock. With history in
   * partitions, up to the last partition boundary before the retention (`prunedRetention`).
   */
  async pruneHistory(): Promise<number> {
    const { store, history } = this.rt.options;
    const kept = store.history;
    if (!kept) return 0;
    let total = 0;
    const retentionMs = prunedRetention(
      history.retentionMs,
      kept.partitionMs,
      this.rt.options.clock.now(),
    );
    try {
      for (let batch = 0; batch < PRUNE_BATCHES_PER_PASS && this.rt.running; batch++) {
        const pruned = await kept.prune(retentionMs, HISTORY_PRUNE_BATCH);
        if (pruned === null) break;
        total += pruned;
        if (pruned < HISTORY_PRUNE_BATCH) break;
      }
      this.rt.reportSuccess('prune history');
      if (total > 0) this.rt.emit('history-pruned', { count: total });
    } catch (error) {
      // After stop() the store may close under a batch in flight: nothing to report then.
      if (this.rt.running) this.rt.reportError(error, 'prune history');
    }
    return total;
  }

  /**
   * Deletes signals nobody took past `signalRetention`, `SIGNAL_PRUNE_BATCH` per statement, until
   * a batch comes back short. Several engines may prune at once: each deletes what is left.
   */
  async pruneSignals(): Promise<number> {
    const { store, signalRetentionMs } = this.rt.options;
    const waits = store.waits;
    if (!waits) return 0;
    let total = 0;
    try {
      for (let batch = 0; batch < PRUNE_BATCHES_PER_PASS && this.rt.running; batch++) {
        const pruned = await waits.pruneSignals(signalRetentionMs, SIGNAL_PRUNE_BATCH);
        total += pruned;
        if (pruned < SIGNAL_PRUNE_BATCH) break;
      }
      this.rt.reportSuccess('prune signals');
      if (total > 0) this.rt.emit('signals-pruned', { count: total });
    } catch (error) {
      // After stop() the store may close under a batch in flight: nothing to report then.
      if (this.rt.running) this.rt.reportError(error, 'prune signals');
    }
    return total;
  }

  /** Says so (event, one warning per type) when due jobs wait that no handler here runs. */
  private async checkUnhandled(): Promise<void> {
    const types = await this.admin.unhandled();
    const now = new Set(types.map((t) => t.type));
    for (const overdue of types) {
      if (this.reportedUnhandled.has(overdue.type)) continue;
      this.rt.options.logger.warn(
        `${overdue.count} job(s) of type "${overdue.type}" have waited since ${overdue.oldestDueAt.toISOString()} and this engine has no handler for it; is a worker for it running?`,
        { type: overdue.type, count: overdue.count },
      );
    }
    this.reportedUnhandled = now;
    if (types.length > 0) this.rt.emit('unhandled-jobs', { types });
  }

  /**
   * Milliseconds until the next pass has work: the next schedule check (`clockNow` is the store
   * clock's now), or the next crash-recovery pass, so a dead owner's jobs are taken over in time.
   */
  msUntilNextPass(clockNow: number): number {
    const schedules = Math.max(0, this.timers.nextScheduleCheckAt - clockNow);
    const lastRecoverAt = this.lastRunAt.get('lease recovery') ?? Number.NEGATIVE_INFINITY;
    const recovery = Math.max(0, lastRecoverAt + this.recoverIntervalMs() - monotonicClock.now());
    return Math.min(schedules, recovery);
  }

  /** Expired leases are looked for every half lease: a dead owner's jobs wait at most ~1.5 leases. */
  private recoverIntervalMs(): number {
    return Math.max(50, this.rt.options.leaseMs / 2);
  }
}

/**
 * The retention to prune with: `retentionMs` itself, or — when the store keeps history in
 * partitions `partitionMs` wide and the retention spans at least one — stretched back to the
 * partition boundary before `now - retentionMs` (boundaries at multiples of `partitionMs` since
 * the epoch, UTC days for a day), so pruning drops whole partitions and deletes no row of a
 * partition that is still partly kept. A record is then kept for the retention plus less than
 * one partition.
 */
export function prunedRetention(
  retentionMs: number,
  partitionMs: number | undefined,
  now: number,
): number {
  if (partitionMs === undefined || retentionMs < partitionMs) return retentionMs;
  const cutoff = now - retentionMs;
  return now - (cutoff - (((cutoff % partitionMs) + partitionMs) % partitionMs));
}

// ─── ScheduleFiring ──────────────────────────────────────────────────────────────────────────────
/*
 * Schedule firing. Due timers become acquirable in the store (a due `timer` job is acquired like
 * an `async` one), so the engine's part is firing schedules: a repeating schedule is a timer
 * whose occurrences the `ScheduleRunner` fires (each exactly once, whoever fires it); the
 * acquisition loop runs it when the next occurrence is due, or at once after a schedule was
 * defined, resumed or ended. (The `timer-fired` event of a job that waited for its due time is
 * dispatch's, by `firedFromTimer` in `rules.ts`.)
 */

export class ScheduleFiring {
  /** Store-clock time of the next schedule pass; 0 means on the loop's next pass. */
  private nextCheckAt = 0;
  /** Bumped whenever schedules may need firing now; a pass that saw an older value runs again. */
  private generation = 0;

  constructor(
    private readonly rt: EngineRuntime,
    private readonly schedules: ScheduleRunner,
  ) {}

  /** Store-clock time the loop should next fire schedules. */
  get nextScheduleCheckAt(): number {
    return this.nextCheckAt;
  }

  /** Asks the loop to run the schedule runner on its next pass. */
  fireSchedulesSoon(): void {
    this.generation += 1;
    this.nextCheckAt = 0;
  }

  /**
   * Fires the schedules whose occurrence is due, when it is time to look. True when it looked
   * (it may have created jobs).
   */
  async fireDueSchedules(): Promise<boolean> {
    const { clock, pollIntervalMs } = this.rt.options;
    if (clock.now() < this.nextCheckAt) return false;
    const generation = this.generation;
    const next = await this.schedules.fireDue();
    const fallback = clock.now() + pollIntervalMs;
    // A schedule defined, resumed or ended during the pass must not wait for the next one.
    this.nextCheckAt =
      generation !== this.generation ? 0 : next ? Math.min(next.getTime(), fallback) : fallback;
    return true;
  }
}
