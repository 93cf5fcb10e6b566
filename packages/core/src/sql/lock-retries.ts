/**
 * Deadlocks and lock wait timeouts are normal weather under concurrency: the server rolled the
 * transaction back and it is safe to run it again (`Dialect.isRetryable` tells them). A store
 * does that transparently (`SqlJobStore.retryDelayMs`), with jittered exponential backoff so
 * that the two losers of a deadlock do not collide again in lockstep, and counts every retry
 * so operators can see contention. Retries are bounded in time as well as in number: a row
 * held by a transaction that does not end fails the call within seconds, never minutes.
 */
import { driverErrno } from './dialects/support.js';

/** Retries of one operation after deadlocks or lock wait timeouts before its error is reported. */
export const MAX_LOCK_RETRIES = 9;
/** No retry starts once an operation has run this long (with 3 s lock waits: at most 4 waits). */
export const RETRY_BUDGET_MS = 10_000;

/** One transparent retry of a store operation. */
export interface LockRetryEvent {
  /** The store method, e.g. `acquire`. */
  operation: string;
  reason: 'deadlock' | 'lock-wait-timeout';
  /** The server's error number. */
  errno: number;
  /** 1 for the first retry. */
  attempt: number;
  /** The backoff slept before this retry. */
  delayMs: number;
}

/** Counters of transparent retries since the store was created. */
export interface LockRetryStats {
  deadlockRetries: number;
  lockWaitRetries: number;
}

/** Whether retry number `retry` (1-based) may start, `elapsedMs` into the operation. */
export function mayRetry(retry: number, elapsedMs: number): boolean {
  return retry <= MAX_LOCK_RETRIES && elapsedMs < RETRY_BUDGET_MS;
}

/** Backoff before retry `attempt` (1-based): full jitter over 2, 4, 8 … ms, capped at 250 ms. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(250, 2 ** attempt);
  return Math.max(1, Math.round(ceiling * (0.5 + random() * 0.5)));
}

/** A store's retries: the decision, the counters and the listeners told of each retry. */
export class LockRetries {
  private readonly counters: LockRetryStats = { deadlockRetries: 0, lockWaitRetries: 0 };
  private readonly listeners = new Set<(event: LockRetryEvent) => void>();

  /** `classify` says what a retryable error was and its number, e.g. MySQL's 1213 and 1205. */
  constructor(
    private readonly classify: (error: unknown) => Pick<LockRetryEvent, 'reason' | 'errno'>,
  ) {}

  get stats(): Readonly<LockRetryStats> {
    return { ...this.counters };
  }

  /** Calls `listener` on every retry; returns the unsubscribe function. */
  onRetry(listener: (event: LockRetryEvent) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** For `SqlJobStore.retryDelayMs`: the backoff before retry `attempt`, or null to give up. */
  delayMs(operation: string, error: unknown, attempt: number, elapsedMs: number): number | null {
    if (!mayRetry(attempt, elapsedMs)) return null;
    const { reason, errno } = this.classify(error);
    if (reason === 'deadlock') this.counters.deadlockRetries += 1;
    else this.counters.lockWaitRetries += 1;
    const event: LockRetryEvent = {
      operation,
      reason,
      errno,
      attempt,
      delayMs: backoffMs(attempt),
    };
    for (const listener of [...this.listeners]) listener(event);
    return event.delayMs;
  }
}

/** A MySQL-family store's retries: errno 1213 is a deadlock, 1205 a lock wait timeout. */
export function mysqlLockRetries(): LockRetries {
  return new LockRetries((error) => {
    const errno = driverErrno(error) ?? 0;
    return { errno, reason: errno === 1213 ? 'deadlock' : 'lock-wait-timeout' };
  });
}
