/**
 * Deadlocks (1213) and lock wait timeouts (1205) are normal weather in InnoDB under concurrency:
 * the server rolled the transaction back and it is safe to run it again. The store does that
 * transparently, with jittered exponential backoff so that the two losers of a deadlock do not
 * collide again in lockstep, and counts every retry so operators can see contention.
 */

/** MySQL/MariaDB error numbers the store retries. */
export const ER_LOCK_DEADLOCK = 1213;
export const ER_LOCK_WAIT_TIMEOUT = 1205;
export const ER_DUP_ENTRY = 1062;

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

/** The server error number of a mysql2 error, if it is one. */
export function errnoOf(error: unknown): number | undefined {
  if (typeof error === 'object' && error !== null && 'errno' in error) {
    const errno = (error as { errno: unknown }).errno;
    return typeof errno === 'number' ? errno : undefined;
  }
  return undefined;
}

export function retryReason(error: unknown): MysqlRetryEvent['reason'] | null {
  const errno = errnoOf(error);
  if (errno === ER_LOCK_DEADLOCK) return 'deadlock';
  if (errno === ER_LOCK_WAIT_TIMEOUT) return 'lock-wait-timeout';
  return null;
}

/** Backoff before retry `attempt` (1-based): full jitter over 2, 4, 8 … ms, capped at 250 ms. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(250, 2 ** attempt);
  return Math.max(1, Math.round(ceiling * (0.5 + random() * 0.5)));
}
