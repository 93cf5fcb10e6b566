/**
 * Batch handlers (`BatchHandlerDefinition`): gathers the started jobs of a batch type into one
 * handler call of up to `batch.size` jobs, made when the batch is full, when no slot is left for
 * another job to join, or `batch.waitMs` after its first job joined — and hands each job's
 * outcome back to dispatch, which settles it exactly as a single run's.
 *
 * A job joins a batch only once `HeldJobs.begin` moved it to `running` (its local lease
 * deadline was still ahead), so it holds its slot and its lease is renewed while it waits. At
 * the call, jobs that lost their lease or were cancelled meanwhile are left out and settled
 * as such; the rest are started (time limit, `started` event) and called together.
 */
import { CancelledError, JobsError, LockLostError, ValidationError } from '../errors.js';
import type { Job } from '../store.js';
import type { HeldJob, JobAbort } from './held-jobs.js';
import { callThrough } from './hooks.js';
import type { ResolvedBatch } from './options.js';
import type { EngineRuntime } from './runtime.js';
import type { BatchContext, Logger } from './types.js';

/** What dispatch does for the jobs of a batch: the same as for a single run. */
export interface BatchRuns {
  /** `held`'s run starts now (its time limit, the `started` event). */
  startRun(held: HeldJob): void;
  /** `held`'s run ended with `error` (null: it succeeded with `result`); settles it. */
  finish(held: HeldJob, error: unknown, result?: unknown): void;
}

/** One job's outcome of a call: `error` null when it succeeded with `result`. */
interface Settled {
  error: unknown;
  result?: unknown;
}

/** A batch being filled: its jobs in the order they joined, and the timer that calls it. */
interface OpenBatch {
  batch: ResolvedBatch;
  members: HeldJob[];
  timer: NodeJS.Timeout | null;
}

export class Batches {
  /** The batch being filled, per job type (at most one each; a full one is called at once). */
  private readonly open = new Map<string, OpenBatch>();
  private callingSoon = false;

  /**
   * @param starved whether every slot holds a running job (checked again before the call).
   */
  constructor(
    private readonly rt: EngineRuntime,
    private readonly runs: BatchRuns,
    private readonly starved: () => boolean,
  ) {}

  /** Batches being filled (jobs joined, handler not called yet). */
  get openCount(): number {
    return this.open.size;
  }

  /** `held` (running: its handler not called) joins the open batch of its type. */
  join(held: HeldJob, batch: ResolvedBatch): void {
    const { type } = held.job;
    let open = this.open.get(type);
    if (!open) {
      open = { batch, members: [], timer: null };
      this.open.set(type, open);
    }
    open.members.push(held);
    if (open.members.length >= batch.size) {
      this.call(type);
    } else if (open.timer === null) {
      open.timer = setTimeout(() => this.call(type), batch.waitMs);
    }
  }

  /** Calls every open batch now. */
  callAll(): void {
    for (const type of [...this.open.keys()]) this.call(type);
  }

  /**
   * Calls every open batch once the current burst of settles and starts is done (a microtask):
   * no slot is free, so no other job can join them. Jobs that join in the same burst (slots
   * freed by one batch's settles) still make one call.
   */
  callAllSoon(): void {
    if (this.callingSoon) return;
    this.callingSoon = true;
    queueMicrotask(() => {
      this.callingSoon = false;
      if (this.starved()) this.callAll();
    });
  }

  /** Calls the open batch of `type` with its jobs still running and not cancelled. */
  private call(type: string): void {
    const open = this.open.get(type);
    if (!open) return;
    this.open.delete(type);
    if (open.timer) clearTimeout(open.timer);
    const { jobs } = this.rt;
    const live: HeldJob[] = [];
    for (const held of open.members) {
      // Its deadline passed while it waited: lost (reported), never called.
      jobs.checkDeadline(held);
      if (held.phase !== 'running') {
        this.runs.finish(held, new LockLostError(held.job.id));
      } else if (held.cancelRequested) {
        this.runs.finish(held, new CancelledError(held.job.id));
      } else {
        live.push(held);
      }
    }
    if (live.length === 0) return;
    for (const held of live) this.runs.startRun(held);
    if (this.rt.hooks.run.length === 0) {
      void this.outcomes(open.batch, live).then((settled) => {
        live.forEach((held, i) => {
          const { error, result } = settled[i] as Settled;
          this.runs.finish(held, error, result);
        });
      });
    } else {
      this.callThroughHooks(open.batch, live);
    }
  }

  /**
   * Each job's run hooks wrap its share of the one call, as they wrap a single run: the handler
   * is called once every job's hooks called `next()` (or returned without calling it: that job
   * is left out and settles with what its hooks gave).
   */
  private callThroughHooks(batch: ResolvedBatch, live: HeldJob[]): void {
    const shares = new Map<HeldJob, (settled: Settled) => void>();
    let waiting = live.length;
    const ready = () => {
      waiting -= 1;
      if (waiting > 0) return;
      const inside = live.filter((held) => shares.has(held));
      if (inside.length === 0) return;
      void this.outcomes(batch, inside).then((settled) => {
        inside.forEach((held, i) => {
          shares.get(held)?.(settled[i] as Settled);
        });
      });
    };
    for (const held of live) {
      let counted = false;
      const share = () =>
        new Promise<unknown>((resolve, reject) => {
          shares.set(held, ({ error, result }) =>
            error === null ? resolve(result) : reject(error),
          );
          counted = true;
          ready();
        });
      const done = () => {
        if (!counted) {
          counted = true;
          ready();
        }
      };
      callThrough(this.rt.hooks.run, [held.job], share).then(
        (result) => {
          done();
          this.runs.finish(held, null, result);
        },
        (error: unknown) => {
          done();
          this.runs.finish(held, error ?? new Error('a run hook threw a falsy value'));
        },
      );
    }
  }

  /**
   * Calls the handler once with `members` and reads its answer: one outcome per job, in order.
   * A thrown error, or an answer of the wrong shape, is every job's error.
   */
  private async outcomes(batch: ResolvedBatch, members: HeldJob[]): Promise<Settled[]> {
    const ctx = new BatchRunContext(members, this.rt.options.logger);
    let answer: unknown;
    try {
      // On a later microtask, never inside the caller's loop.
      answer = await Promise.resolve().then(() =>
        batch.handler(
          members.map((held) => held.job),
          ctx,
        ),
      );
    } catch (error) {
      const thrown = error ?? new Error('batch handler threw a falsy value');
      return members.map(() => ({ error: thrown }));
    }
    if (!Array.isArray(answer) || answer.length !== members.length) {
      const type = members[0]?.job.type ?? '';
      const got = Array.isArray(answer) ? `${answer.length} outcomes` : describeAnswer(answer);
      const error = new JobsError(
        'VALIDATION',
        `[@jobs/core] handlers.${type}: a batch handler must return an array of one outcome per job, in order; it returned ${got} for ${members.length} jobs`,
      );
      return members.map(() => ({ error }));
    }
    return answer.map((outcome: unknown) =>
      outcome instanceof Error ? { error: outcome } : { error: null, result: outcome },
    );
  }
}

function describeAnswer(value: unknown): string {
  if (value === null) return 'null';
  return typeof value === 'object' ? 'an object that is not an array' : typeof value;
}

/** A batch handler's `ctx`: one per call; per-job signals are the jobs' own. */
class BatchRunContext implements BatchContext {
  private readonly byId = new Map<string, HeldJob>();
  private whole: AbortController | null = null;

  constructor(
    private readonly members: readonly HeldJob[],
    readonly log: Logger,
  ) {
    for (const held of members) this.byId.set(held.job.id, held);
  }

  signalOf(job: Job): AbortSignal {
    const held = job && typeof job === 'object' ? this.byId.get(job.id) : undefined;
    if (!held) {
      throw new ValidationError('ctx.signalOf(job)', 'the job is not in this batch');
    }
    return (held.controller as JobAbort).signal;
  }

  get signal(): AbortSignal {
    if (!this.whole) {
      const whole = new AbortController();
      this.whole = whole;
      const signals = this.members.map((held) => (held.controller as JobAbort).signal);
      const check = () => {
        if (!whole.signal.aborted && signals.every((signal) => signal.aborted)) {
          whole.abort(signals[signals.length - 1]?.reason);
        }
      };
      for (const signal of signals) signal.addEventListener('abort', check, { once: true });
      check();
    }
    return this.whole.signal;
  }
}
