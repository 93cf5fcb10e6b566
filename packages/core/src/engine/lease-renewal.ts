/**
 * Lease renewal: one heartbeat every `leaseMs / 3` renews the leases of all held jobs
 * (buffered, starting, running and settling) in one store call, and the local lease deadline
 * (invariant 16): a lease counts as lost on this process's monotonic clock at
 * `sent + leaseMs − margin`, where `sent` is when the call that last confirmed it was sent —
 * whether or not the store ever answers. The deadline has its own timer, so a renewal stuck on
 * a silent network cannot delay it, and every read of a handler's `ctx.signal` checks it too
 * (`JobAbort`), so a handler resumed after a pause is told before its next step. The store's
 * lease, counted from when it received the call, ends later.
 */
import { monotonicNow } from '../clock.js';
import { cancelRequested } from './dispatch.js';
import { type EngineRuntime, type HeldJob, leaseMargin } from './runtime.js';
import { renew, renewalRef, type Settler } from './settlement.js';

/** How the heartbeat is doing, for `engine.health()`. */
export interface RenewalStatus {
  /** When a renewal call last succeeded (epoch ms of this process's clock); null before one. */
  lastOkAt: number | null;
  /** The last renewal call failed. */
  lastFailed: boolean;
  /** When the renewal call in flight was sent (`monotonicNow`); null when none is. */
  inFlightSince: number | null;
}

/** The heartbeat's period: three renewals per lease. */
export function heartbeatIntervalMs(leaseMs: number): number {
  return Math.max(10, Math.floor(leaseMs / 3));
}

export class LeaseRenewal {
  readonly status: RenewalStatus = { lastOkAt: null, lastFailed: false, inFlightSince: null };
  private heartbeat: NodeJS.Timeout | null = null;
  private deadline: NodeJS.Timeout | null = null;
  private renewing = false;

  constructor(
    private readonly rt: EngineRuntime,
    private readonly settlement: Settler,
  ) {
    // A read of a running handler's signal found its deadline passed.
    rt.jobs.lost = (held) => this.markLost(held);
  }

  /** Starts the heartbeat and the deadline check. */
  start(): void {
    const { leaseMs } = this.rt.options;
    this.heartbeat ??= setInterval(() => void this.renewLeases(), heartbeatIntervalMs(leaseMs));
    // Checked often enough that a deadline is never missed by more than a quarter of the margin.
    const check = Math.max(5, Math.floor(leaseMargin(leaseMs) / 4));
    this.deadline ??= setInterval(() => this.enforceDeadlines(), check);
    this.deadline.unref();
  }

  /** Lets the process exit while the heartbeat still runs (after stop(), for orphans). */
  unref(): void {
    this.heartbeat?.unref();
  }

  stop(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.deadline) clearInterval(this.deadline);
    this.heartbeat = null;
    this.deadline = null;
  }

  /** Heartbeat: renews every held lease in one store call; aborts jobs whose lease is gone. */
  private async renewLeases(): Promise<void> {
    const { jobs } = this.rt;
    if (this.renewing || jobs.size === 0) return;
    this.renewing = true;
    const sentAt = monotonicNow();
    const holding = [...jobs.values()].filter((h) => h.phase !== 'lost' && h.phase !== 'done');
    this.status.inFlightSince = sentAt;
    try {
      const answers = await renew(
        this.rt,
        holding,
        holding.map((held) => renewalRef(this.rt, held)),
      );
      this.rt.reportSuccess('renew leases');
      this.status.lastOkAt = Date.now();
      this.status.lastFailed = false;
      answers.forEach((answer, i) => {
        const held = holding[i] as HeldJob;
        // A job settled while the renewal was in flight is reported lost by it; that is not a
        // lost lease. Settling jobs learn their fate from their own settle call.
        if (held.phase === 'settling' || held.phase === 'done' || !jobs.isCurrent(held)) return;
        if (answer === 'lost') this.markLost(held);
        else if (held.phase !== 'lost') {
          jobs.confirmed(held, sentAt);
          if (answer === 'cancel-requested') cancelRequested(this.rt, this.settlement, held);
        }
      });
    } catch (error) {
      this.status.lastFailed = true;
      this.rt.reportError(error, 'renew leases');
    } finally {
      this.renewing = false;
      this.status.inFlightSince = null;
    }
    this.enforceDeadlines();
  }

  /**
   * Every lease not confirmed in time: a running job's handler is stopped (lost); a buffered
   * one is given back (a release, fenced by its token: it changes nothing when another owner
   * took the job meanwhile). Starting and settling jobs learn it from their own call.
   */
  private enforceDeadlines(): void {
    const { jobs } = this.rt;
    const now = monotonicNow();
    const lapsed: HeldJob[] = [];
    for (const held of jobs.values()) {
      if (held.phase === 'running' && !jobs.deadlineAhead(held, now)) this.markLost(held);
      else if (held.phase === 'buffered' && !jobs.deadlineAhead(held, now)) lapsed.push(held);
    }
    if (lapsed.length > 0) {
      for (const held of lapsed) jobs.toSettling(held);
      this.settlement.queueRelease(lapsed);
      this.settlement.settleSoon();
    }
  }

  private markLost(held: HeldJob): void {
    if (!this.rt.jobs.lose(held)) return;
    this.rt.reportLeaseLost(held);
  }
}
