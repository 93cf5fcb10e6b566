/**
 * `JobEngine`: the executor, the client and the admin API in one object.
 *
 * How it runs jobs (see DESIGN.md "The engine"):
 * - one acquisition loop leases up to `concurrency + prefetch` jobs in batches; prefetched jobs
 *   wait in a bounded in-memory buffer, leased but not started;
 * - a job enqueued through a running engine wakes the loop at once; other processes are woken by
 *   the store's notifications, and polling (adaptive when the store has none) is the fallback;
 * - finished jobs are completed / failed in batches (`setImmediate` coalescing); when the store
 *   offers `completeAndAcquire`, completions wait up to `COMPLETION_HOLD_MS` for the next
 *   acquisition and ride on it (one round trip for both), and are written on their own after that;
 * - one heartbeat renews the leases of all held jobs in one store call every `leaseMs / 3`; a job
 *   whose lease is lost has its `ctx.signal` aborted;
 * - `stop()` stops acquiring, releases the buffer, lets running jobs finish up to a timeout, then
 *   aborts them and releases what did not finish.
 */

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { type Clock, StoreSyncedClock } from '../clock.js';
import { JobsError, LockLostError, toJobError, UnrecoverableError } from '../errors.js';
import { DEFAULT_RETRIES, DEFAULT_RETRY_POLICY, parseRetryPolicy, retryDelayMs } from '../retry.js';
import { type ScheduleInfo, type ScheduleOptions, ScheduleRunner } from '../schedule/index.js';
import type {
  AcquireRequest,
  Job,
  JobFailure,
  JobRef,
  JobStore,
  RetryPolicy,
  SettleResult,
} from '../store.js';
import { JobAdmin } from './admin.js';
import { TypedEvents } from './events.js';
import type {
  EngineEventName,
  EngineEvents,
  EngineOptions,
  EnqueueJobOptions,
  HandlerDefinition,
  JobContext,
  JobHandler,
  Logger,
} from './types.js';
import { assertInteger, assertKnownKeys, toNewJob } from './validate.js';

const ENGINE_OPTION_KEYS = new Set([
  'store',
  'handlers',
  'concurrency',
  'prefetch',
  'leaseMs',
  'pollIntervalMs',
  'queues',
  'tenants',
  'retry',
  'retries',
  'maxPayloadBytes',
  'owner',
  'clock',
  'logger',
]);

/** Fastest idle poll for stores without notifications; doubles while idle up to `pollIntervalMs`. */
const MIN_POLL_MS = 25;
const CLOCK_SYNC_INTERVAL_MS = 60_000;
const SHUTDOWN_GRACE_MS = 2_000;
/**
 * How long a completion may wait to ride on the next acquisition (`completeAndAcquire`). A busy
 * engine refills within a millisecond or two; a slow one writes its completions on their own.
 */
const COMPLETION_HOLD_MS = 10;
/** Longest wait before retrying a failed settle call (never more than a quarter lease). */
const MAX_SETTLE_RETRY_MS = 5_000;

const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

interface ResolvedHandler {
  handler: JobHandler;
  policy: RetryPolicy | null;
  retries: number | undefined;
}

/** A job leased to this engine: buffered (not started), executing, or waiting to be settled. */
interface HeldJob {
  job: Job;
  ref: JobRef;
  controller: AbortController | null;
  startedAt: number;
  /** Local time the last successful renewal was sent; the lease is safe until this + leaseMs. */
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
}

interface PendingFailure {
  held: HeldJob;
  failure: JobFailure;
  willRetry: boolean;
}

export interface EngineSnapshot {
  state: 'idle' | 'running' | 'stopping' | 'stopped';
  owner: string;
  /** Jobs whose handler is running. */
  executing: number;
  /** Jobs leased to this engine but not started yet. */
  prefetched: number;
  /** Finished jobs whose completion or failure is being written. */
  settling: number;
}

export class JobEngine {
  /** The operator's API: list, retry, delete, suspend, activate, stats. */
  readonly admin: JobAdmin & { listSchedules(): Promise<ScheduleInfo[]> };
  /** This engine's lock owner name. */
  readonly owner: string;
  readonly store: JobStore;

  private readonly handlers = new Map<string, ResolvedHandler>();
  private readonly types: string[];
  private readonly concurrency: number;
  private readonly prefetch: number;
  /** Smallest acquisition while jobs are held: half the capacity, so batches stay large. */
  private readonly refillBatch: number;
  private readonly leaseMs: number;
  private readonly pollIntervalMs: number;
  private readonly queues: string[] | null;
  private readonly tenants: string[] | null;
  private readonly retryPolicy: RetryPolicy;
  private readonly retries: number;
  private readonly maxPayloadBytes: number;
  private readonly clock: Clock;
  private readonly syncedClock: StoreSyncedClock | null;
  private readonly logger: Logger;
  private readonly events: TypedEvents;
  private readonly schedules: ScheduleRunner;

  private state: EngineSnapshot['state'] = 'idle';
  private readonly held = new Map<string, HeldJob>();
  private readonly buffer: HeldJob[] = [];
  private executing = 0;
  private pendingComplete: HeldJob[] = [];
  private pendingFail: PendingFailure[] = [];
  private pendingRelease: HeldJob[] = [];
  private flushScheduled = false;
  private flushing: Promise<void> | null = null;
  private flushFailures = 0;
  private completionTimer: NodeJS.Timeout | null = null;
  private readonly settleChecks = new Set<Promise<void>>();
  private woken = false;
  private wakeSleeper: (() => void) | null = null;
  private loopDone: Promise<void> | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private renewing = false;
  private unsubscribe: (() => void) | null = null;
  private lastRecoverAt = 0;
  private lastClockSyncAt = 0;
  private nextScheduleCheckAt = 0;
  /** Bumped whenever schedules may need firing now; a pass that saw an older value runs again. */
  private scheduleGeneration = 0;
  private idleChange: (() => void) | null = null;

  constructor(options: EngineOptions) {
    if (options === null || typeof options !== 'object') {
      throw new JobsError('VALIDATION', '[@jobs/core] JobEngine: options must be an object');
    }
    assertKnownKeys(options, ENGINE_OPTION_KEYS, 'JobEngine');
    if (!options.store || typeof options.store.acquire !== 'function') {
      throw new JobsError('VALIDATION', '[@jobs/core] JobEngine: options.store must be a JobStore');
    }
    this.store = options.store;
    this.concurrency = assertInteger(options.concurrency ?? 10, 'concurrency', 1, 10_000);
    this.prefetch = assertInteger(options.prefetch ?? this.concurrency, 'prefetch', 0, 100_000);
    this.refillBatch = Math.max(1, Math.floor((this.concurrency + this.prefetch) / 2));
    this.leaseMs = assertInteger(options.leaseMs ?? 30_000, 'leaseMs', 30, 24 * 3600_000);
    const notifies =
      this.store.capabilities.notifications && typeof this.store.subscribe === 'function';
    this.pollIntervalMs = assertInteger(
      options.pollIntervalMs ?? (notifies ? 5_000 : 1_000),
      'pollIntervalMs',
      MIN_POLL_MS,
      3600_000,
    );
    this.queues = options.queues ? [...options.queues] : null;
    this.tenants = options.tenants ? [...options.tenants] : null;
    this.retryPolicy = options.retry
      ? parseRetryPolicy(options.retry, 'retry').policy
      : DEFAULT_RETRY_POLICY;
    this.retries = assertInteger(options.retries ?? DEFAULT_RETRIES, 'retries', 0, 1000);
    this.maxPayloadBytes = assertInteger(
      options.maxPayloadBytes ?? 1024 * 1024,
      'maxPayloadBytes',
      1,
      64 * 1024 * 1024,
    );
    this.owner = options.owner ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.logger = options.logger ?? silentLogger;
    this.syncedClock = options.clock ? null : new StoreSyncedClock(() => this.store.now());
    this.clock = options.clock ?? (this.syncedClock as StoreSyncedClock);
    this.events = new TypedEvents((error, event) =>
      this.logger.error(`listener of "${event}" threw`, { error }),
    );

    for (const [type, definition] of Object.entries(options.handlers ?? {})) {
      this.handlers.set(type, resolveHandler(type, definition));
    }
    this.types = [...this.handlers.keys()];

    this.schedules = new ScheduleRunner({
      store: this.store,
      clock: this.clock,
      logger: this.logger,
      emit: (event, payload) => this.emit(event, payload),
      defaultRetries: (type) => this.handlers.get(type)?.retries ?? this.retries,
    });
    const admin = new JobAdmin(this.store, () => this.poll());
    this.admin = Object.assign(admin, { listSchedules: () => this.schedules.list() });
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on<E extends EngineEventName>(event: E, listener: (event: EngineEvents[E]) => void): () => void {
    return this.events.on(event, listener);
  }

  off<E extends EngineEventName>(event: E, listener: (event: EngineEvents[E]) => void): void {
    this.events.off(event, listener);
  }

  /** What the engine holds right now. */
  snapshot(): EngineSnapshot {
    return {
      state: this.state,
      owner: this.owner,
      executing: this.executing,
      prefetched: this.buffer.length,
      settling: this.pendingComplete.length + this.pendingFail.length + this.pendingRelease.length,
    };
  }

  /**
   * Starts running jobs (when the engine has handlers) and firing schedules. An engine without
   * handlers is a client: `start()` only syncs its clock.
   */
  async start(): Promise<void> {
    if (this.state === 'running') return;
    if (this.state !== 'idle') {
      throw new JobsError(
        'STOPPED',
        '[@jobs/core] JobEngine: an engine that was stopped cannot be started again',
      );
    }
    await this.syncClock();
    this.state = 'running';
    if (this.types.length === 0) return;
    if (this.store.capabilities.notifications && this.store.subscribe) {
      this.unsubscribe = this.store.subscribe(() => this.poll());
    }
    const interval = Math.max(10, Math.floor(this.leaseMs / 3));
    this.heartbeat = setInterval(() => void this.renewLeases(), interval);
    this.loopDone = this.runLoop();
  }

  /**
   * Stops acquiring, gives back prefetched jobs, waits up to `timeoutMs` (default 60 s, like
   * Flowable) for running jobs, then aborts their signals and releases what did not finish.
   */
  async stop(options: { timeoutMs?: number } = {}): Promise<void> {
    if (this.state === 'idle') {
      this.state = 'stopped';
      return;
    }
    if (this.state !== 'running') return;
    const timeoutMs = options.timeoutMs ?? 60_000;
    this.state = 'stopping';
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.poll();
    await this.loopDone;
    this.releaseBuffered();

    if (this.executing > 0 && !(await this.waitForIdle(timeoutMs))) {
      for (const held of this.held.values()) {
        if (held.controller && !held.controller.signal.aborted) {
          held.shutdownAborted = true;
          held.controller.abort(
            new JobsError(
              'STOPPED',
              `engine stopped: job ${held.job.id} did not finish within ${timeoutMs} ms`,
            ),
          );
        }
      }
      if (!(await this.waitForIdle(SHUTDOWN_GRACE_MS))) {
        // Handlers that ignore their signal keep running, but we no longer vouch for them:
        // give the jobs back so another engine can run them.
        for (const held of this.held.values()) {
          if (held.controller && !held.lost && !held.finished) {
            held.lost = true;
            this.pendingRelease.push(held);
          }
        }
      }
    }
    await this.flushUntilEmpty();
    // Reads that decide how an uncertain settle is reported, before the caller closes the store.
    while (this.settleChecks.size > 0) await Promise.all(this.settleChecks);
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.state = 'stopped';
  }

  /** Checks the store for due jobs now (e.g. after advancing a fake clock in a test). */
  poll(): void {
    this.woken = true;
    const wake = this.wakeSleeper;
    this.wakeSleeper = null;
    wake?.();
  }

  /**
   * Adds a job. Validated first: bad input throws `ValidationError` and writes nothing.
   * A job with a `key` held by an unfinished job returns that job instead.
   *
   * @example
   * await engine.enqueue('send-email', { to: 'a@b.c' }, { delayMs: 60_000, retries: 5 });
   */
  async enqueue<P = unknown>(
    type: string,
    payload?: P,
    options?: EnqueueJobOptions,
  ): Promise<Job<P>> {
    const [job] = await this.enqueueMany([{ type, payload, options }], { tx: options?.tx });
    return job as Job<P>;
  }

  /**
   * Adds many jobs in one store call (one statement where the store can). All are validated
   * before anything is written.
   */
  async enqueueMany(
    items: ReadonlyArray<{
      type: string;
      payload?: unknown;
      options?: Omit<EnqueueJobOptions, 'tx'>;
    }>,
    options: { tx?: unknown } = {},
  ): Promise<Job[]> {
    if (!Array.isArray(items)) {
      throw new JobsError('VALIDATION', '[@jobs/core] enqueueMany: items must be an array');
    }
    const newJobs = items.map((item, index) => {
      try {
        const { tx: _tx, ...rest } = (item.options ?? {}) as EnqueueJobOptions;
        return toNewJob(item.type, item.payload, rest, {
          retries: this.retries,
          maxPayloadBytes: this.maxPayloadBytes,
          typeRetries: this.handlers.get(item.type)?.retries,
        });
      } catch (error) {
        if (items.length > 1 && error instanceof JobsError)
          error.message = `items[${index}].${error.message}`;
        throw error;
      }
    });
    if (newJobs.length === 0) return [];
    const results = await this.store.enqueue(
      newJobs,
      options.tx === undefined ? {} : { tx: options.tx },
    );
    let wake = false;
    for (const result of results) {
      this.emit('enqueued', result);
      if (this.handlers.has(result.job.type)) wake = true;
    }
    if (wake && this.state === 'running') {
      // Inside a caller's transaction the job is visible only after commit: look again once the
      // caller's synchronous work is done (stores with notifications also wake us on commit).
      if (options.tx === undefined) this.poll();
      else setImmediate(() => this.poll());
    }
    return results.map((r) => r.job);
  }

  /**
   * Creates or updates a repeating schedule (idempotent by name, across nodes).
   *
   * @example
   * await engine.schedule('nightly-report', { cron: '0 3 * * *', timezone: 'Europe/Berlin' });
   */
  async schedule(name: string, options: ScheduleOptions): Promise<ScheduleInfo> {
    const info = await this.schedules.define(name, options);
    this.scheduleNow();
    this.poll();
    return info;
  }

  /** Removes a schedule; jobs it already created stay. */
  async unschedule(name: string): Promise<boolean> {
    return this.schedules.remove(name);
  }

  async pauseSchedule(name: string): Promise<ScheduleInfo> {
    return this.schedules.pause(name);
  }

  async resumeSchedule(name: string): Promise<ScheduleInfo> {
    const info = await this.schedules.resume(name);
    this.scheduleNow();
    this.poll();
    return info;
  }

  // ---------------------------------------------------------------- acquisition loop

  private async runLoop(): Promise<void> {
    let idleDelay = MIN_POLL_MS;
    let errorDelay = 100;
    const notifies = this.unsubscribe !== null;
    while (this.state === 'running') {
      this.woken = false;
      try {
        await this.maintain();
        const room = this.room();
        if (room <= 0 || (room < this.refillBatch && this.executing + this.buffer.length > 0)) {
          // Full enough: refill in batches, not one job at a time. A finishing job wakes us
          // once there is room for a batch.
          await this.sleep(this.pollIntervalMs);
          continue;
        }
        const jobs = await this.acquireBatch(room);
        errorDelay = 100;
        if (jobs.length > 0) {
          idleDelay = MIN_POLL_MS;
          this.take(jobs);
          if (jobs.length === room) continue;
        }
        if (this.woken || this.state !== 'running') continue;
        // A job that is due but was not acquirable (its exclusive scope is busy) must not make
        // the loop spin: after an empty acquisition, wait at least the adaptive idle delay.
        const floor = jobs.length === 0 ? idleDelay : 0;
        const wait = await this.idleWait(notifies ? this.pollIntervalMs : idleDelay, floor);
        await this.sleep(wait);
        if (jobs.length === 0) idleDelay = Math.min(idleDelay * 2, this.pollIntervalMs, 1_000);
      } catch (error) {
        this.reportError(error, 'acquire');
        await this.sleep(errorDelay);
        errorDelay = Math.min(errorDelay * 2, this.pollIntervalMs);
      }
    }
  }

  /** Housekeeping on the loop: clock sync, crash recovery, schedule firing. */
  private async maintain(): Promise<void> {
    const local = Date.now();
    if (this.syncedClock && local - this.lastClockSyncAt >= CLOCK_SYNC_INTERVAL_MS) {
      await this.syncClock();
    }
    if (local - this.lastRecoverAt >= this.recoverIntervalMs()) {
      this.lastRecoverAt = local;
      const recovered = await this.store.recoverExpiredLeases(1000);
      if (recovered.requeued.length > 0 || recovered.deadlettered.length > 0) {
        this.emit('leases-recovered', recovered);
      }
    }
    if (this.clock.now() >= this.nextScheduleCheckAt) {
      const generation = this.scheduleGeneration;
      const next = await this.schedules.fireDue();
      const fallback = this.clock.now() + this.pollIntervalMs;
      // A schedule defined, resumed or ended during the pass must not wait for the next one.
      this.nextScheduleCheckAt =
        generation !== this.scheduleGeneration
          ? 0
          : next
            ? Math.min(next.getTime(), fallback)
            : fallback;
    }
  }

  private acquireRequest(limit: number): AcquireRequest {
    return {
      owner: this.owner,
      limit,
      leaseMs: this.leaseMs,
      types: this.types,
      queues: this.queues,
      tenants: this.tenants,
    };
  }

  private async acquireBatch(limit: number): Promise<Job[]> {
    const request = this.acquireRequest(limit);
    const store = this.store;
    if (store.completeAndAcquire && this.pendingComplete.length > 0) {
      const done = this.takePendingCompletions();
      try {
        const result = await store.completeAndAcquire(
          done.map((h) => h.ref),
          request,
        );
        this.afterComplete(done, result);
        return result.jobs;
      } catch (error) {
        for (const held of done) held.settleUncertain = true;
        this.pendingComplete.unshift(...done);
        this.scheduleFlush(true);
        throw error;
      }
    }
    return store.acquire(request);
  }

  /** Asks the loop to run the schedule runner on its next pass. */
  private scheduleNow(): void {
    this.scheduleGeneration += 1;
    this.nextScheduleCheckAt = 0;
  }

  /** Jobs the engine could take now: free slots plus free prefetch buffer. */
  private room(): number {
    return this.concurrency + this.prefetch - this.executing - this.buffer.length;
  }

  /** Milliseconds to sleep when nothing is due: until the next due job, schedule or poll. */
  private async idleWait(max: number, floor: number): Promise<number> {
    const next = await this.store.nextDueAt({
      types: this.types,
      queues: this.queues,
      tenants: this.tenants,
    });
    const now = this.clock.now();
    let wait = max;
    if (next) wait = Math.min(wait, Math.max(floor, next.getTime() - now));
    wait = Math.min(wait, Math.max(0, this.nextScheduleCheckAt - now));
    // Wake for the next crash-recovery pass, so a dead owner's jobs are taken over in time.
    wait = Math.min(wait, Math.max(0, this.lastRecoverAt + this.recoverIntervalMs() - Date.now()));
    return wait;
  }

  /** Expired leases are looked for every half lease: a dead owner's jobs wait at most ~1.5 leases. */
  private recoverIntervalMs(): number {
    return Math.max(50, this.leaseMs / 2);
  }

  private sleep(ms: number): Promise<void> {
    if (this.woken || this.state !== 'running') return Promise.resolve();
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

  // ---------------------------------------------------------------- running jobs

  private take(jobs: Job[]): void {
    const now = Date.now();
    for (const job of jobs) {
      const held: HeldJob = {
        job,
        ref: { id: job.id, token: job.lockToken as string },
        controller: null,
        startedAt: 0,
        leaseSentAt: now,
        lost: false,
        shutdownAborted: false,
        finished: false,
        settleUncertain: false,
      };
      this.held.set(job.id, held);
      this.buffer.push(held);
    }
    this.emit('acquired', { jobs });
    this.dispatch();
  }

  private dispatch(): void {
    while (
      this.state === 'running' &&
      this.executing < this.concurrency &&
      this.buffer.length > 0
    ) {
      this.execute(this.buffer.shift() as HeldJob);
    }
  }

  private execute(held: HeldJob): void {
    const { job } = held;
    const resolved = this.handlers.get(job.type) as ResolvedHandler;
    this.executing += 1;
    held.controller = new AbortController();
    held.startedAt = Date.now();
    if (job.dueAt.getTime() > job.createdAt.getTime() || job.attempts > 1) {
      this.emit('timer-fired', { job });
    }
    this.emit('started', { job });
    const ctx: JobContext = {
      signal: held.controller.signal,
      attempt: job.attempts,
      occurrence: job.occurrence,
      shard: job.shard,
      log: this.logger,
    };
    Promise.resolve()
      .then(() => resolved.handler(job, ctx))
      .then(
        () => this.finish(held, null),
        (error: unknown) => this.finish(held, error ?? new Error('handler threw a falsy value')),
      );
  }

  private finish(held: HeldJob, error: unknown): void {
    this.executing -= 1;
    held.finished = true;
    if (held.lost) {
      // Lease lost while running: someone else may own the job now; nothing of ours is written.
      this.forget(held);
    } else if (held.shutdownAborted) {
      this.pendingRelease.push(held);
    } else if (error === null) {
      this.pendingComplete.push(held);
    } else {
      this.pendingFail.push(this.failureOf(held, error));
    }
    this.settleSoon();
    this.dispatch();
    if (this.room() >= this.refillBatch) this.poll();
    this.idleChange?.();
  }

  private failureOf(held: HeldJob, error: unknown): PendingFailure {
    const { job } = held;
    const jobError = toJobError(error);
    const unrecoverable = error instanceof UnrecoverableError;
    const willRetry = !unrecoverable && job.retriesLeft > 0;
    const resolved = this.handlers.get(job.type);
    const policy = job.retryPolicy ?? resolved?.policy ?? this.retryPolicy;
    const delay = willRetry ? retryDelayMs(policy, Math.max(1, job.attempts)) : 0;
    return {
      held,
      willRetry,
      failure: { ...held.ref, error: jobError, deadletter: !willRetry, retryDelayMs: delay },
    };
  }

  // ---------------------------------------------------------------- settling (batched)

  /** Takes every pending completion for one store call; the next one starts a new hold. */
  private takePendingCompletions(): HeldJob[] {
    if (this.completionTimer) {
      clearTimeout(this.completionTimer);
      this.completionTimer = null;
    }
    return this.pendingComplete.splice(0);
  }

  /**
   * Writes what is pending soon: failures and releases on the next tick; completions too, unless
   * they can ride on the loop's next acquisition (the store does both in one call).
   */
  private settleSoon(): void {
    const folds = this.store.completeAndAcquire !== undefined && this.state === 'running';
    if (this.pendingFail.length + this.pendingRelease.length > 0 || !folds) {
      this.scheduleFlush(false);
    } else if (this.pendingComplete.length > 0) {
      this.holdCompletions();
    }
  }

  /**
   * Leaves completions for the acquisition loop (woken by `finish` once there is room for a
   * batch); whatever it has not taken after `COMPLETION_HOLD_MS` is written on its own.
   */
  private holdCompletions(): void {
    if (this.completionTimer) return;
    this.completionTimer = setTimeout(() => {
      this.completionTimer = null;
      if (this.pendingComplete.length > 0) this.scheduleFlush(false);
    }, COMPLETION_HOLD_MS);
  }

  private scheduleFlush(afterFailure: boolean): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    const run = (): void => {
      this.flushScheduled = false;
      void this.flush();
    };
    if (afterFailure) {
      // Retry well inside the lease: a completion written after the lease ran out is lost work.
      const cap = Math.max(10, Math.min(MAX_SETTLE_RETRY_MS, this.leaseMs / 4));
      const delay = Math.min(cap, 50 * 2 ** Math.min(this.flushFailures, 7));
      setTimeout(run, delay);
    } else {
      setImmediate(run);
    }
  }

  private flush(): Promise<void> {
    if (this.flushing) {
      // A flush is in flight: what arrives meanwhile goes in the next batch.
      return this.flushing.then(() => this.flush());
    }
    this.flushing = this.flushOnce().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async flushOnce(): Promise<void> {
    const completes = this.takePendingCompletions();
    const fails = this.pendingFail.splice(0);
    const releases = this.pendingRelease.splice(0);
    if (completes.length + fails.length + releases.length === 0) return;
    const results = await Promise.allSettled([
      completes.length > 0 ? this.store.complete(completes.map((h) => h.ref)) : null,
      fails.length > 0 ? this.store.fail(fails.map((f) => f.failure)) : null,
      releases.length > 0 ? this.store.release(releases.map((h) => h.ref)) : null,
    ]);
    const [completed, failed, released] = results;
    let anyFailed = false;
    if (completed?.status === 'fulfilled') {
      if (completed.value) this.afterComplete(completes, completed.value);
    } else {
      anyFailed = true;
      for (const held of completes) held.settleUncertain = true;
      this.pendingComplete.unshift(...completes);
      this.reportError(completed?.reason, 'complete');
    }
    if (failed?.status === 'fulfilled') {
      if (failed.value) this.afterFail(fails, failed.value);
    } else {
      anyFailed = true;
      for (const { held } of fails) held.settleUncertain = true;
      this.pendingFail.unshift(...fails);
      this.reportError(failed?.reason, 'fail');
    }
    if (released?.status === 'fulfilled') {
      if (released.value) this.afterRelease(releases, released.value);
    } else {
      anyFailed = true;
      this.pendingRelease.unshift(...releases);
      this.reportError(released?.reason, 'release');
    }
    this.flushFailures = anyFailed ? this.flushFailures + 1 : 0;
    if (anyFailed) this.scheduleFlush(true);
    else this.settleSoon();
    this.idleChange?.();
  }

  /** A coalesced schedule fire waits for its previous occurrence to end: look again now. */
  private afterScheduledJobsEnded(ended: readonly HeldJob[]): void {
    if (ended.some((h) => h.job.schedule !== null)) {
      this.scheduleNow();
      this.poll();
    }
  }

  private afterComplete(done: HeldJob[], result: SettleResult): void {
    this.afterScheduledJobsEnded(done);
    const lost = new Set(result.lost);
    const now = Date.now();
    for (const held of done) {
      this.forget(held);
      const completed = () =>
        this.emit('completed', { job: held.job, durationMs: now - held.startedAt });
      if (!lost.has(held.job.id)) completed();
      else if (held.settleUncertain) {
        // An earlier call may have deleted it: then the job is gone, and it was ours.
        this.reportUncertain(held, (job) => job === null, completed);
      } else this.emitLeaseLost(held);
    }
  }

  private afterFail(fails: PendingFailure[], result: SettleResult): void {
    this.afterScheduledJobsEnded(fails.map((f) => f.held));
    const lost = new Set(result.lost);
    for (const { held, failure, willRetry } of fails) {
      this.forget(held);
      const failed = () => {
        this.emit('failed', {
          job: held.job,
          error: failure.error,
          willRetry,
          retryDelayMs: failure.retryDelayMs,
        });
        if (willRetry) this.emit('retried', { job: held.job });
        else this.emit('deadlettered', { job: held.job, error: failure.error });
      };
      if (!lost.has(held.job.id)) failed();
      else if (held.settleUncertain) {
        // An earlier call may have recorded the failure: then the job carries our error (it may
        // have been retried, even run and finished, since). A lease that really ran out carries
        // the lease-expired error instead.
        this.reportUncertain(
          held,
          (job) => job === null || job.lastError?.message === failure.error.message,
          failed,
        );
      } else this.emitLeaseLost(held);
    }
    // A retry is a new timer: let the loop see its due time.
    if (fails.some((f) => f.willRetry)) this.poll();
  }

  /**
   * After a settle call that failed (maybe having taken effect) and a retry that found the lease
   * gone: reads the job to tell "our earlier call did it" (`report`) from a lease really lost.
   * `stop()` waits for these reads. When the job cannot be read, only the error is reported.
   */
  private reportUncertain(
    held: HeldJob,
    ours: (job: Job | null) => boolean,
    report: () => void,
  ): void {
    const check = (async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          const job = await this.store.getJob(held.job.id);
          if (ours(job)) report();
          else this.emitLeaseLost(held);
          return;
        } catch (error) {
          if (attempt >= 3) {
            this.reportError(error, `read job ${held.job.id} after an uncertain settle`);
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
        }
      }
    })();
    this.settleChecks.add(check);
    void check.finally(() => this.settleChecks.delete(check));
  }

  /** Drops a held job, unless the engine has since leased the same job again. */
  private forget(held: HeldJob): void {
    if (this.held.get(held.job.id) === held) this.held.delete(held.job.id);
  }

  private afterRelease(releases: HeldJob[], result: SettleResult): void {
    const lost = new Set(result.lost);
    for (const held of releases) this.forget(held);
    const jobs = releases.filter((h) => !lost.has(h.job.id)).map((h) => h.job);
    if (jobs.length > 0) {
      this.emit('released', { jobs });
      this.poll();
    }
  }

  private releaseBuffered(): void {
    if (this.buffer.length === 0) return;
    this.pendingRelease.push(...this.buffer.splice(0));
    this.scheduleFlush(false);
  }

  /** Flushes until nothing is pending, retrying failed store calls for at most a lease. */
  private async flushUntilEmpty(): Promise<void> {
    const deadline = Date.now() + this.leaseMs;
    while (this.pendingComplete.length + this.pendingFail.length + this.pendingRelease.length > 0) {
      await this.flush();
      if (this.pendingComplete.length + this.pendingFail.length + this.pendingRelease.length === 0)
        break;
      if (Date.now() > deadline) {
        this.logger.warn(
          'could not write all finished jobs before stopping; their leases will expire',
          {
            pending: this.snapshot().settling,
          },
        );
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (this.flushing) await this.flushing;
  }

  private waitForIdle(timeoutMs: number): Promise<boolean> {
    if (this.executing === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.idleChange = null;
        resolve(false);
      }, timeoutMs);
      this.idleChange = () => {
        if (this.executing === 0) {
          clearTimeout(timer);
          this.idleChange = null;
          resolve(true);
        }
      };
    });
  }

  // ---------------------------------------------------------------- leases

  /** Heartbeat: renews every held lease in one store call; aborts jobs whose lease is gone. */
  private async renewLeases(): Promise<void> {
    if (this.renewing || this.held.size === 0) return;
    this.renewing = true;
    const sentAt = Date.now();
    const holding = [...this.held.values()].filter((h) => !h.lost);
    try {
      const result = await this.store.renewLeases(
        this.owner,
        this.leaseMs,
        holding.map((h) => h.ref),
      );
      const lost = new Set(result.lost);
      for (const held of holding) {
        // A job settled while the renewal was in flight is reported lost by it; that is not a
        // lost lease. Finished jobs learn their fate from their own settle call.
        if (held.finished || this.held.get(held.job.id) !== held) continue;
        if (lost.has(held.job.id)) this.markLost(held);
        else held.leaseSentAt = sentAt;
      }
    } catch (error) {
      this.reportError(error, 'renew leases');
    } finally {
      this.renewing = false;
    }
    // A lease we could not renew in time is presumed lost: stop the handler before another
    // owner can start the job again.
    const now = Date.now();
    for (const held of this.held.values()) {
      if (!held.lost && !held.finished && now - held.leaseSentAt >= this.leaseMs) {
        this.markLost(held);
      }
    }
  }

  private markLost(held: HeldJob): void {
    if (held.lost) return;
    held.lost = true;
    const index = this.buffer.indexOf(held);
    if (index >= 0) this.buffer.splice(index, 1);
    const executing = held.controller !== null && this.isExecuting(held);
    if (!executing) this.forget(held);
    held.controller?.abort(new LockLostError(held.job.id));
    this.emitLeaseLost(held);
  }

  private isExecuting(held: HeldJob): boolean {
    return (
      !this.pendingComplete.includes(held) &&
      !this.pendingRelease.includes(held) &&
      !this.pendingFail.some((f) => f.held === held)
    );
  }

  private emitLeaseLost(held: HeldJob): void {
    this.logger.warn(`lease of job ${held.job.id} was lost`, { type: held.job.type });
    this.emit('lease-lost', { job: held.job });
  }

  // ---------------------------------------------------------------- misc

  private async syncClock(): Promise<void> {
    if (!this.syncedClock) return;
    await this.syncedClock.sync();
    this.lastClockSyncAt = Date.now();
  }

  private emit<E extends EngineEventName>(event: E, payload: EngineEvents[E]): void {
    this.events.emit(event, payload);
  }

  private reportError(error: unknown, during: string): void {
    this.logger.error(`${during} failed`, { error });
    this.emit('error', { error, during });
  }
}

function resolveHandler(type: string, definition: JobHandler | HandlerDefinition): ResolvedHandler {
  if (typeof definition === 'function') {
    return { handler: definition, policy: null, retries: undefined };
  }
  if (!definition || typeof definition.handler !== 'function') {
    throw new JobsError(
      'VALIDATION',
      `[@jobs/core] JobEngine: handlers.${type} must be a function or { handler, retry?, retries? }`,
    );
  }
  assertKnownKeys(definition, new Set(['handler', 'retry', 'retries']), `handlers.${type}`);
  const parsed = definition.retry
    ? parseRetryPolicy(definition.retry, `handlers.${type}.retry`)
    : null;
  return {
    handler: definition.handler,
    policy: parsed?.policy ?? null,
    retries:
      definition.retries !== undefined
        ? assertInteger(definition.retries, `handlers.${type}.retries`, 0, 1000)
        : (parsed?.retries ?? undefined),
  };
}
