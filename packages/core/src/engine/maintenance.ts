/**
 * Housekeeping the acquisition loop does between acquisitions: keeping the clock in sync with
 * the store, recovering expired leases (a dead owner's jobs become acquirable again, or go to
 * the dead-letter area after max attempts), firing due schedules (`timer-firing.ts`), and
 * pruning history past its retention (in the background, batch by batch).
 */
import { HISTORY_PRUNE_BATCH } from '../history.js';
import type { JobAdmin } from './admin.js';
import type { EngineContext } from './context.js';
import type { TimerFiring } from './timer-firing.js';

const CLOCK_SYNC_INTERVAL_MS = 60_000;
/** How often an engine looks for due jobs no handler of it runs (see `JobStats.unhandled`). */
const UNHANDLED_CHECK_INTERVAL_MS = 5 * 60_000;
/** How often an engine prunes history past its retention. */
export const HISTORY_PRUNE_INTERVAL_MS = 5 * 60_000;
/** Batches per pruning pass: a backlog is worked off over several passes, never in one go. */
const PRUNE_BATCHES_PER_PASS = 20;

export class Maintenance {
  private lastRecoverAt = 0;
  private lastClockSyncAt = 0;
  private lastUnhandledCheckAt = Number.NEGATIVE_INFINITY;
  private lastPruneAt = Number.NEGATIVE_INFINITY;
  private pruning: Promise<void> | null = null;
  /** Types already reported, so each is logged once until its jobs are taken care of. */
  private reportedUnhandled = new Set<string>();

  constructor(
    private readonly ctx: EngineContext,
    private readonly timers: TimerFiring,
    private readonly admin: JobAdmin,
  ) {}

  async syncClock(): Promise<void> {
    const { syncedClock } = this.ctx.options;
    if (!syncedClock) return;
    await syncedClock.sync();
    this.lastClockSyncAt = Date.now();
  }

  /** One housekeeping pass: each task runs when its interval has passed. */
  async run(): Promise<void> {
    const local = Date.now();
    if (this.ctx.options.syncedClock && local - this.lastClockSyncAt >= CLOCK_SYNC_INTERVAL_MS) {
      await this.syncClock();
    }
    if (local - this.lastRecoverAt >= this.recoverIntervalMs()) {
      this.lastRecoverAt = local;
      const recovered = await this.ctx.options.store.recoverExpiredLeases(1000);
      if (recovered.requeued.length > 0 || recovered.deadlettered.length > 0) {
        this.ctx.emit('leases-recovered', recovered);
      }
    }
    await this.timers.fireDueSchedules();
    if (local - this.lastUnhandledCheckAt >= UNHANDLED_CHECK_INTERVAL_MS) {
      this.lastUnhandledCheckAt = local;
      await this.checkUnhandled();
    }
    if (local - this.lastPruneAt >= HISTORY_PRUNE_INTERVAL_MS && !this.pruning) {
      this.lastPruneAt = local;
      // In the background: acquisition never waits for pruning.
      this.pruning = this.pruneHistory().then(
        () => undefined,
        () => undefined,
      );
      void this.pruning.finally(() => {
        this.pruning = null;
      });
    }
  }

  /**
   * Deletes history records past the retention, `HISTORY_PRUNE_BATCH` per short transaction,
   * until a batch comes back short or another process holds the pruning lock.
   */
  async pruneHistory(): Promise<number> {
    const { store, history } = this.ctx.options;
    if (!store.pruneHistory) return 0;
    let total = 0;
    try {
      for (let batch = 0; batch < PRUNE_BATCHES_PER_PASS && this.ctx.running; batch++) {
        const pruned = await store.pruneHistory(history.retentionMs, HISTORY_PRUNE_BATCH);
        if (pruned === null) break;
        total += pruned;
        if (pruned < HISTORY_PRUNE_BATCH) break;
      }
      this.ctx.reportSuccess('prune history');
      if (total > 0) this.ctx.emit('history-pruned', { count: total });
    } catch (error) {
      // After stop() the store may close under a batch in flight: nothing to report then.
      if (this.ctx.running) this.ctx.reportError(error, 'prune history');
    }
    return total;
  }

  /** Says so (event, one warning per type) when due jobs wait that no handler here runs. */
  private async checkUnhandled(): Promise<void> {
    const types = await this.admin.unhandled();
    const now = new Set(types.map((t) => t.type));
    for (const overdue of types) {
      if (this.reportedUnhandled.has(overdue.type)) continue;
      this.ctx.options.logger.warn(
        `${overdue.count} job(s) of type "${overdue.type}" have waited since ${overdue.oldestDueAt.toISOString()} and this engine has no handler for it; is a worker for it running?`,
        { type: overdue.type, count: overdue.count },
      );
    }
    this.reportedUnhandled = now;
    if (types.length > 0) this.ctx.emit('unhandled-jobs', { types });
  }

  /**
   * Milliseconds until the next pass has work: the next schedule check (`clockNow` is the store
   * clock's now), or the next crash-recovery pass, so a dead owner's jobs are taken over in time.
   */
  msUntilNextPass(clockNow: number): number {
    const schedules = Math.max(0, this.timers.nextScheduleCheckAt - clockNow);
    const recovery = Math.max(0, this.lastRecoverAt + this.recoverIntervalMs() - Date.now());
    return Math.min(schedules, recovery);
  }

  /** Expired leases are looked for every half lease: a dead owner's jobs wait at most ~1.5 leases. */
  private recoverIntervalMs(): number {
    return Math.max(50, this.ctx.options.leaseMs / 2);
  }
}
