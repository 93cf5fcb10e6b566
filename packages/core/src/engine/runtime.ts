/**
 * What every part of the engine shares, in one place:
 * - `EngineRuntime` (`rt` in the parts): the resolved options, the engine's state, its events and
 *   the acquisition loop's wake-up. Each part keeps its own working state. (`ctx` is the
 *   handler's `RunContext` only.)
 * - `HeldJobs`: the jobs this engine holds a lease on, and the one place their phase changes.
 * - `EngineEvents`, `Wakeup`: the typed event emitter and the loop's interruptible sleep.
 * - `enqueueJobs`: the client side, which checks new jobs, passes them through the `enqueue`
 *   hooks and writes them in one store call.
 * - `RateLimits`: the engine's side of rate limits (the windows are the store's).
 * - `ErrorStreaks`: a streak of failures of one kind of call, logged once.
 *
 * Each section below keeps its own header.
 */

import { createHash } from 'node:crypto';
import { monotonicNow } from '../clock.js';
import { JobsError, LockLostError, ValidationError } from '../errors.js';
import { refOf } from '../rules.js';
import type {
  Job,
  JobCompletion,
  JobRef,
  JobStore,
  NewJob,
  RateTokenRequest,
  StoreRateLimits,
} from '../store.js';
import { Checkpoints } from './checkpoints.js';
import { callThrough, EngineHookList } from './hooks.js';
import type { ResolvedEngineOptions } from './options.js';
import type { RunChildren, RunSteps } from './run-steps.js';
import type {
  EngineEventName,
  EngineEvents,
  EnqueueDraft,
  EnqueueJobOptions,
  Logger,
} from './types.js';
import {
  assertInteger,
  assertKnownKeys,
  assertStoreCanLimit,
  checkMeta,
  MAX_RATE_WINDOW_MS,
  type ResolvedRateLimit,
  toNewJob,
  UNSTORABLE_IN_NAME,
} from './validate.js';

// ─── EngineRuntime ───────────────────────────────────────────────────────────────────────────────
/*
 * `EngineRuntime` (`rt` in the parts): what the parts of the engine share — the resolved
 * options, the engine's state, the jobs it holds, its events and the acquisition loop's
 * wake-up. Each part keeps its own working state. (`ctx` is the handler's `RunContext` only.)
 */

/** Where an engine is in its life: built, running, stopping, stopped. */
export type EngineState = 'idle' | 'running' | 'stopping' | 'stopped';

export class EngineRuntime {
  state: EngineState = 'idle';
  readonly events: TypedEvents;
  readonly jobs: HeldJobs;
  readonly wakeup: Wakeup;
  /** Hooks around enqueue and handler runs (`engine.use`). */
  readonly hooks = new EngineHookList();
  /** The types' rate limits, kept in the store (`runtime.ts`). */
  readonly rateLimits: RateLimits;
  /** Step checkpoints, several runs' in one write while one is under way (`checkpoints.ts`). */
  readonly checkpoints: Checkpoints;
  private readonly streaks: ErrorStreaks;
  /** Writes made after a job's handler returned, outside the settle queue (see `afterwards`). */
  private readonly lateWrites = new Set<Promise<unknown>>();

  constructor(readonly options: ResolvedEngineOptions) {
    this.events = new TypedEvents((error, event) =>
      options.logger.error(`listener of "${event}" threw`, { error }),
    );
    this.jobs = new HeldJobs(options.concurrency + options.prefetch, options.leaseMs);
    this.wakeup = new Wakeup(() => this.running);
    this.streaks = new ErrorStreaks(options.logger);
    this.checkpoints = new Checkpoints(() => options.store.steps);
    const limits = new Map<string, ResolvedRateLimit>();
    for (const [type, handler] of options.handlers) {
      if (handler.rateLimit) limits.set(type, handler.rateLimit);
    }
    this.rateLimits = new RateLimits(
      options.store,
      limits,
      () => options.clock.now(),
      (error) => this.reportError(error, 'rate limit key'),
    );
  }

  get running(): boolean {
    return this.state === 'running';
  }

  emit<E extends EngineEventName>(event: E, payload: EngineEvents[E]): void {
    this.events.emit(event, payload);
  }

  /** Someone listens to `event`: the hot path builds a payload only then. */
  listens(event: EngineEventName): boolean {
    return this.events.has(event);
  }

  /**
   * A store call failed: an `error` event each time, a log line for the first of a streak
   * (`warn`) and for the recovery (`info`, see `reportSuccess`).
   */
  reportError(error: unknown, during: string): void {
    this.streaks.failed(during, error);
    this.emit('error', { error, during });
  }

  /** A store call of this kind worked: ends its error streak, if any. */
  reportSuccess(during: string): void {
    this.streaks.succeeded(during);
  }

  /**
   * Runs `write` — a write that follows a job's end outside the settle queue: a parent's
   * wake-up, a child's result sent after its `ctx.transaction`, a history record made true —
   * so that `stop()` waits for it (`lateWritesDone`) and none lands after the caller closed or
   * emptied the store. `write` reports its own errors.
   */
  afterwards(write: Promise<unknown>): void {
    this.lateWrites.add(write);
    void write.finally(() => this.lateWrites.delete(write)).catch(() => undefined);
  }

  /** Some write of `afterwards` is still running. */
  get lateWriting(): boolean {
    return this.lateWrites.size > 0;
  }

  /** Resolves once the writes of `afterwards`, and those they started, are done. */
  async lateWritesDone(): Promise<void> {
    while (this.lateWrites.size > 0) await Promise.allSettled([...this.lateWrites]);
  }

  reportLeaseLost(held: HeldJob): void {
    this.options.logger.warn(`lease of job ${held.job.id} was lost`, { type: held.job.type });
    this.emit('lease-lost', { job: held.job });
  }
}

/**
 * Logs a streak of failures of one kind of call once: the first error at `warn`, the rest at
 * `debug`, and the first success after them at `info` ("works again"). Keeps a retry loop
 * against a database that is away from flooding the log, without hiding that it is away.
 */
export class ErrorStreaks {
  private readonly streaks = new Map<string, { errors: number; since: number }>();

  constructor(private readonly logger: Logger) {}

  failed(during: string, error: unknown): void {
    const streak = this.streaks.get(during);
    const message = error instanceof Error ? error.message : String(error);
    if (streak) {
      streak.errors += 1;
      this.logger.debug(`${during} failed again`, { error: message, errors: streak.errors });
      return;
    }
    this.streaks.set(during, { errors: 1, since: Date.now() });
    this.logger.warn(`${during} failed; retrying`, { error: message });
  }

  succeeded(during: string): void {
    const streak = this.streaks.get(during);
    if (!streak) return;
    this.streaks.delete(during);
    this.logger.info(`${during} works again`, {
      errors: streak.errors,
      afterMs: Date.now() - streak.since,
    });
  }
}

// ─── HeldJobs: held jobs and their phases ────────────────────────────────────────────────────────
/*
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
 * parts of the engine ask `HeldJobs`; only it assigns `phase`.
 */

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

// ─── events ──────────────────────────────────────────────────────────────────────────────────────

type Listener<E extends EngineEventName> = (event: EngineEvents[E]) => void;

/** A small typed event emitter. A listener that throws is reported, never breaks the engine. */
export class TypedEvents {
  private readonly listeners = new Map<EngineEventName, Set<Listener<EngineEventName>>>();

  constructor(private readonly onListenerError: (error: unknown, event: EngineEventName) => void) {}

  on<E extends EngineEventName>(event: E, listener: Listener<E>): () => void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(listener as Listener<EngineEventName>);
    return () => this.off(event, listener);
  }

  off<E extends EngineEventName>(event: E, listener: Listener<E>): void {
    this.listeners.get(event)?.delete(listener as Listener<EngineEventName>);
  }

  has(event: EngineEventName): boolean {
    return (this.listeners.get(event)?.size ?? 0) > 0;
  }

  emit<E extends EngineEventName>(event: E, payload: EngineEvents[E]): void {
    const set = this.listeners.get(event);
    if (!set) return;
    for (const listener of set) {
      try {
        listener(payload);
      } catch (error) {
        if (event === 'error') continue;
        this.onListenerError(error, event);
      }
    }
  }
}

// ─── the loop's wake-up ──────────────────────────────────────────────────────────────────────────
/* The acquisition loop's sleep, and the wake-ups that cut it short. */

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

// ─── enqueue ─────────────────────────────────────────────────────────────────────────────────────
/*
 * The client side of the engine: validates new jobs, passes them through the `enqueue` hooks
 * (`engine.use`: e.g. `@jobs/otel` adds the trace context to each job's `meta`), writes them in
 * one store call, and wakes this engine's loop when it can run them (immediate dispatch after
 * commit).
 */

export interface EnqueueItem {
  type: string;
  payload?: unknown;
  options?: Omit<EnqueueJobOptions, 'tx'>;
}

/** The keys of an `enqueueMany` item. */
const ITEM_KEYS: ReadonlySet<string> = new Set(['type', 'payload', 'options']);

/** Validates every item before anything is written, then enqueues them in one store call. */
export async function enqueueJobs(
  rt: EngineRuntime,
  items: ReadonlyArray<EnqueueItem>,
  options: { tx?: unknown },
): Promise<Job[]> {
  if (!Array.isArray(items)) {
    throw new JobsError('VALIDATION', '[@jobs/core] enqueueMany: items must be an array');
  }
  const { handlers, retries, maxPayloadBytes } = rt.options;
  /** Runs a check of item `index`; in a batch, its error says which item was wrong. */
  const checkItem = <T>(index: number, check: () => T): T => {
    try {
      return check();
    } catch (error) {
      if (items.length > 1 && error instanceof JobsError)
        error.message = `items[${index}].${error.message}`;
      throw error;
    }
  };
  const newJobs = items.map((item, index) =>
    checkItem(index, () => {
      // `{ type, payload, scope: 'a' }` would enqueue an unscoped job: options go in `options`.
      assertKnownKeys(item, ITEM_KEYS, 'item');
      const { tx: _tx, ...rest } = (item.options ?? {}) as EnqueueJobOptions;
      return toNewJob(item.type, item.payload, rest, {
        retries,
        maxPayloadBytes,
        typeRetries: handlers.get(item.type)?.retries,
        typeScopeLimit: handlers.get(item.type)?.scopeLimit,
      });
    }),
  );
  for (const [index, job] of newJobs.entries()) {
    checkItem(index, () => assertStoreCanLimit(rt.options.store, job, 'options'));
  }
  if (newJobs.length === 0) return [];
  const hooks = rt.hooks.enqueue;
  if (hooks.length === 0) return writeJobs(rt, newJobs, options);
  const drafts: EnqueueDraft[] = newJobs.map((job) => ({
    type: job.type,
    queue: job.queue,
    meta: { ...job.meta },
  }));
  return callThrough(hooks, [drafts], () => {
    // What the hooks added is checked as the caller's meta is.
    const withMeta = newJobs.map((job, index) =>
      checkItem(index, () => ({ ...job, meta: checkMeta(drafts[index]?.meta) })),
    );
    return writeJobs(rt, withMeta, options);
  });
}

/** One store call for validated jobs, then the `enqueued` events and the wake-up. */
async function writeJobs(
  rt: EngineRuntime,
  newJobs: NewJob[],
  options: { tx?: unknown },
): Promise<Job[]> {
  const { store, handlers } = rt.options;
  const results = await store.enqueue(newJobs, options.tx === undefined ? {} : { tx: options.tx });
  let wake = false;
  for (const result of results) {
    rt.emit('enqueued', result);
    if (handlers.has(result.job.type)) wake = true;
  }
  if (wake && rt.running) {
    // Inside a caller's transaction the job is visible only after commit: look again once the
    // caller's synchronous work is done (stores with notifications also wake us on commit).
    if (options.tx === undefined) rt.wakeup.wake();
    else setImmediate(() => rt.wakeup.wake());
  }
  return results.map((r) => r.job);
}

// ─── rate limits ─────────────────────────────────────────────────────────────────────────────────
/*
 * Rate limits (DESIGN invariant 19): a type's `rateLimit: { max, perMs, key? }` allows at most
 * `max` starts per `perMs` window per key, across every engine on the store. The windows are the
 * store's (`JobStore.takeRateTokens`, rule in `rate-window.ts`); `RateLimits` asks them.
 *
 * Right after an acquisition, before anything starts: the acquired jobs of limited types take
 * starts from their keys' windows in one store call; those the windows refuse go back waiting,
 * due when their window ends (`JobStore.deferJobs`, no attempt counted), so the engine next
 * looks at them then — no hot loop, and other engines skip them until then too.
 * `ctx.rateLimited(ms)` pushes the running job's window out by `ms` and puts the job back the
 * same way when its handler returns.
 */

/** Longest window key a store keeps (`RateTokenRequest.key`; MySQL's column holds 255). */
export const MAX_RATE_KEY_LENGTH = 255;

/**
 * The window key of `type|key` as the store keeps it: itself, or, when longer than a store
 * holds (a long type and a long key), its SHA-256 — the same on every node, so the window is
 * still shared, and the same on every store.
 */
export function windowKey(key: string): string {
  if (key.length <= MAX_RATE_KEY_LENGTH) return key;
  return `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

export class RateLimits {
  /** Jobs whose handler called `ctx.rateLimited(ms)`: deferred by `ms` when it returns. */
  private readonly pushedBack = new Map<string, number>();

  /**
   * @param onKeyError told when a `key` function throws or returns no usable key: the job then
   *   counts against its type's own window (`type`), so it neither escapes the limit nor holds
   *   back the batch.
   */
  constructor(
    private readonly store: JobStore,
    private readonly limits: ReadonlyMap<string, ResolvedRateLimit>,
    /** The store's clock as the engine keeps it (epoch ms): deferrals last until window ends. */
    private readonly now: () => number,
    private readonly onKeyError: (error: unknown) => void = () => {},
  ) {}

  /**
   * The store's rate-limit windows: present whenever limits are set (`resolveRateLimit`
   * refused them otherwise) or a job was deferred, so its absence here is a bug.
   */
  private windows(): StoreRateLimits {
    const windows = this.store.rateLimits;
    if (!windows) {
      throw new JobsError(
        'STORE',
        `[@jobs/core] the ${this.store.name} store has no \`rateLimits\``,
      );
    }
    return windows;
  }

  /** The window key of a limited job: its type, or `type|key` for a keyed limit. */
  private keyOf(job: Job, limit: ResolvedRateLimit): string {
    if (!limit.key) return job.type;
    try {
      const key = limit.key(job);
      if (
        typeof key !== 'string' ||
        key === '' ||
        key.length > 200 ||
        UNSTORABLE_IN_NAME.test(key)
      ) {
        throw new ValidationError(
          `handlers.${job.type}.rateLimit.key`,
          `must return a string of 1 to 200 characters without control characters or unpaired surrogates, got ${JSON.stringify(key)} for job ${job.id}`,
        );
      }
      return windowKey(`${job.type}|${key}`);
    } catch (error) {
      this.onKeyError(error);
      return job.type;
    }
  }

  /**
   * The acquired jobs that may start now, in their order; the others are deferred to their
   * window's end. On a store error, the whole batch is released (no attempt) and it throws.
   */
  async admit(jobs: Job[]): Promise<Job[]> {
    if (this.limits.size === 0) return jobs;
    const byKey = new Map<string, { request: RateTokenRequest; jobs: Job[] }>();
    try {
      for (const job of jobs) {
        const limit = this.limits.get(job.type);
        if (!limit) continue;
        const key = this.keyOf(job, limit);
        const entry = byKey.get(key);
        if (entry) {
          entry.request.want += 1;
          entry.jobs.push(job);
        } else {
          byKey.set(key, {
            request: { key, max: limit.max, perMs: limit.perMs, want: 1 },
            jobs: [job],
          });
        }
      }
      if (byKey.size === 0) return jobs;
      const entries = [...byKey.values()];
      const grants = await this.windows().takeRateTokens(entries.map((e) => e.request));
      const refused = new Set<Job>();
      const deferrals = new Map<number, JobRef[]>();
      const now = this.now();
      entries.forEach((entry, i) => {
        const grant = grants[i];
        const granted = grant?.granted ?? 0;
        const over = entry.jobs.slice(granted);
        if (over.length === 0) return;
        const delay = Math.max(1, (grant?.retryAt.getTime() ?? 0) - now);
        for (const job of over) refused.add(job);
        deferrals.set(delay, [...(deferrals.get(delay) ?? []), ...over.map(refOf)]);
      });
      for (const [delay, refs] of deferrals) {
        await this.windows().deferJobs(refs, delay);
      }
      return jobs.filter((job) => !refused.has(job));
    } catch (error) {
      // Nothing started: give the whole batch back (no attempt counted) and report the error.
      await this.store.release(jobs.map(refOf)).catch(() => undefined);
      throw error;
    }
  }

  /** `ctx.rateLimited(ms)`: pushes the job's window out and marks it to be deferred. */
  async pushBack(job: Job, delayMs: number): Promise<void> {
    const ms = assertInteger(delayMs, 'ctx.rateLimited(ms)', 1, MAX_RATE_WINDOW_MS);
    const windows = this.store.rateLimits;
    if (!windows) {
      throw new JobsError(
        'STORE',
        `[@jobs/core] ctx.rateLimited: the ${this.store.name} store cannot defer jobs (it has no \`rateLimits\`)`,
      );
    }
    this.pushedBack.set(job.id, ms);
    const limit = this.limits.get(job.type);
    if (limit) {
      await windows.takeRateTokens([
        { key: this.keyOf(job, limit), max: limit.max, perMs: limit.perMs, want: 0, blockMs: ms },
      ]);
    }
  }

  /** The push-back of a job whose handler called `ctx.rateLimited`, taken once; else null. */
  takePushBack(jobId: string): number | null {
    const ms = this.pushedBack.get(jobId);
    if (ms === undefined) return null;
    this.pushedBack.delete(jobId);
    return ms;
  }

  /** Defers a held job whose handler was rate-limited; true when its lease was still ours. */
  async defer(ref: JobRef, delayMs: number): Promise<boolean> {
    const { lost } = await this.windows().deferJobs([ref], delayMs);
    return lost.length === 0;
  }
}
