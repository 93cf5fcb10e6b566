/**
 * What every store writes the same way: checking its constructor options, and the listeners its
 * `subscribe` wakes.
 */
import { ValidationError } from './errors.js';

/**
 * Throws a `ValidationError` naming the first key of `options` that is not in `known`, so a typo
 * such as `tablePrefx` fails at once instead of being ignored. `source` names the package.
 *
 * @example
 * assertKnownOptions(options, ['filename', 'db'], '@jobs/sqlite');
 */
export function assertKnownOptions(options: object, known: Iterable<string>, source: string): void {
  const names = new Set(known);
  for (const key of Object.keys(options)) {
    if (!names.has(key)) {
      throw new ValidationError(key, `[${source}] unknown option; known: ${[...names].join(', ')}`);
    }
  }
}

/**
 * `value` when it is an integer of 1 or more; otherwise throws a `ValidationError` naming
 * `field`. `source` names the package.
 *
 * @example
 * const intervalMs = assertPositiveInteger(options.intervalMs ?? 50, 'intervalMs', '@jobs/sqlite');
 */
export function assertPositiveInteger(value: number, field: string, source: string): number {
  if (!Number.isInteger(value) || value <= 0) {
    throw new ValidationError(field, `[${source}] must be a positive integer, got ${value}`);
  }
  return value;
}

/**
 * The listeners a store's `subscribe` wakes. Each `add` is its own subscription (the same
 * function added twice is woken twice and removed once per returned function), and a listener
 * that throws does not keep the others asleep: its error goes to `onError`.
 *
 * @example
 * private readonly subscribers = new StoreSubscribers();
 * subscribe(listener: () => void): () => void {
 *   return this.subscribers.add(listener);
 * }
 * // after a commit that made jobs acquirable:
 * this.subscribers.wakeSoon();
 */
export class StoreSubscribers {
  private readonly listeners = new Set<() => void>();
  private wakePending = false;

  constructor(private readonly onError: (error: unknown) => void = () => {}) {}

  /** How many subscriptions there are. */
  get size(): number {
    return this.listeners.size;
  }

  /** Subscribes `listener`; the returned function unsubscribes it. */
  add(listener: () => void): () => void {
    const entry = (): void => listener();
    this.listeners.add(entry);
    return () => {
      this.listeners.delete(entry);
    };
  }

  /** Calls every listener now. */
  wake(): void {
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch (error) {
        this.onError(error);
      }
    }
  }

  /**
   * Calls every listener once on the next turn of the event loop, however often it is asked
   * before then: after the current call and the caller's transaction are done, as a database
   * notification arrives after commit.
   */
  wakeSoon(): void {
    if (this.wakePending || this.listeners.size === 0) return;
    this.wakePending = true;
    setImmediate(() => {
      this.wakePending = false;
      this.wake();
    });
  }

  /** Drops every subscription (the store is closing); a pending `wakeSoon` then wakes nobody. */
  clear(): void {
    this.listeners.clear();
  }
}
