/**
 * What a failed attempt does to a job. `decideRetry`: whether it runs again and after how long —
 * the one retry rule, for the engine's handlers and `@jobs/http`'s remote workers alike.
 * `afterFailure`: what the store records (`JobStore.fail`, invariant 6), whatever it stores.
 */
import { retryDelayMs } from '../retry.js';
import type { Job, JobError, JobFailure, JobState, RetryPolicy } from '../store.js';

/** How an attempt failed, as the retry rule reads it. */
export interface FailedAttempt {
  /**
   * No retry, whatever is left: the handler threw `UnrecoverableError`, or a remote worker
   * failed the job with `unrecoverable`.
   */
  unrecoverable: boolean;
  /** The wait before the next attempt when the worker named one (a remote worker's `retryInMs`). */
  delayMs?: number | null;
}

/** What a failed attempt leads to. */
export interface RetryDecision {
  /** True: the job waits as a timer for `delayMs`, then runs again. False: dead-letter. */
  willRetry: boolean;
  /** The wait before the next attempt; 0 when the job goes to the dead-letter area. */
  delayMs: number;
}

/**
 * The retry rule: with retries left and not `unrecoverable`, another attempt after the wait the
 * worker named, else the backoff of the job's own policy, else of `typePolicy` (the handler's,
 * the engine's, or the HTTP API's `retry`) for this failure (`job.attempts`); otherwise the
 * dead-letter area.
 *
 * @example
 * const { willRetry, delayMs } = decideRetry(job, { unrecoverable: false }, DEFAULT_RETRY_POLICY);
 * await store.fail([{ ...refOf(job), error, deadletter: !willRetry, retryDelayMs: delayMs }]);
 */
export function decideRetry(
  job: Pick<Job, 'retriesLeft' | 'attempts' | 'retryPolicy'>,
  attempt: FailedAttempt,
  typePolicy: RetryPolicy,
): RetryDecision {
  if (attempt.unrecoverable || job.retriesLeft <= 0) return { willRetry: false, delayMs: 0 };
  const delayMs =
    attempt.delayMs ?? retryDelayMs(job.retryPolicy ?? typePolicy, Math.max(1, job.attempts));
  return { willRetry: true, delayMs };
}

/** The fields a recorded failure changes (the lease is cleared too). */
export interface AfterFailure {
  state: Extract<JobState, 'timer' | 'deadletter'>;
  /** When it is due again (`timer`); unchanged for a dead-letter job. */
  dueAt: Date | null;
  /** Retries left after this failure: one fewer for a retry, unchanged for a dead-letter job. */
  retriesLeft: number;
  lastError: JobError;
}

/**
 * `deadletter`: to the dead-letter area, retries untouched. Otherwise back to `timer`, due
 * `retryDelayMs` after the store's `nowMs`, with one retry fewer. Either way the error is kept.
 *
 * @example
 * const next = afterFailure(job, failure, clock.now());
 * Object.assign(job, { state: next.state, retriesLeft: next.retriesLeft, lastError: next.lastError });
 * if (next.dueAt) job.dueAt = next.dueAt;
 */
export function afterFailure(
  job: { retriesLeft: number },
  failure: Pick<JobFailure, 'deadletter' | 'retryDelayMs' | 'error'>,
  nowMs: number,
): AfterFailure {
  const lastError = { message: failure.error.message, stack: failure.error.stack ?? null };
  if (failure.deadletter) {
    return { state: 'deadletter', dueAt: null, retriesLeft: job.retriesLeft, lastError };
  }
  return {
    state: 'timer',
    dueAt: new Date(nowMs + failure.retryDelayMs),
    retriesLeft: job.retriesLeft - 1,
    lastError,
  };
}
