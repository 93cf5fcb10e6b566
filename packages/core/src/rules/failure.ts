/**
 * What a failed attempt does to a job (`JobStore.fail`, invariant 6): the one rule every store
 * applies, whatever it stores. The engine decides retry or dead-letter; the store records it.
 */
import type { JobError, JobFailure, JobState } from '../store.js';

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
