/**
 * `EngineRuntime` (`rt` in the parts): what the parts of the engine share — the resolved
 * options, the engine's state, the jobs it holds, its events and the acquisition loop's
 * wake-up. Each part keeps its own working state. (`ctx` is the handler's `RunContext` only.)
 */

import { ErrorStreaks } from '../logger.js';
import { Checkpoints } from './checkpoints.js';
import { TypedEvents } from './events.js';
import { type HeldJob, HeldJobs } from './held-jobs.js';
import { EngineHookList } from './hooks.js';
import type { ResolvedEngineOptions } from './options.js';
import { RateLimits, type ResolvedRateLimit } from './rate-limits.js';
import type { EngineEventName, EngineEvents } from './types.js';
import { Wakeup } from './wakeup.js';

/** Where an engine is in its life: built, running, stopping, stopped. */
export type EngineState = 'idle' | 'running' | 'stopping' | 'stopped';

export class EngineRuntime {
  state: EngineState = 'idle';
  readonly events: TypedEvents;
  readonly jobs: HeldJobs;
  readonly wakeup: Wakeup;
  /** Hooks around enqueue and handler runs (`engine.use`). */
  readonly hooks = new EngineHookList();
  /** The types' rate limits, kept in the store (`rate-limits.ts`). */
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
