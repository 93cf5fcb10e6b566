/**
 * The jobs this engine holds a lease on, and the one place their phase changes (DESIGN
 * invariants 4, 15, 16, 21). Every held job is in exactly one phase:
 *
 * ```
 *   buffered ──► starting ──► running ──► settling ──► done
 *      │            │            │           │
 *      └────────────┴────────────┴───────────┴──► lost
 * ```
 * - `buffered`: leased, waiting in the bounded prefetch buffer, its handler not started. The
 *   store may already record it as started (`startMarked`: acquired to start at once, or marked
 *   ahead for handlers faster than a round trip).
 * - `starting`: its start is being recorded (a renewal with `start`); it holds a slot.
 * - `running`: its handler runs.
 * - `settling`: its complete / fail / release / cancel is being written.
 * - `done`: settled, forgotten. `lost`: the lease is gone (the store said so, or its local
 *   deadline passed); nothing more is written for it, and a handler still running is aborted.
 *
 * A job moves from `buffered`/`starting` to `running` only while its local lease deadline is
 * ahead (`sent + leaseMs − margin` on this process's monotonic clock, `leaseMargin`), so a late
 * acquisition answer or a stalled process never starts a lease that may have lapsed. Other
 * parts of the engine ask this module; only it assigns `phase`.
 */
import { monotonicNow } from '../clock.js';
import { LockLostError } from '../errors.js';
import { type Job, type JobCompletion, type JobRef, refOf } from '../store.js';
import type { RunChildren, RunSteps } from './run-steps.js';

/**
 * How long before the lease ends on the store's clock this owner gives it up: room for a late
 * timer and for the handler to see its signal. A fifth of the lease, at most 5 s.
 */
export function leaseMargin(leaseMs: number): number {
  return Math.min(5_000, Math.max(1, Math.floor(leaseMs / 5)));
}

export type JobPhase = 'buffered' | 'starting' | 'running' | 'settling' | 'done' | 'lost';

/**
 * A running job's abort signal, made only when its handler reads `ctx.signal`: most handlers
 * never do, and an `AbortController` per job was ~5 % of a busy worker's CPU. An abort before
 * the first read is kept, so the signal the handler then gets is already aborted with it.
 *
 * Every read of the signal — `ctx.signal`, and `aborted`, `reason` and `throwIfAborted()` on
 * the signal itself — first checks the lease's local deadline (`checkDeadline`): a handler
 * resumed after a pause (SIGSTOP, a stopped VM, a long synchronous step) finds the signal
 * aborted before its next step, even when its own timer runs before the engine's.
 */
export class JobAbort {
  private controller: AbortController | null = null;
  private abortedWith: { reason: unknown } | null = null;

  /** `held`'s deadline is checked by `jobs` (no closure per job: one is made on first read). */
  constructor(
    private readonly jobs: Pick<HeldJobs, 'checkDeadline'>,
    private readonly held: HeldJob,
  ) {}

  get signal(): AbortSignal {
    this.jobs.checkDeadline(this.held);
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
      checkOnRead(this.controller.signal, () => this.jobs.checkDeadline(this.held));
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

/** Makes `aborted`, `reason` and `throwIfAborted()` of `signal` run `check` first. */
function checkOnRead(signal: AbortSignal, check: () => void): void {
  const proto = AbortSignal.prototype;
  for (const name of ['aborted', 'reason'] as const) {
    Object.defineProperty(signal, name, {
      configurable: true,
      get() {
        check();
        return Reflect.get(proto, name, signal);
      },
    });
  }
  Object.defineProperty(signal, 'throwIfAborted', {
    configurable: true,
    value() {
      check();
      proto.throwIfAborted.call(signal);
    },
  });
}

/** A job leased to this engine (see the file comment for its phases). */
export interface HeldJob {
  job: Job;
  ref: JobRef;
  /** Written by `HeldJobs` only. */
  readonly phase: JobPhase;
  /** The store records the job as started (`Job.startedAt`): it may start without a renewal. */
  startMarked: boolean;
  /**
   * When its start was recorded while it waited in the buffer (acquired to start, or marked
   * ahead; monotonic ms): taken back if it has not started soon after (`StartMarks`).
   */
  markedAheadAt: number | null;
  /** Set when its handler starts (null before); see `JobAbort`. */
  controller: JobAbort | null;
  /** When its handler started (`Date.now()`), 0 before. */
  startedAt: number;
  /** Its handler has not returned yet (running, or lost while running). */
  handlerActive: boolean;
  /**
   * When the call that last confirmed this lease (acquisition or renewal) was sent, on this
   * process's monotonic clock (`monotonicNow`): the lease is safe until this + leaseMs.
   */
  leaseSentAt: number;
  /** Aborted by `stop()` after its timeout: its outcome is a release, not a failure. */
  shutdownAborted: boolean;
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
   * What opened the store transaction this run is inside (`ctx.transaction` or a
   * `transaction: true` step), while it is open: another one of the same job is refused.
   */
  openTransaction?: string;
  /**
   * `ctx.sleep` ended the run: the job goes back to waiting for `delayMs` with `stepsJson` (its
   * step list with the sleep's checkpoint) instead of settling (see `waits.ts`).
   */
  wait?: {
    name: string;
    until: number;
    delayMs: number;
    stepsJson: string;
    /** `ctx.waitFor`: the signal it waits for (a signal makes it due at once). */
    signal?: { name: string; key: string };
  };
  /**
   * The latest `ctx.progress` value as JSON text, and whether it changed since a renewal last
   * wrote it (the next heartbeat, or the settle flush, sends it).
   */
  progressJson?: string;
  progressDirty?: boolean;
  /**
   * The job's log (`ctx.log`) as JSON text, and whether it changed since a renewal last wrote
   * it (written like progress).
   */
  logsJson?: string;
  logsDirty?: boolean;
  /** The run outlived its time limit: it fails with a `JobTimeoutError` when it returns. */
  timedOut?: boolean;
  /** The time limit's timer, cleared when the handler returns. */
  limitTimer?: NodeJS.Timeout;
  /** An operator cancelled it (a renewal said so): it ends `cancelled`, whatever the handler does. */
  cancelRequested?: boolean;
  /** Its durable steps (`ctx.step`), made on the first call of this run. */
  steps?: RunSteps;
  /** Its `ctx.run` calls waiting for their children, made on the first call of this run. */
  children?: RunChildren;
}

/** The phase field, writable here only. */
type Mutable = { -readonly [K in keyof HeldJob]: HeldJob[K] };

/** Weight of the latest sample in the moving averages: about the last 20 count. */
const AVERAGE_WEIGHT = 0.05;

export class HeldJobs {
  /** Jobs whose handler has not returned (running, or lost while running). */
  executing = 0;
  /** Jobs in phase `starting` (each holds a slot). */
  starting = 0;
  /** Called when a job finished or a settle call returned (`stop()` waits on it). */
  onChange: (() => void) | null = null;
  /** Leased but not started, in acquisition order; entries no longer `buffered` are skipped. */
  private queue: HeldJob[] = [];
  private queueHead = 0;
  private buffered = 0;
  private readonly byId = new Map<string, HeldJob>();
  /**
   * How long a handler runs, in ms: a moving average of finished runs (null before the
   * first). The adaptive prefetch holds no more jobs than start within a short horizon at
   * that pace (see `AcquisitionLoop.adaptPrefetch`), and start marks go ahead by one round trip.
   */
  runMs: number | null = null;
  /** How long a store call that leases or renews takes, in ms: a moving average (null before). */
  roundTripMs: number | null = null;

  /**
   * @param capacity `concurrency + prefetch`: the most jobs held before they settle. The
   *   acquisition loop adapts it (see `EngineOptions.prefetch`).
   * @param leaseMs the lease length, for local deadlines.
   */
  constructor(
    public capacity: number,
    private readonly leaseMs: number,
  ) {}

  /** Smallest acquisition while jobs are held: half the capacity, so batches stay large. */
  refillBatch(): number {
    return Math.max(1, Math.floor(this.capacity / 2));
  }

  /** A handler ran `ms` (Date.now() resolution: fast handlers read 0 or 1). */
  noteRun(ms: number): void {
    this.runMs = this.runMs === null ? ms : this.runMs + (ms - this.runMs) * AVERAGE_WEIGHT;
  }

  /** A leasing or renewing store call took `ms`. */
  noteRoundTrip(ms: number): void {
    this.roundTripMs =
      this.roundTripMs === null ? ms : this.roundTripMs + (ms - this.roundTripMs) * AVERAGE_WEIGHT;
  }

  get size(): number {
    return this.byId.size;
  }

  /** Jobs leased and not started. */
  get bufferedCount(): number {
    return this.buffered;
  }

  values(): IterableIterator<HeldJob> {
    return this.byId.values();
  }

  /** Whether `held` is still this engine's latest lease of its job. */
  isCurrent(held: HeldJob): boolean {
    return this.byId.get(held.job.id) === held;
  }

  /** Jobs the engine could take now: free slots plus free prefetch buffer. */
  room(): number {
    return this.capacity - this.executing - this.starting - this.buffered;
  }

  changed(): void {
    this.onChange?.();
  }

  // ---- the local deadline ----

  /** When `held`'s lease counts as lost on this process's clock (monotonic ms). */
  deadlineOf(held: HeldJob): number {
    return held.leaseSentAt + this.leaseMs - leaseMargin(this.leaseMs);
  }

  /** Whether `held`'s lease is still safely ours on this process's clock. */
  deadlineAhead(held: HeldJob, now = monotonicNow()): boolean {
    return now < this.deadlineOf(held);
  }

  /** A call that confirmed `held`'s lease was sent at `sentAt` (monotonic ms). */
  confirmed(held: HeldJob, sentAt: number): void {
    if (sentAt > held.leaseSentAt) held.leaseSentAt = sentAt;
  }

  // ---- transitions ----

  /** Holds freshly acquired jobs in the buffer; their leases count from `sentAt`. */
  add(jobs: readonly Job[], sentAt: number, startMarks: boolean): HeldJob[] {
    const added: HeldJob[] = [];
    for (const job of jobs) {
      // The store handed the job out again: the lease this engine still thinks it holds ended
      // (released or recovered under its feet). Its run must stop before the new one starts.
      const previous = this.byId.get(job.id);
      if (
        previous &&
        (previous.phase === 'buffered' ||
          previous.phase === 'starting' ||
          previous.phase === 'running')
      ) {
        if (this.lost) this.lost(previous);
        else this.lose(previous);
      }
      const recorded = startMarks && (job.startedAt ?? null) !== null;
      const held: Mutable = {
        job,
        ref: refOf(job),
        phase: 'buffered',
        // A store without start marks counts every acquired job as started.
        startMarked: !startMarks || recorded,
        markedAheadAt: recorded ? sentAt : null,
        controller: null,
        startedAt: 0,
        handlerActive: false,
        leaseSentAt: sentAt,
        shutdownAborted: false,
        settleUncertain: false,
      };
      this.byId.set(job.id, held);
      this.queue.push(held);
      this.buffered += 1;
      added.push(held);
    }
    return added;
  }

  /** The next buffered job in acquisition order, taken out of the buffer (its phase unchanged). */
  private shiftBuffered(): HeldJob | null {
    while (this.queueHead < this.queue.length) {
      const held = this.queue[this.queueHead++] as HeldJob;
      if (held.phase === 'buffered') return held;
    }
    this.queue = [];
    this.queueHead = 0;
    return null;
  }

  /** Buffered jobs in acquisition order (a view: do not change phases while iterating). */
  *bufferedJobs(): IterableIterator<HeldJob> {
    for (let i = this.queueHead; i < this.queue.length; i++) {
      const held = this.queue[i] as HeldJob;
      if (held.phase === 'buffered') yield held;
    }
  }

  /**
   * Takes the next buffered job for a free slot, or null; its phase then says what to do:
   * still `buffered` when the store records it as started (start it: `begin`), `starting` when
   * its start must be recorded first, `settling` when its local deadline passed while it
   * waited (to be released: fenced by its token, so a release after another owner took the
   * job changes nothing). `now`: this process's clock (`monotonicNow`), read by the caller.
   */
  takeForSlot(now: number): HeldJob | null {
    const held = this.shiftBuffered();
    if (!held) return null;
    if (!this.deadlineAhead(held, now)) {
      this.toSettling(held);
      return held;
    }
    // Still `buffered` (out of the queue) until `begin` moves it on.
    if (held.startMarked) return held;
    this.buffered -= 1;
    this.setPhase(held, 'starting');
    this.starting += 1;
    return held;
  }

  /**
   * `held` (`buffered`, or `starting` once its start was recorded) starts running now, if its
   * local deadline is still ahead; returns false (and the job is `lost`) when it is not.
   */
  begin(held: HeldJob, now = monotonicNow()): boolean {
    const from = held.phase;
    if (from === 'starting') this.starting -= 1;
    else if (from === 'buffered') this.buffered -= 1;
    else return false;
    if (!this.deadlineAhead(held, now)) {
      this.toLost(held);
      return false;
    }
    const m = held as Mutable;
    m.startMarked = true;
    m.markedAheadAt = null;
    m.controller = new JobAbort(this, held);
    m.startedAt = Date.now();
    m.handlerActive = true;
    this.executing += 1;
    this.setPhase(held, 'running');
    return true;
  }

  /** A buffered or starting job's start was refused or abandoned: back to `buffered` first. */
  unstart(held: HeldJob): void {
    if (held.phase !== 'starting') return;
    this.starting -= 1;
    this.setPhase(held, 'buffered');
    this.buffered += 1;
    this.queue.splice(this.queueHead, 0, held);
  }

  /**
   * `held`'s handler returned. Returns the phase the job is in now: `running` (its outcome is
   * for the caller to queue: it becomes `settling` there), or `lost` (nothing to write; it is
   * forgotten).
   */
  handlerReturned(held: HeldJob): JobPhase {
    if (held.handlerActive) {
      (held as Mutable).handlerActive = false;
      this.executing -= 1;
    }
    if (held.phase === 'lost') this.forgetIfCurrent(held);
    return held.phase;
  }

  /**
   * `held` (buffered, starting or running with its handler returned) has an outcome to write:
   * it is `settling` until `settled`.
   */
  toSettling(held: HeldJob): void {
    if (held.phase === 'buffered') this.buffered -= 1;
    else if (held.phase === 'starting') this.starting -= 1;
    else if (held.phase !== 'running') return;
    this.setPhase(held, 'settling');
  }

  /** The store took `held`'s outcome (or reported its lease lost): it is `done`. */
  settled(held: HeldJob): void {
    if (held.phase === 'settling') this.setPhase(held, 'done');
    this.forgetIfCurrent(held);
  }

  /** Every buffered job, taken out of the buffer to be given back (`settling`). */
  drainBuffer(): HeldJob[] {
    const drained: HeldJob[] = [];
    for (let held = this.shiftBuffered(); held; held = this.shiftBuffered()) {
      this.buffered -= 1;
      this.setPhase(held, 'settling');
      drained.push(held);
    }
    return drained;
  }

  /**
   * The lease is gone (the store said so, or the local deadline passed): `lost`. A buffered
   * or starting job is forgotten at once; a running one's handler is aborted with a
   * `LockLostError` and it is forgotten when the handler returns. Returns false when it was
   * already lost or done.
   */
  lose(held: HeldJob): boolean {
    if (held.phase === 'lost' || held.phase === 'done') return false;
    this.toLost(held);
    return true;
  }

  private toLost(held: HeldJob): void {
    if (held.phase === 'buffered') this.buffered -= 1;
    else if (held.phase === 'starting') this.starting -= 1;
    this.setPhase(held, 'lost');
    held.controller?.abort(new LockLostError(held.job.id));
    if (!held.handlerActive) this.forgetIfCurrent(held);
  }

  /** Checks `held`'s local deadline now (a read of its `ctx.signal`): lost when it passed. */
  checkDeadline(held: HeldJob): void {
    if (held.phase === 'running' && !this.deadlineAhead(held)) this.lost?.(held);
  }

  /**
   * Loses a job and reports it (set by the lease renewal): used when a read of a running job's
   * signal finds its deadline passed, and when the store hands out a job again that this
   * engine still held.
   */
  lost: ((held: HeldJob) => void) | null = null;

  /**
   * Removes (in place) the items whose lease has run out on this process's clock — another
   * owner may hold the job now — and forgets those jobs. Returns how many items are left.
   */
  forgetLapsed<T>(items: T[], heldOf: (item: T) => HeldJob): number {
    const now = monotonicNow();
    const live = items.filter((item) => {
      const held = heldOf(item);
      if (held.leaseSentAt + this.leaseMs > now) return true;
      this.settled(held);
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

  private setPhase(held: HeldJob, phase: JobPhase): void {
    (held as Mutable).phase = phase;
  }

  private forgetIfCurrent(held: HeldJob): void {
    if (this.isCurrent(held)) this.byId.delete(held.job.id);
  }
}
