/**
 * The state `ctx.step` keeps for one run of a held job (see `steps.ts`), and that of its
 * `ctx.run` calls (see `children.ts`).
 */
import type { EnqueueJobOptions } from './types.js';

/** A run's steps: what the job completed, this run's name counters, its checkpoint chain. */
export interface RunSteps {
  /** Key → result as JSON text, for every completed step of the job. */
  readonly done: Map<string, string>;
  /** The stored entries (`{ name, result, at, durationMs }` as JSON text), in order. */
  readonly entries: string[];
  /** Key → the index of its entry in `entries` (found without parsing them). */
  readonly positions: Map<string, number>;
  /** UTF-8 bytes of `entries`, joined. */
  bytes: number;
  /** How often each name was used in this run. */
  readonly counts: Map<string, number>;
  /** The last checkpoint written or being written: the next waits for it. */
  chain: Promise<unknown>;
  /** The functions of this run's steps still running (`ctx.run` parks only once they ended). */
  readonly running: Set<Promise<unknown>>;
}

/** One `ctx.run` call of a run, waiting for its child. */
export interface ChildCall {
  /** Its checkpoint's key (`name`, `name#2`…). */
  key: string;
  /** The child to enqueue (as `enqueueMany` takes it); absent once enqueued (see `childId`). */
  item?: { type: string; payload?: unknown; options?: Omit<EnqueueJobOptions, 'tx'> };
  childId?: string;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** The `ctx.run` calls of one run (`HeldJob.children`). */
export interface RunChildren {
  /** Calls not looked at yet. */
  calls: ChildCall[];
  /** A gathering is under way: new calls join it. */
  gathering: boolean;
  /** Spare wake-ups were taken in this run (once per run). */
  drained: boolean;
}
