import type { Job, JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, storeNow } from '../harness.js';

const error = { message: 'gave up', stack: 'Error: gave up' };

async function deadJob(store: JobStore): Promise<Job> {
  const [job] = await enqueueJobs(store, [{ retries: 1 }]);
  const [held] = await acquire(store);
  await store.fail([{ ...refOf(held!), error, deadletter: true, retryDelayMs: 0 }]);
  return job!;
}

/** Invariant 7 (dead-letter half): never acquired; retry revives with fresh retries; delete removes. */
export function deadletterGroup(h: Harness): void {
  it('deadletter jobs are never acquired nor recovered', async () => {
    const store = await h.open();
    const job = await deadJob(store);
    expect(await acquire(store)).toEqual([]);
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [], deadlettered: [] });
    await h.expectStored(store, job.id, { state: 'deadletter' });
  });

  it('retryDeadletter moves the job to async, due now, with fresh retries, keeping the last error', async () => {
    const store = await h.open();
    const job = await deadJob(store);
    const before = await storeNow(store);
    const revived = await store.retryDeadletter(job.id, 4);
    const after = await storeNow(store);
    expect(revived).toMatchObject({ id: job.id, state: 'async', retriesLeft: 4, lastError: error });
    expect(revived!.dueAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(revived!.dueAt.getTime()).toBeLessThanOrEqual(after);
    await h.expectStored(store, job.id, { state: 'async', retriesLeft: 4, lockToken: null });
    const [again] = await acquire(store);
    expect(again).toMatchObject({ id: job.id, attempts: 2 });
  });

  it('retryDeadletter of a job that is not in deadletter returns null and changes nothing', async () => {
    const store = await h.open();
    const [waiting, running] = await enqueueJobs(store, [{ delayMs: 60_000 }, {}]);
    const [held] = await acquire(store);
    expect(await store.retryDeadletter(waiting!.id, 9)).toBeNull();
    expect(await store.retryDeadletter(running!.id, 9)).toBeNull();
    expect(await store.retryDeadletter('987654321', 9)).toBeNull();
    await h.expectStored(store, waiting!.id, { state: 'timer', retriesLeft: 3 });
    await h.expectStored(store, running!.id, { state: 'running', lockToken: held!.lockToken });
  });

  it('deleteJob removes a deadletter job', async () => {
    const store = await h.open();
    const job = await deadJob(store);
    expect(await store.deleteJob(job.id)).toBe(true);
    await h.expectStored(store, job.id, null);
    expect(await store.deleteJob(job.id)).toBe(false);
  });
}
