/**
 * Retry policies: how long a job waits before its next attempt (`retryDelayMs`). Whether it gets
 * one is the retry rule, `decideRetry` in `rules.ts`.
 *
 * - `'R5/PT10M'` (Flowable's `failedJobRetryTimeCycle`): 5 retries, 10 minutes apart.
 * - `{ kind: 'exponential', initialMs: 1000, factor: 2, maxMs: 600_000, jitter: 0.2 }`
 * - `{ kind: 'fixed', delayMs: 10_000 }` (Flowable's `asyncFailedJobWaitTime`)
 */
import { ValidationError } from './errors.js';
import { durationToMs, parseRepeat } from './schedule/iso8601.js';
import type { RetryPolicy } from './store.js';

/** Default: exponential from 1 s, doubling, capped at 10 minutes, ±20 % jitter. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  kind: 'exponential',
  initialMs: 1000,
  factor: 2,
  maxMs: 600_000,
  jitter: 0.2,
};

/** Default failed attempts allowed before deadletter, like Flowable. */
export const DEFAULT_RETRIES = 3;

/** Most failed attempts a job (or a schedule's, or a handler's, or a retry cycle's) allows. */
export const MAX_RETRIES = 1000;

/** Longest wait before a retry, whatever the policy: a year. */
const MAX_DELAY_MS = 365 * 24 * 3600 * 1000;

/**
 * Validates a policy given as an object or an ISO-8601 cycle string. For a cycle with a count
 * (`R5/…`) also returns that count as the number of retries it implies.
 */
export function parseRetryPolicy(
  spec: RetryPolicy | string,
  field = 'retry',
): { policy: RetryPolicy; retries: number | null } {
  if (typeof spec === 'string') {
    const repeat = parseRepeat(spec, field);
    // The retry times and count are checked as the other policies' are: a backoff of
    // centuries would be a due time no store can hold when the job fails.
    if (durationToMs(repeat.duration) > MAX_DELAY_MS) {
      throw new ValidationError(
        field,
        `the interval of ${JSON.stringify(spec)} is longer than a year (P365D), the longest wait before a retry`,
      );
    }
    if (repeat.repetitions !== null && repeat.repetitions > MAX_RETRIES) {
      throw new ValidationError(
        field,
        `${JSON.stringify(spec)} allows ${repeat.repetitions} retries; at most ${MAX_RETRIES}`,
      );
    }
    return { policy: { kind: 'cycle', cycle: spec }, retries: repeat.repetitions };
  }
  if (spec === null || typeof spec !== 'object') {
    throw new ValidationError(
      field,
      'expected an ISO-8601 cycle like "R5/PT10M" or a policy object',
    );
  }
  const delay = (value: unknown, name: string, required: boolean): void => {
    if (value === undefined && !required) return;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_DELAY_MS) {
      throw new ValidationError(
        `${field}.${name}`,
        `must be a number of ms between 0 and ${MAX_DELAY_MS}`,
      );
    }
  };
  switch (spec.kind) {
    case 'cycle':
      return parseRetryPolicy(spec.cycle, `${field}.cycle`);
    case 'fixed':
      delay(spec.delayMs, 'delayMs', true);
      return { policy: { kind: 'fixed', delayMs: spec.delayMs }, retries: null };
    case 'exponential': {
      delay(spec.initialMs, 'initialMs', true);
      delay(spec.maxMs, 'maxMs', false);
      if (spec.factor !== undefined && (!Number.isFinite(spec.factor) || spec.factor < 1)) {
        throw new ValidationError(`${field}.factor`, 'must be a number ≥ 1');
      }
      if (
        spec.jitter !== undefined &&
        (!Number.isFinite(spec.jitter) || spec.jitter < 0 || spec.jitter > 1)
      ) {
        throw new ValidationError(`${field}.jitter`, 'must be between 0 and 1');
      }
      return { policy: { ...spec }, retries: null };
    }
    default:
      throw new ValidationError(
        `${field}.kind`,
        `unknown retry policy kind ${JSON.stringify((spec as { kind?: unknown }).kind)} (expected "cycle", "exponential" or "fixed")`,
      );
  }
}

/**
 * The wait before the next attempt after failure number `failure` (1 for the first failure).
 * `random` returns [0, 1) and exists so tests can pin jitter.
 */
export function retryDelayMs(
  policy: RetryPolicy,
  failure: number,
  random: () => number = Math.random,
): number {
  switch (policy.kind) {
    case 'fixed':
      return policy.delayMs;
    case 'cycle':
      return durationToMs(parseRepeat(policy.cycle).duration);
    case 'exponential': {
      const factor = policy.factor ?? 2;
      const cap = policy.maxMs ?? MAX_DELAY_MS;
      const base = Math.min(cap, policy.initialMs * factor ** Math.max(0, failure - 1));
      const jitter = policy.jitter ?? 0;
      const spread = base * jitter * (random() * 2 - 1);
      return Math.max(0, Math.round(Math.min(cap, base + spread)));
    }
  }
}
