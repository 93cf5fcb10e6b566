/**
 * The part of a store class every SQL store with wake-ups repeats: `subscribe` on its
 * notifier (LISTEN/NOTIFY, `PRAGMA data_version`, a polled wake signal) and closing it with
 * the store.
 */
import { StoreError } from '../errors.js';
import { readWakeSignal, WakeSignalWatcher } from './change-watcher.js';
import type { Operation, Query } from './executor.js';
import { SqlJobStore } from './sql-store.js';

/** Wakes subscribers when another connection or process may have made jobs acquirable. */
export interface StoreNotifier {
  /** Adds a subscriber; returns the function that removes it. */
  subscribe(listener: () => void): () => void;
  /** Stops waking anyone (the store is closing). */
  close(): void | Promise<void>;
  /** This process started an acquisition (a notifier that polls may pause meanwhile). */
  acquiring?(): void;
}

/**
 * A `SqlJobStore` whose `subscribe` wakes engines through `notifier`, which the subclass's
 * constructor sets (after `super`, so it may read through the store's own `run`).
 *
 * @example
 * class LibsqlJobStore extends NotifyingSqlJobStore {
 *   protected readonly notifier: StoreNotifier;
 *   constructor(client: Client) {
 *     super({ label: 'libsql-store', name: 'libsql', dialect, executor, capabilities });
 *     this.notifier = new ChangeWatcher(() => readVersion(client), 10);
 *   }
 * }
 */
export abstract class NotifyingSqlJobStore extends SqlJobStore {
  protected abstract readonly notifier: StoreNotifier;

  /** Calls `listener` when jobs may have been added elsewhere; returns the unsubscribe function. */
  subscribe(listener: () => void): () => void {
    if (this.closed) throw new StoreError(`[${this.label}] subscribe: the store is closed`);
    return this.notifier.subscribe(listener);
  }

  /** Tells the notifier when acquisitions start (`acquire`, `completeAndAcquire`). */
  protected override run<T>(
    what: string,
    make: () => Operation<T>,
    options: Parameters<SqlJobStore['run']>[2],
  ): Promise<T> {
    if (what === 'acquire' || what === 'completeAndAcquire') this.notifier.acquiring?.();
    return super.run(what, make, options);
  }

  /**
   * A notifier for a database that pushes none (MySQL): reads the dialect's `wakeSignal`
   * through this store every `intervalMs` while anyone subscribes.
   */
  protected watchWakeSignal(intervalMs: number): WakeSignalWatcher {
    const signal = this.dialect.wakeSignal as Query;
    const read = () =>
      this.closed
        ? null
        : this.run('subscribe', () => readWakeSignal(signal), { transaction: false });
    return new WakeSignalWatcher(read, intervalMs);
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    // Side by side: each gives a silent server about a second before it destroys sockets.
    await Promise.all([this.notifier.close(), super.close()]);
  }
}
