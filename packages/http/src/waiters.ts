/**
 * Long-poll waits: an acquire with `waitMs` that found nothing sleeps here until the store says
 * jobs may have been enqueued (`store.subscribe`), this API gave a job back (release, a retry
 * due at once), a due time it knows of comes, or the next poll tick — whichever comes first.
 */
import type { JobStore } from '@jobs/core';

export class Waiters {
  private readonly waiting = new Set<() => void>();
  private unsubscribe: (() => void) | null = null;
  private closed = false;
  /** Bumped by every wake-up: a waiter that looked before a wake-up does not sleep through it. */
  private wakeups = 0;

  constructor(private readonly store: JobStore) {}

  get size(): number {
    return this.waiting.size;
  }

  /** A mark to pass to `wait`: taken before looking for jobs. */
  mark(): number {
    this.listen();
    return this.wakeups;
  }

  /** Wakes every waiter: something may be acquirable now. */
  wakeAll(): void {
    this.wakeups++;
    for (const wake of [...this.waiting]) wake();
  }

  /**
   * Resolves after `ms`, or earlier on a wake-up or when `signal` aborts — at once when a
   * wake-up came since `mark` (while the caller was looking for jobs).
   */
  wait(ms: number, signal: AbortSignal | null, mark: number): Promise<void> {
    if (this.closed || ms <= 0 || signal?.aborted || mark !== this.wakeups) {
      return Promise.resolve();
    }
    this.listen();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.waiting.add(done);
    });
  }

  /** One subscription for all waiters, opened with the first wait. */
  private listen(): void {
    if (this.unsubscribe !== null || typeof this.store.subscribe !== 'function') return;
    if (!this.store.capabilities.notifications) return;
    this.unsubscribe = this.store.subscribe(() => this.wakeAll());
  }

  close(): void {
    this.closed = true;
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.wakeAll();
  }
}
