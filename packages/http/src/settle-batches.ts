/**
 * Settle calls that arrive together go to the store together: completions (or failures, or
 * releases) of many HTTP requests in the same turn of the event loop become one `complete`
 * (`fail`, `release`) call, as an engine batches its own. Each request still gets its own
 * answer: whether its job's lease was lost. The same job twice waits for the batch before.
 */
import type { JobRef, SettleResult } from '@jobs/core';

interface Pending<T> {
  item: T;
  resolve(lost: boolean): void;
  reject(error: unknown): void;
}

/** A function that writes `item` in the next batch and resolves with "was its lease lost?". */
export function settleBatches<T extends JobRef>(
  write: (items: T[]) => Promise<SettleResult>,
  maxBatch = 500,
): (item: T) => Promise<boolean> {
  let queue: Pending<T>[] = [];
  let ids = new Set<string>();
  let flushed: Promise<void> | null = null;

  async function flush(): Promise<void> {
    const batch = queue;
    queue = [];
    ids = new Set();
    flushed = null;
    try {
      const { lost, cancelRequested = [] } = await write(batch.map((p) => p.item));
      // Refused either way: not held with that token, or held with a cancel request (the
      // caller reads the job to tell them apart).
      const lostIds = new Set([...lost, ...cancelRequested]);
      for (const p of batch) p.resolve(lostIds.has(p.item.id));
    } catch (error) {
      for (const p of batch) p.reject(error);
    }
  }

  return async function settle(item: T): Promise<boolean> {
    // A second call for the same job goes in a later batch, so each gets its own answer.
    while (ids.has(item.id) || queue.length >= maxBatch) await (flushed ?? Promise.resolve());
    return new Promise<boolean>((resolve, reject) => {
      if (flushed === null) {
        flushed = new Promise<void>((done) => setImmediate(() => flush().then(done)));
      }
      queue.push({ item, resolve, reject });
      ids.add(item.id);
    });
  };
}
