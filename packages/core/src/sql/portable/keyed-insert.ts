/**
 * The keyed insert, written once for every dialect: a job whose key is held gets the holder
 * back; when the holder finished between the insert and the read (so there is none to return),
 * the job is inserted again, at most `KEYED_INSERT_TRIES` times. A dialect gives the rounds (one
 * job at a time, or a whole batch per statement); this loop and its one message are shared.
 */
import type { Operation } from '../executor.js';

/** Tries of a keyed insert before the enqueue gives up. */
export const KEYED_INSERT_TRIES = 5;

/**
 * The key of a job was taken and let go again on every try. A plain `Error`: the store names
 * its package and the operation (`[@jobs/mysql] enqueue: key "k" kept changing hands …`).
 */
export class KeyChangingHandsError extends Error {
  constructor(keys: readonly string[]) {
    const which =
      keys.length === 1 ? `key ${JSON.stringify(keys[0])}` : `keys ${JSON.stringify(keys)}`;
    super(
      `${which} kept changing hands: its holder finished before it could be read, ${KEYED_INSERT_TRIES} times`,
    );
    this.name = 'KeyChangingHandsError';
  }
}

/**
 * Runs `round` on the pending jobs until none is left: each round inserts them (or finds their
 * holders) and returns those whose holder finished meanwhile, to be inserted again. Throws
 * `KeyChangingHandsError` naming those keys after `KEYED_INSERT_TRIES` rounds.
 */
export function* insertKeyed<T>(
  pending: readonly T[],
  keyOf: (job: T) => string | null,
  round: (pending: readonly T[]) => Operation<readonly T[]>,
): Operation<void> {
  let left = pending;
  for (let tries = 0; left.length > 0; tries++) {
    if (tries === KEYED_INSERT_TRIES) {
      const keys = [...new Set(left.map(keyOf).filter((k): k is string => k !== null))];
      throw new KeyChangingHandsError(keys);
    }
    left = yield* round(left);
  }
}
