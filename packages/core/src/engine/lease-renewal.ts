/**
 * Lease renewal: one heartbeat every `leaseMs / 3` renews the leases of all held jobs
 * (buffered, executing and settling) in one store call, and the local lease deadline
 * (invariant 16): a lease counts as lost on this process's monotonic clock at
 * `sent + leaseMs − margin`, where `sent` is when the call that last confirmed it was sent —
 * whether or not the store ever answers. The deadline has its own timer, so a renewal stuck on
 * a silent network cannot delay it: the handler's `ctx.signal` aborts before another owner can
 * acquire the job (the store's lease, counted from when it received the call, ends later).
 */
import { performance } from 'node:perf_hooks';
import { LockLostError } from '../errors.js';
import type { LeaseRenewalRef } from '../store.js';
import { cancelRequested } from './cancellation.js';
import type { EngineContext } from './context.js';
import type { HeldJob } from './held-jobs.js';
import type { Settlement } from './settlement.js';

/** This process's monotonic clock, in ms: wall-clock jumps never move a lease deadline. */
export function monotonicNow(): number {
  return performance.now();
}

/**
 * How long before the lease ends on the store's clock this owner gives it up: room for a late
 * timer and for the handler to see its signal. A fifth of the lease, at most 5 s; checked every
 * quarter of that, so at least 15 % of the lease is left when the handler is aborted.
 */
export function leaseMargin(leaseMs: number): number {
  return Math.min(5_000, Math.max(1, Math.floor(leaseMs / 5)));
}

/**
 * Progress reported after the last renewal is written before the job settles (one renewal
 * call for the whole batch, only when any finished job has such progress), so the final
 * value is durable and goes to history. A failure here is reported; the settle goes on.
 */
export async function writeFinalProgress(
  ctx: EngineContext,
  finished: readonly HeldJob[],
): Promise<void> {
  const { store, owner, leaseMs } = ctx.options;
  const dirty = finished.filter((held) => held.progressDirty && !held.lost);
  if (dirty.length === 0 || store.capabilities.progress !== true) return;
  const refs: LeaseRenewalRef[] = dirty.map((held) => ({
    ...held.ref,
    progressJson: held.progressJson ?? null,
  }));
  try {
    await store.renewLeases(owner, leaseMs, refs);
    for (const held of dirty) held.progressDirty = false;
  } catch (error) {
    ctx.reportError(error, 'write progress');
  }
}

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
    private readonly ctx: EngineContext,
    private readonly settlement: Settlement,
  ) {}

  /** Starts the heartbeat and the deadline check. */
  start(): void {
    const { leaseMs } = this.ctx.options;
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
    const { jobs } = this.ctx;
    const { store, owner, leaseMs } = this.ctx.options;
    if (this.renewing || jobs.size === 0) return;
    this.renewing = true;
    const sentAt = monotonicNow();
    const holding = [...jobs.values()].filter((h) => !h.lost);
    // Progress reported since the last renewal rides in the same statement.
    const writesProgress = store.capabilities.progress === true;
    const refs: LeaseRenewalRef[] = holding.map((h) =>
      writesProgress && h.progressDirty
        ? { ...h.ref, progressJson: h.progressJson ?? null }
        : h.ref,
    );
    this.status.inFlightSince = sentAt;
    try {
      const result = await store.renewLeases(owner, leaseMs, refs);
      this.ctx.reportSuccess('renew leases');
      this.status.lastOkAt = Date.now();
      this.status.lastFailed = false;
      const lost = new Set(result.lost);
      const cancelled = new Set(result.cancelRequested ?? []);
      refs.forEach((ref, i) => {
        const held = holding[i] as HeldJob;
        // Written, unless the handler reported again while the call was in flight.
        if (ref.progressJson != null && held.progressJson === ref.progressJson) {
          held.progressDirty = false;
        }
      });
      for (const held of holding) {
        // A job settled while the renewal was in flight is reported lost by it; that is not a
        // lost lease. Finished jobs learn their fate from their own settle call.
        if (held.finished || !jobs.isCurrent(held)) continue;
        if (lost.has(held.job.id)) this.markLost(held);
        else if (!held.lost) {
          held.leaseSentAt = Math.max(held.leaseSentAt, sentAt);
          if (cancelled.has(held.job.id)) cancelRequested(this.ctx, this.settlement, held);
        }
      }
    } catch (error) {
      this.status.lastFailed = true;
      this.ctx.reportError(error, 'renew leases');
    } finally {
      this.renewing = false;
      this.status.inFlightSince = null;
    }
    this.enforceDeadlines();
  }

  /** Counts as lost every lease not confirmed in time, and stops its handler. */
  private enforceDeadlines(): void {
    const { leaseMs } = this.ctx.options;
    const limit = monotonicNow() - (leaseMs - leaseMargin(leaseMs));
    for (const held of this.ctx.jobs.values()) {
      if (!held.lost && !held.finished && held.leaseSentAt <= limit) this.markLost(held);
    }
  }

  private markLost(held: HeldJob): void {
    if (held.lost) return;
    held.lost = true;
    const { jobs } = this.ctx;
    const index = jobs.buffer.indexOf(held);
    if (index >= 0) jobs.buffer.splice(index, 1);
    const executing = held.controller !== null && !this.settlement.isSettling(held);
    if (!executing) jobs.forget(held);
    held.controller?.abort(new LockLostError(held.job.id));
    this.ctx.reportLeaseLost(held);
  }
}
