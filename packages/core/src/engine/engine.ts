/**
 * `JobEngine`: the executor, the client and the admin API in one object. This class only wires
 * the parts together; each concern lives in a file of `engine/` named for it — the map, with a
 * line per file, is CONTRIBUTING.md's "Layout" (see also DESIGN.md "The engine").
 */

import { JobsError } from '../errors.js';
import { type ScheduleInfo, type ScheduleOptions, ScheduleRunner } from '../schedule/index.js';
import type { Job, JobStore } from '../store.js';
import { AcquisitionLoop, Maintenance, ScheduleFiring } from './acquisition-loop.js';
import { JobAdmin } from './admin.js';
import { reserveConnections } from './connections.js';
import { Dispatcher } from './dispatch.js';
import { type BatchItem, enqueueBatch, enqueueFlow, type FlowDefinition } from './flows.js';
import { checkHealth, type EngineHealth } from './health.js';
import { LeaseRenewal } from './lease-renewal.js';
import { resolveEngineOptions } from './options.js';
import { awaitResult } from './result.js';
import { EngineRuntime, type EngineState, enqueueJobs } from './runtime.js';
import { Settlement } from './settlement.js';
import { Shutdown } from './shutdown.js';
import type {
  AnyJobs,
  EngineEventName,
  EngineEvents,
  EngineHooks,
  EngineOptions,
  EnqueueJobOptions,
  JobOf,
  JobTypeOf,
  PayloadOf,
  ResultOf,
} from './types.js';
import { sendSignal } from './waits.js';

/** One job of `enqueueMany`: a type of the job map with its payload. */
export type EnqueueItem<Jobs> = {
  [T in JobTypeOf<Jobs>]: {
    type: T;
    payload?: PayloadOf<Jobs, T>;
    options?: Omit<EnqueueJobOptions, 'tx'>;
  };
}[JobTypeOf<Jobs>];

export interface EngineSnapshot {
  state: EngineState;
  owner: string;
  /** Jobs whose handler is running. */
  executing: number;
  /** Jobs leased to this engine but not started yet (prefetched, or their start being recorded). */
  prefetched: number;
  /** How many jobs it may prefetch now (adaptive unless `prefetch` was given). */
  prefetchLimit: number;
  /** Finished jobs whose completion or failure is being written. */
  settling: number;
}

/**
 * The executor, the client and the admin API. `Jobs` is an optional job map that types it:
 * handlers get their payload, `enqueue` checks the type and the payload, `result` says what the
 * handler returned. Without it, any type and payload are accepted.
 *
 * @example
 * interface Jobs {
 *   'send-email': { payload: { to: string }; result: { messageId: string } };
 *   report: { payload: { month: string } };
 * }
 * const engine = new JobEngine<Jobs>({ store, handlers: {
 *   'send-email': async (job) => ({ messageId: await send(job.payload.to) }),
 * } });
 * const job = await engine.enqueue('send-email', { to: 'a@b.c' });   // a typo fails tsc
 * const { messageId } = await engine.result(job);
 */
export class JobEngine<Jobs extends object = AnyJobs> {
  /** The operator's API: list, retry, delete, suspend, activate, stats. */
  readonly admin: JobAdmin & { listSchedules(): Promise<ScheduleInfo[]> };
  /** This engine's lock owner name. */
  readonly owner: string;
  readonly store: JobStore;

  private readonly rt: EngineRuntime;
  private readonly schedules: ScheduleRunner;
  private readonly timers: ScheduleFiring;
  private readonly maintenance: Maintenance;
  private readonly settlement: Settlement;
  private readonly leases: LeaseRenewal;
  private readonly loop: AcquisitionLoop;
  private readonly shutdown: Shutdown;
  private starting: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  private stopRequested = false;
  /** Gives back the connections reserved on the store's pool at start (`connections.ts`). */
  private releaseConnections = (): void => {};

  constructor(options: EngineOptions<Jobs>) {
    const resolved = resolveEngineOptions(options as unknown as EngineOptions);
    this.store = resolved.store;
    this.owner = resolved.owner;
    const rt = new EngineRuntime(resolved);
    this.rt = rt;
    if (resolved.store.history) resolved.store.history.configure(resolved.history);
    else if (resolved.historyGiven && resolved.history.keep !== 'none') {
      resolved.logger.warn(
        `the ${resolved.store.name} store keeps no history (it has no \`history\`); history option ignored`,
      );
    }

    this.schedules = new ScheduleRunner({
      store: resolved.store,
      clock: resolved.clock,
      logger: resolved.logger,
      emit: (event, payload) => rt.emit(event, payload),
      defaultRetries: (type) => resolved.handlers.get(type)?.retries ?? resolved.retries,
    });
    const admin = new JobAdmin(this.store, () => this.poll(), {
      types: resolved.types,
      clock: resolved.clock,
    });
    this.admin = Object.assign(admin, { listSchedules: () => this.schedules.list() });
    this.timers = new ScheduleFiring(rt, this.schedules);
    this.maintenance = new Maintenance(rt, this.timers, admin);
    this.settlement = new Settlement(rt, () => {
      this.timers.fireSchedulesSoon();
      this.poll();
    });
    const dispatcher = new Dispatcher(rt, this.settlement);
    this.leases = new LeaseRenewal(rt, this.settlement);
    this.loop = new AcquisitionLoop(rt, this.maintenance, this.settlement, dispatcher);
    this.shutdown = new Shutdown(
      rt,
      this.loop,
      this.settlement,
      this.leases,
      dispatcher.startMarks,
      () => dispatcher.callOpenBatches(),
    );
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on<E extends EngineEventName>(event: E, listener: (event: EngineEvents[E]) => void): () => void {
    return this.rt.events.on(event, listener);
  }

  off<E extends EngineEventName>(event: E, listener: (event: EngineEvents[E]) => void): void {
    this.rt.events.off(event, listener);
  }

  /**
   * Adds hooks around enqueue and handler runs, for instrumentation (`@jobs/otel` uses it);
   * returns the function that removes them. See `EngineHooks`.
   */
  use(hooks: EngineHooks): () => void {
    return this.rt.hooks.add(hooks);
  }

  /** What the engine holds right now. */
  snapshot(): EngineSnapshot {
    const { jobs } = this.rt;
    return {
      state: this.rt.state,
      owner: this.owner,
      executing: jobs.executing,
      prefetched: jobs.bufferedCount + jobs.starting,
      prefetchLimit: jobs.capacity - this.rt.options.concurrency,
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
    return checkHealth(this.rt, this.leases.status, options);
  }

  /**
   * Starts running jobs (when the engine has handlers) and firing schedules. An engine without
   * handlers is a client: `start()` only syncs its clock.
   */
  async start(): Promise<void> {
    if (this.rt.state === 'running') return;
    if (this.starting) return this.starting;
    if (this.rt.state !== 'idle' || this.stopRequested) {
      throw new JobsError(
        'STOPPED',
        '[@jobs/core] JobEngine: an engine that was stopped cannot be started again',
      );
    }
    this.starting = (async () => {
      // A forgotten migration fails here, saying what to run, not on every poll afterwards.
      if (this.rt.options.types.length > 0) await this.store.verifySchema?.();
      await this.maintenance.syncClock();
      // stop() called while the clock synced: the engine never starts.
      if (this.stopRequested) return;
      this.rt.state = 'running';
      if (this.rt.options.types.length === 0) return;
      this.releaseConnections = reserveConnections(this.rt);
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
    if (this.rt.state !== 'running') {
      this.rt.state = 'stopped';
      return;
    }
    const timeoutMs = options.timeoutMs ?? 60_000;
    this.rt.state = 'stopping';
    this.stopping = this.shutdown.run(timeoutMs).finally(() => {
      this.rt.state = 'stopped';
      this.releaseConnections();
    });
    return this.stopping;
  }

  /** Checks the store for due jobs now (e.g. after advancing a fake clock in a test). */
  poll(): void {
    this.rt.wakeup.wake();
  }

  /**
   * Adds a job. Validated first: bad input throws `ValidationError` and writes nothing.
   * A job with a `key` held by an unfinished job returns that job instead.
   *
   * @example
   * await engine.enqueue('send-email', { to: 'a@b.c' }, { delayMs: 60_000, retries: 5 });
   */
  enqueue<T extends JobTypeOf<Jobs>>(
    type: T,
    ...args: undefined extends PayloadOf<Jobs, T>
      ? [payload?: PayloadOf<Jobs, T>, options?: EnqueueJobOptions]
      : [payload: PayloadOf<Jobs, T>, options?: EnqueueJobOptions]
  ): Promise<JobOf<Jobs, T>>;
  /**
   * An untyped engine's enqueue with the payload's type given, `enqueue<Email>('send', …)` (as
   * before job maps); a typed engine has only the form above.
   */
  enqueue<P>(
    type: string extends JobTypeOf<Jobs> ? string : never,
    payload?: P,
    options?: EnqueueJobOptions,
  ): Promise<Job<P>>;
  async enqueue(type: string, payload?: unknown, options?: EnqueueJobOptions): Promise<Job> {
    const [job] = await enqueueJobs(this.rt, [{ type, payload, options }], { tx: options?.tx });
    return job as Job;
  }

  /**
   * Adds many jobs in one store call (one statement where the store can). All are validated
   * before anything is written.
   */
  async enqueueMany(
    items: ReadonlyArray<EnqueueItem<Jobs>>,
    options: { tx?: unknown } = {},
  ): Promise<Job[]> {
    return enqueueJobs(this.rt, items, options);
  }

  /**
   * Waits for job `job` (a job or its id, from any process) to finish and returns what its
   * handler returned; throws a `JobFailedError` when it ended in the dead-letter area or
   * cancelled, a `JobsError` (`TIMEOUT`) after `timeoutMs` (default 60 s), and a
   * `NotFoundError` when the store has neither the job nor its history record (history keeps
   * completed jobs' results with `history: { keep: 'all' }`, the default).
   *
   * @example
   * const job = await engine.enqueue('resize', { image });
   * const { url } = await engine.result(job, { timeoutMs: 30_000 });
   */
  async result<T extends JobTypeOf<Jobs>>(
    job: JobOf<Jobs, T> | string,
    options: { timeoutMs?: number } = {},
  ): Promise<ResultOf<Jobs, T>> {
    return (await awaitResult(
      this.rt,
      typeof job === 'string' ? job : job.id,
      options,
    )) as ResultOf<Jobs, T>;
  }

  /**
   * Adds a flow: jobs (nodes) with dependencies, checked (unknown names, cycles, at most
   * `MAX_FLOW_NODES`: a `ValidationError` naming the node, nothing written) and written in one
   * enqueue — in the caller's transaction `tx` when given. A node starts once its parents
   * completed and reads their results in `ctx.flow.parents`; a parent dead-lettered, cancelled
   * or skipped skips its dependents (never started), unless a node takes `after: 'finished'`.
   * Answers the flow's id (`admin.getFlow(id)`, `admin.cancelFlow(id)`, `engine.result(id)`).
   * Needs a store with `steps` and `waits`; any engine with handlers on the store runs it.
   *
   * @example
   * const { id } = await engine.flow({
   *   nodes: { fetch: { type: 'fetch', payload: { url } }, parse: { type: 'parse', dependsOn: ['fetch'] } },
   * });
   */
  async flow(definition: FlowDefinition, options: { tx?: unknown } = {}): Promise<{ id: string }> {
    return enqueueFlow(this.rt, definition, options);
  }

  /**
   * Adds a batch: its items, and a callback job that runs once after every item ended
   * (completed, dead-lettered or cancelled), with the counts and failures in `ctx.flow.ended`.
   * A flow underneath (items are nodes `0`, `1`, …, the callback is node `callback`).
   *
   * @example
   * await engine.batch(files.map((f) => ({ type: 'resize', payload: f })), {
   *   callback: { type: 'resized', payload: { album } },
   * });
   */
  async batch(
    items: readonly BatchItem[],
    batch: { callback: BatchItem },
    options: { tx?: unknown } = {},
  ): Promise<{ id: string }> {
    return enqueueBatch(this.rt, items, batch, options);
  }

  /**
   * Sends a signal to the job waiting for it (`ctx.waitFor(name, { key })`), from any process:
   * stored until one waiting job takes it — exactly one job, once — and a job already waiting
   * for it is made due at once. A signal nobody waits for stays stored until a job waits for
   * (name, key); signals are not pruned yet, so send them for waits that will come.
   *
   * @example
   * await engine.signal('approval', { key: 'o-1', payload: { ok: true } });
   */
  async signal(name: string, options: { key: string; payload?: unknown }): Promise<void> {
    await sendSignal(this.rt, name, options);
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
