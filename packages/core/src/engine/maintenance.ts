/**
 * Housekeeping the acquisition loop does between acquisitions, as one list of periodic tasks
 * (`Maintenance.tasks`): keeping the clock in sync with the store, recovering expired leases (a
 * dead owner's jobs become acquirable again, or go to the dead-letter area after max attempts),
 * firing due schedules (`schedule-firing.ts`), looking for due jobs no handler here runs, and
 * pruning history and signals nobody took past their retention (in the background, batch by
 * batch).
 *
 * Every interval here is measured on the monotonic clock (`monotonicClock`), never the wall
 * clock: a step of the machine's clock (NTP, a resumed VM) must neither hold these tasks back
 * for as long as it stepped back nor run them all at once.
 */
import { monotonicClock } from '../clock.js';
import { HISTORY_PRUNE_BATCH } from '../history.js';
import type { JobAdmin } from './admin.js';
import type { EngineRuntime } from './runtime.js';
import type { ScheduleFiring } from './schedule-firing.js';

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
      // Every pass: the schedules keep their own next check time (`schedule-firing.ts`).
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
