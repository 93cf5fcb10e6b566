/**
 * The jobs this engine holds a lease on: prefetched ones waiting in a bounded buffer (leased,
 * not started), executing ones, and finished ones whose settle call is still being written.
 */
import { type Job, type JobCompletion, type JobRef, refOf } from '../store.js';
import { monotonicNow } from './lease-renewal.js';

/**
 * A running job's abort signal, made only when its handler reads `ctx.signal`: most handlers
 * never do, and an `AbortController` per job was ~5 % of a busy worker's CPU. An abort before
 * the first read is kept, so the signal the handler then gets is already aborted with it.
 */
export class JobAbort {
  private controller: AbortController | null = null;
  private abortedWith: { reason: unknown } | null = null;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedWith !== null;
  }

  abort(reason: unknown): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }
}

/** A job leased to this engine: buffered (not started), executing, or waiting to be settled. */
export interface HeldJob {
  job: Job;
  ref: JobRef;
  /** Set when its handler starts (null while buffered); see `JobAbort`. */
  controller: JobAbort | null;
  startedAt: number;
  /**
   * When the call that last confirmed this lease (acquisition or renewal) was sent, on this
   * process's monotonic clock (`monotonicNow`): the lease is safe until this + leaseMs.
   */
  leaseSentAt: number;
  lost: boolean;
  /** Aborted by `stop()` after its timeout: its outcome is a release, not a failure. */
  shutdownAborted: boolean;
  /** The handler returned: its complete/fail/release call reports the lease's fate itself. */
  finished: boolean;
  /**
   * A settle call for this job failed, and may have taken effect before it failed: a retry that
   * finds the lease gone must look at the job before calling the lease lost.
   */
  settleUncertain: boolean;
  /** Set when the handler succeeded: the claim plus the history fields of its completion. */
  completion?: JobCompletion;
  /** `ctx.transaction` committed: the job is completed already. */
  completedInTransaction?: boolean;
  /**
   * The latest `ctx.progress` value as JSON text, and whether it changed since a renewal last
   * wrote it (the next heartbeat, or the settle flush, sends it).
   */
  progressJson?: string;
  progressDirty?: boolean;
  /** An operator cancelled it (a renewal said so): it ends `cancelled`, whatever the handler does. */
  cancelRequested?: boolean;
}

/** Weight of the latest run in `HeldJobs.runMs`: about the last 20 runs count. */
const RUN_MS_WEIGHT = 0.05;

export class HeldJobs {
  /** Leased but not started, in acquisition order. */
  readonly buffer: HeldJob[] = [];
  /** Jobs whose handler is running. */
  executing = 0;
  /** Called when a job finished or a settle call returned (`stop()` waits on it). */
  onChange: (() => void) | null = null;
  private readonly byId = new Map<string, HeldJob>();
  /**
   * How long a handler runs, in ms: a moving average of finished runs (null before the
   * first). The adaptive prefetch holds no more jobs than start within a short horizon at
   * that pace (see `AcquisitionLoop.adaptPrefetch`).
   */
  runMs: number | null = null;

  /**
   * @param capacity `concurrency + prefetch`: the most jobs held before they settle. The
   *   acquisition loop adapts it (see `EngineOptions.prefetch`).
   */
  constructor(public capacity: number) {}

  /** Smallest acquisition while jobs are held: half the capacity, so batches stay large. */
  refillBatch(): number {
    return Math.max(1, Math.floor(this.capacity / 2));
  }

  /** A handler ran `ms` (Date.now() resolution: fast handlers read 0 or 1). */
  noteRun(ms: number): void {
    this.runMs = this.runMs === null ? ms : this.runMs + (ms - this.runMs) * RUN_MS_WEIGHT;
  }

  get size(): number {
    return this.byId.size;
  }

  values(): IterableIterator<HeldJob> {
    return this.byId.values();
  }

  /** Whether `held` is still this engine's latest lease of its job. */
  isCurrent(held: HeldJob): boolean {
    return this.byId.get(held.job.id) === held;
  }

  /** Holds freshly acquired jobs in the buffer; their leases count from `sentAt`. */
  add(jobs: readonly Job[], sentAt: number): void {
    for (const job of jobs) {
      const held: HeldJob = {
        job,
        ref: refOf(job),
        controller: null,
        startedAt: 0,
        leaseSentAt: sentAt,
        lost: false,
        shutdownAborted: false,
        finished: false,
        settleUncertain: false,
      };
      this.byId.set(job.id, held);
      this.buffer.push(held);
    }
  }

  /** Drops a held job, unless the engine has since leased the same job again. */
  forget(held: HeldJob): void {
    if (this.isCurrent(held)) this.byId.delete(held.job.id);
  }

  /**
   * Removes (in place) the items whose lease has run out on this process's clock — another
   * owner may hold the job now — and forgets those jobs. Returns how many items are left.
   */
  forgetLapsed<T>(items: T[], heldOf: (item: T) => HeldJob, leaseMs: number): number {
    const cutoff = monotonicNow() - leaseMs;
    const live = items.filter((item) => {
      const held = heldOf(item);
      if (held.leaseSentAt > cutoff) return true;
      this.forget(held);
      return false;
    });
    items.splice(0, items.length, ...live);
    return live.length;
  }

  /**
   * Removes (in place) and returns the runs, completed or cancelled but not yet written, whose
   * job this engine has leased again since: their write did not land (a completed or cancelled
   * job is gone, never handed out again), so their lease is over — and one store call must not
   * carry two settles of one job, whose result names ids, not runs.
   */
  takeSuperseded<T>(items: T[], heldOf: (item: T) => HeldJob): HeldJob[] {
    const superseded = items.filter((item) => !this.isCurrent(heldOf(item)));
    if (superseded.length === 0) return [];
    items.splice(0, items.length, ...items.filter((item) => this.isCurrent(heldOf(item))));
    return superseded.map(heldOf);
  }

  /** Jobs the engine could take now: free slots plus free prefetch buffer. */
  room(): number {
    return this.capacity - this.executing - this.buffer.length;
  }

  changed(): void {
    this.onChange?.();
  }
}
