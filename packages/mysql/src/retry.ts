/**
 * Deadlocks (1213) and lock wait timeouts (1205) are normal weather in InnoDB under concurrency:
 * the server rolled the transaction back and it is safe to run it again. The store does that
 * transparently, with jittered exponential backoff so that the two losers of a deadlock do not
 * collide again in lockstep, and counts every retry so operators can see contention. Retries
 * are bounded in time as well as in number: a row held by a transaction that does not end
 * fails the call within seconds (lock waits of `LOCK_WAIT_TIMEOUT_SECONDS` on the store's own
 * connections, no retry after `RETRY_BUDGET_MS`), never minutes of 50 s waits.
 */

/**
 * `innodb_lock_wait_timeout` of the store's own sessions (the server's default is 50 s): the
 * store's statements hold row locks for milliseconds, so a longer wait is someone else's long
 * transaction, better reported than waited out.
 */
export const LOCK_WAIT_TIMEOUT_SECONDS = 3;
/** Retries of one operation after deadlocks or lock wait timeouts before its error is reported. */
export const MAX_LOCK_RETRIES = 9;
/** No retry starts once an operation has run this long (with 3 s lock waits: at most 4 waits). */
export const RETRY_BUDGET_MS = 10_000;

/** Whether retry number `retry` (1-based) may start, `elapsedMs` into the operation. */
export function mayRetry(retry: number, elapsedMs: number): boolean {
  return retry <= MAX_LOCK_RETRIES && elapsedMs < RETRY_BUDGET_MS;
}

/** One transparent retry of a store operation. */
export interface MysqlRetryEvent {
  /** The store method, e.g. `acquire`. */
  operation: string;
  /** `deadlock` (1213) or `lock-wait-timeout` (1205). */
  reason: 'deadlock' | 'lock-wait-timeout';
  /** The server's error number. */
  errno: number;
  /** 1 for the first retry. */
  attempt: number;
  /** The backoff slept before this retry. */
  delayMs: number;
}

/** Counters of transparent retries since the store was created. */
export interface MysqlRetryStats {
  deadlockRetries: number;
  lockWaitRetries: number;
}

/** Backoff before retry `attempt` (1-based): full jitter over 2, 4, 8 … ms, capped at 250 ms. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(250, 2 ** attempt);
  return Math.max(1, Math.round(ceiling * (0.5 + random() * 0.5)));
}
