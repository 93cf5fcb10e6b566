import { expect, it } from 'vitest';
import {
  acquire,
  acquiredAt,
  enqueueJobs,
  type Harness,
  refOf,
  storeNow,
  waitFor,
} from '../harness.js';

const error = {
  message: 'handler threw',
  stack: 'Error: handler threw\n    at handler (job.ts:1:1)',
};

/** Invariant 6: failures go back to timer after the backoff with one retry fewer, or deadletter. */
export function failureGroup(h: Harness): void {
  it('fail with retries left makes a timer due after the delay, one retry fewer, error kept, lock cleared', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ retries: 3 }]);
    const [held] = await acquire(store);
    const before = await storeNow(store);
    expect(
      await store.fail([{ ...refOf(held!), error, deadletter: false, retryDelayMs: 60_000 }]),
    ).toEqual({ lost: [] });
    const after = await storeNow(store);
    await h.expectStored(store, job!.id, {
      state: 'timer',
      retriesLeft: 2,
      attempts: 1,
      lastError: error,
      lockOwner: null,
      lockToken: null,
      lockExpiresAt: null,
    });
    const stored = await store.getJob(job!.id);
    expect(stored!.dueAt.getTime()).toBeGreaterThanOrEqual(before + 60_000);
    expect(stored!.dueAt.getTime()).toBeLessThanOrEqual(after + 60_000);
    expect(await acquire(store)).toEqual([]);
  });

  it('a failed job is acquired again once its backoff has passed, not before', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    await store.fail([{ ...refOf(held!), error, deadletter: false, retryDelayMs: 150 }]);
    const due = (await store.getJob(held!.id))!.dueAt.getTime();
    const [again] = await waitFor('the retry', async () => {
      const jobs = await acquire(store, { leaseMs: 30_000 });
      return jobs.length ? jobs : undefined;
    });
    expect(again).toMatchObject({ id: held!.id, attempts: 2, retriesLeft: 2 });
    expect(acquiredAt(again!, 30_000)).toBeGreaterThanOrEqual(due);
  });

  it('a failure with no backoff is acquirable again at once', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    await store.fail([{ ...refOf(held!), error, deadletter: false, retryDelayMs: 0 }]);
    const [again] = await acquire(store, { owner: 'next' });
    expect(again).toMatchObject({ id: held!.id, attempts: 2, retriesLeft: 2 });
  });

  it('fail with deadletter: true goes to the dead-letter area whatever retries are left', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ retries: 10 }]);
    const [held] = await acquire(store);
    await store.fail([{ ...refOf(held!), error, deadletter: true, retryDelayMs: 0 }]);
    await h.expectStored(store, job!.id, {
      state: 'deadletter',
      retriesLeft: 10,
      lastError: error,
      lockToken: null,
      lockOwner: null,
      lockExpiresAt: null,
    });
  });

  it('an error without stack is kept with stack null', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    const plain = { message: 'thrown string', stack: null };
    await store.fail([{ ...refOf(held!), error: plain, deadletter: false, retryDelayMs: 1000 }]);
    await h.expectStored(store, job!.id, { lastError: plain });
  });

  it('a long error message and stack are kept', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    const long = { message: 'm'.repeat(4000), stack: 's\n'.repeat(10_000) };
    await store.fail([{ ...refOf(held!), error: long, deadletter: true, retryDelayMs: 0 }]);
    expect((await store.getJob(job!.id))!.lastError).toEqual(long);
  });

  it('fail settles a batch: each job by its own rule, stale refs reported lost', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(store, [{}, {}, {}]);
    const held = await acquire(store);
    const result = await store.fail([
      { ...refOf(held[0]!), error, deadletter: false, retryDelayMs: 60_000 },
      { ...refOf(held[1]!), error, deadletter: true, retryDelayMs: 0 },
      { id: held[2]!.id, token: 'stale', error, deadletter: true, retryDelayMs: 0 },
    ]);
    expect(result).toEqual({ lost: [jobs[2]!.id] });
    expect((await store.getJob(jobs[0]!.id))!.state).toBe('timer');
    expect((await store.getJob(jobs[1]!.id))!.state).toBe('deadletter');
    expect((await store.getJob(jobs[2]!.id))!.state).toBe('running');
  });
}
