/** The state `ctx.step` keeps for one run of a held job (see `steps.ts`). */

/** A run's steps: what the job completed, this run's name counters, its checkpoint chain. */
export interface RunSteps {
  /** Key → result as JSON text, for every completed step of the job. */
  readonly done: Map<string, string>;
  /** The stored entries (`{ name, result, at, durationMs }` as JSON text), in order. */
  readonly entries: string[];
  /** UTF-8 bytes of `entries`, joined. */
  bytes: number;
  /** How often each name was used in this run. */
  readonly counts: Map<string, number>;
  /** The last checkpoint written or being written: the next waits for it. */
  chain: Promise<unknown>;
}
