/**
 * `JobEngine`: the executor, the client and the admin API in one object. This class only wires
 * the parts together; each concern lives in a file named for it (see DESIGN.md "The engine"):
 * - `options.ts`: engine options, checked, with their defaults;
 * - `enqueue.ts`: the client side, enqueue with immediate dispatch after commit;
 * - `acquisition-loop.ts`: one loop leases up to `concurrency + prefetch` jobs in batches;
 *   prefetched jobs wait in a bounded buffer (`held-jobs.ts`), leased but not started;
 * - `maintenance.ts`: clock sync and expired-lease recovery between acquisitions;
 * - `timer-firing.ts`: when schedules fire, and the `timer-fired` event;
 * - `dispatch.ts`: runs handlers with their `ctx`; the retry decision is in `../retry.ts`;
 * - `settlement.ts`: batched complete / fail / release, and uncertain settles;
 * - `lease-renewal.ts`: the heartbeat renewing all leases in one call, and the local deadline;
 * - `shutdown.ts`: what `stop()` does;
 * - `health.ts`: what `health()` answers.
 */

import { JobsError } from '../errors.js';
import { type ScheduleInfo, type ScheduleOptions, ScheduleRunner } from '../schedule/index.js';
import type { Job, JobStore } from '../store.js';
import { AcquisitionLoop } from './acquisition-loop.js';
import { JobAdmin } from './admin.js';
import { EngineContext } from './context.js';
import { Dispatcher } from './dispatch.js';
import { enqueueJobs } from './enqueue.js';
import { checkHealth, type EngineHealth } from './health.js';
import { LeaseRenewal } from './lease-renewal.js';
import { Maintenance } from './maintenance.js';
import { resolveEngineOptions } from './options.js';
import { Settlement } from './settlement.js';
import { Shutdown } from './shutdown.js';
import { TimerFiring } from './timer-firing.js';
import type {
  EngineEventName,
  EngineEvents,
  EngineHooks,
  EngineOptions,
  EnqueueJobOptions,
} from './types.js';

export interface EngineSnapshot {
  state: 'idle' | 'running' | 'stopping' | 'stopped';
  owner: string;
  /** Jobs whose handler is running. */
  executing: number;
  /** Jobs leased to this engine but not started yet. */
  prefetched: number;
  /** How many jobs it may prefetch now (adaptive unless `prefetch` was given). */
  prefetchLimit: number;
  /** Finished jobs whose completion or failure is being written. */
  settling: number;
}

export class JobEngine {
  /** The operator's API: list, retry, delete, suspend, activate, stats. */
  readonly admin: JobAdmin & { listSchedules(): Promise<ScheduleInfo[]> };
  /** This engine's lock owner name. */
  readonly owner: string;
  readonly store: JobStore;

  private readonly ctx: EngineContext;
  private readonly schedules: ScheduleRunner;
  private readonly timers: TimerFiring;
  private readonly maintenance: Maintenance;
  private readonly settlement: Settlement;
  private readonly leases: LeaseRenewal;
  private readonly loop: AcquisitionLoop;
  private readonly shutdown: Shutdown;
  private starting: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  private stopRequested = false;

  constructor(options: EngineOptions) {
    const resolved = resolveEngineOptions(options);
    this.store = resolved.store;
    this.owner = resolved.owner;
    const ctx = new EngineContext(resolved);
    this.ctx = ctx;
    if (resolved.store.configureHistory) resolved.store.configureHistory(resolved.history);
    else if (resolved.historyGiven && resolved.history.keep !== 'none') {
      resolved.logger.warn(
        `the ${resolved.store.name} store keeps no history (it has no configureHistory); history option ignored`,
      );
    }

    this.schedules = new ScheduleRunner({
      store: resolved.store,
      clock: resolved.clock,
      logger: resolved.logger,
      emit: (event, payload) => ctx.emit(event, payload),
      defaultRetries: (type) => resolved.handlers.get(type)?.retries ?? resolved.retries,
    });
    const admin = new JobAdmin(this.store, () => this.poll(), {
      types: resolved.types,
      clock: resolved.clock,
    });
    this.admin = Object.assign(admin, { listSchedules: () => this.schedules.list() });
    this.timers = new TimerFiring(ctx, this.schedules);
    this.maintenance = new Maintenance(ctx, this.timers, admin);
    this.settlement = new Settlement(ctx, () => {
      this.timers.fireSchedulesSoon();
      this.poll();
    });
    const dispatcher = new Dispatcher(ctx, this.settlement);
    this.leases = new LeaseRenewal(ctx, this.settlement);
    this.loop = new AcquisitionLoop(ctx, this.maintenance, this.settlement, dispatcher);
    this.shutdown = new Shutdown(ctx, this.loop, this.settlement, this.leases);
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on<E extends EngineEventName>(event: E, listener: (event: EngineEvents[E]) => void): () => void {
    return this.ctx.events.on(event, listener);
  }

  off<E extends EngineEventName>(event: E, listener: (event: EngineEvents[E]) => void): void {
    this.ctx.events.off(event, listener);
  }

  /**
   * Adds hooks around enqueue and handler runs, for instrumentation (`@jobs/otel` uses it);
   * returns the function that removes them. See `EngineHooks`.
   */
  use(hooks: EngineHooks): () => void {
    return this.ctx.hooks.add(hooks);
  }

  /** What the engine holds right now. */
  snapshot(): EngineSnapshot {
    const { jobs } = this.ctx;
    return {
      state: this.ctx.state,
      owner: this.owner,
      executing: jobs.executing,
      prefetched: jobs.buffer.length,
      prefetchLimit: jobs.capacity - this.ctx.options.concurrency,
      settling: this.settlement.pendingCount,
    };
  }

  /**
   * Whether this engine can work: it is running, its store answers (one cheap call, bounded by
   * `timeoutMs`, default 2 s) and the leases it holds are being renewed. For readiness checks
   * (docs/deployment.md); it never throws for a store that is down, it says
   * `store: 'unreachable'`.
   *
   * @example
   * app.get('/ready', async (_req, res) => {
   *   const health = await engine.health();
   *   res.status(health.ok ? 200 : 503).json(health);
   * });
   */
  health(options: { timeoutMs?: number } = {}): Promise<EngineHealth> {
    return checkHealth(this.ctx, this.leases.status, options);
  }

  /**
   * Starts running jobs (when the engine has handlers) and firing schedules. An engine without
   * handlers is a client: `start()` only syncs its clock.
   */
  async start(): Promise<void> {
    if (this.ctx.state === 'running') return;
    if (this.starting) return this.starting;
    if (this.ctx.state !== 'idle' || this.stopRequested) {
      throw new JobsError(
        'STOPPED',
        '[@jobs/core] JobEngine: an engine that was stopped cannot be started again',
      );
    }
    this.starting = (async () => {
      await this.maintenance.syncClock();
      // stop() called while the clock synced: the engine never starts.
      if (this.stopRequested) return;
      this.ctx.state = 'running';
      if (this.ctx.options.types.length === 0) return;
      this.leases.start();
      this.loop.start();
    })().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  /**
   * Stops acquiring, gives back prefetched jobs, waits up to `timeoutMs` (default 60 s, like
   * Flowable) for running jobs, then aborts their signals. Returns within `timeoutMs` plus a
   * bounded grace (`SHUTDOWN_GRACE_MS` + `STORE_GRACE_MS`), even when the store never answers.
   * Safe to call at any time, also during `start()` and more than once.
   */
  async stop(options: { timeoutMs?: number } = {}): Promise<void> {
    this.stopRequested = true;
    if (this.stopping) return this.stopping;
    if (this.starting) await this.starting.catch(() => undefined);
    if (this.ctx.state !== 'running') {
      this.ctx.state = 'stopped';
      return;
    }
    const timeoutMs = options.timeoutMs ?? 60_000;
    this.ctx.state = 'stopping';
    this.stopping = this.shutdown.run(timeoutMs).finally(() => {
      this.ctx.state = 'stopped';
    });
    return this.stopping;
  }

  /** Checks the store for due jobs now (e.g. after advancing a fake clock in a test). */
  poll(): void {
    this.ctx.wakeup.wake();
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
    return enqueueJobs(this.ctx, items, options);
  }

  /**
   * Creates or updates a repeating schedule (idempotent by name, across nodes).
   *
   * @example
   * await engine.schedule('nightly-report', { cron: '0 3 * * *', timezone: 'Europe/Berlin' });
   */
  async schedule(name: string, options: ScheduleOptions): Promise<ScheduleInfo> {
    const info = await this.schedules.define(name, options);
    this.timers.fireSchedulesSoon();
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
    this.timers.fireSchedulesSoon();
    this.poll();
    return info;
  }
}
