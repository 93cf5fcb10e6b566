/**
 * What every store writes the same way: checking its constructor options (and the identifiers
 * it puts in SQL), the listeners its `subscribe` wakes, and reading a job's stored log.
 */
import { ValidationError } from './errors.js';
import type { JobLogLine, JobStep } from './store.js';

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

/** A job's log as stored (JSON `[{ at: epoch ms, message }]`, text or parsed) as `JobLogLine`s. */
export function readLogs(value: unknown): JobLogLine[] {
  const lines =
    typeof value === 'string'
      ? JSON.parse(value)
      : Buffer.isBuffer(value)
        ? JSON.parse(value.toString('utf8'))
        : value;
  if (!Array.isArray(lines)) return [];
  return lines.map((line: { at: number; message: string }) => ({
    at: new Date(line.at),
    message: String(line.message),
  }));
}

/**
 * Checks a table prefix or schema name: letters, digits and `_`, starting with a letter or `_`,
 * at most `max` characters. Identifiers are interpolated into SQL, so nothing else gets in.
 */
export function assertIdentifier(
  value: string,
  field: string,
  options: { allowEmpty?: boolean; max?: number } = {},
): string {
  const max = options.max ?? 48;
  if (value === '' && options.allowEmpty) return value;
  if (typeof value !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(value) || value.length > max) {
    throw new ValidationError(
      field,
      `must be an identifier of letters, digits and _ (not starting with a digit, at most ${max} characters), got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/**
 * A job's step list as stored (JSON `[{ name, result, at: epoch ms, durationMs }]`, text or
 * parsed) as `JobStep`s; empty when none.
 */
export function readSteps(value: unknown): JobStep[] {
  if (value === null || value === undefined) return [];
  const steps =
    typeof value === 'string'
      ? JSON.parse(value)
      : Buffer.isBuffer(value)
        ? JSON.parse(value.toString('utf8'))
        : value;
  if (!Array.isArray(steps)) return [];
  return steps.map((step: { name: string; result: unknown; at: number; durationMs: number }) => ({
    name: String(step.name),
    result: step.result === undefined ? null : step.result,
    at: new Date(step.at),
    durationMs: Number(step.durationMs) || 0,
  }));
}

/** `Job.steps` as stored (`saveSteps`' `stepsJson`). */
export function stepsJson(steps: readonly JobStep[]): string {
  return JSON.stringify(
    steps.map((step) => ({
      name: step.name,
      result: step.result,
      at: step.at.getTime(),
      durationMs: step.durationMs,
    })),
  );
}

/**
 * Payload copies `checkPayload` parsed from their JSON text, with that text. A store writes the
 * text without serialising the payload again, and gives the copy itself as the new job's
 * payload (`takeCheckedPayload`) instead of parsing the text back. Weak: a copy no store took is
 * collected with it.
 */
const CHECKED_PAYLOADS = new WeakMap<object, string>();

/** `copy` is `JSON.parse(text)`, made by the engine and held by nothing else. */
export function rememberPayloadText(copy: unknown, text: string): void {
  if (typeof copy === 'object' && copy !== null) CHECKED_PAYLOADS.set(copy, text);
}

/** The JSON text a store writes for `payload` (an undefined payload is JSON null). */
export function payloadJson(payload: unknown): string {
  if (typeof payload === 'object' && payload !== null) {
    const text = CHECKED_PAYLOADS.get(payload);
    if (text !== undefined) return text;
  }
  // JSON has no text for undefined (nor for a function): stored as null.
  return JSON.stringify(payload) ?? 'null';
}

/**
 * True when `payload` is a copy `checkPayload` made (so exactly what its JSON text reads back
 * as): the store may hand it out as the written job's payload. Forgotten from then on, so a
 * caller who changes it later gets it serialised anew.
 */
export function takeCheckedPayload(payload: unknown): boolean {
  return typeof payload === 'object' && payload !== null && CHECKED_PAYLOADS.delete(payload);
}
