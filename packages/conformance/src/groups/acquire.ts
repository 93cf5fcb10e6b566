import type { Job, JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, storeNow, WORK } from '../harness.js';

const ids = (jobs: readonly Job[]): string[] => jobs.map((j) => j.id);

/** What acquire returns and in which order (9), filtering (10), limit, complete. */
export function acquireGroup(h: Harness): void {
  it('acquire leases the job to the owner: running, lock owner, expiry now + leaseMs, token, attempts + 1', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ retries: 2 }]);
    const before = await storeNow(store);
    const [held] = await acquire(store, { owner: 'node-1', leaseMs: 60_000 });
    const after = await storeNow(store);
    expect(held).toMatchObject({ id: job!.id, state: 'running', lockOwner: 'node-1', attempts: 1 });
    expect(held!.retriesLeft).toBe(2);
    expect(typeof held!.lockToken).toBe('string');
    expect(held!.lockToken!.length).toBeGreaterThan(0);
    expect(held!.lockExpiresAt!.getTime()).toBeGreaterThanOrEqual(before + 60_000);
    expect(held!.lockExpiresAt!.getTime()).toBeLessThanOrEqual(after + 60_000);
    await h.expectStored(store, job!.id, {
      state: 'running',
      lockOwner: 'node-1',
      lockToken: held!.lockToken,
      lockExpiresAt: held!.lockExpiresAt,
      attempts: 1,
    });
  });

  it('an acquired job is not acquired again while its lease lives', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}, {}]);
    expect(await acquire(store, { owner: 'a' })).toHaveLength(2);
    expect(await acquire(store, { owner: 'b' })).toEqual([]);
  });

  it('acquire orders by priority descending, then due time, then insertion', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const at = (ms: number) => new Date(now - 100_000 + ms);
    const batch = [
      { priority: 0, dueAt: at(10), payload: 'p0-late' },
      { priority: 5, dueAt: at(20), payload: 'p5-late' },
      { priority: 0, dueAt: at(0), payload: 'p0-early' },
      { priority: 5, dueAt: at(20), payload: 'p5-late-second' },
      { priority: -3, dueAt: at(0), payload: 'neg' },
      { priority: 5, dueAt: at(10), payload: 'p5-early' },
      { priority: 0, dueAt: at(10), payload: 'p0-late-second' },
    ];
    const expected = [
      'p5-early',
      'p5-late',
      'p5-late-second',
      'p0-early',
      'p0-late',
      'p0-late-second',
      'neg',
    ];
    // Taken one at a time...
    await enqueueJobs(store, batch);
    const single: unknown[] = [];
    for (let i = 0; i < batch.length; i++) {
      const [next] = await acquire(store, { limit: 1, owner: `one-${i}` });
      single.push(next!.payload);
    }
    expect(single).toEqual(expected);
    // ...and in one batch, the order is the same: on a fresh store, as the jobs above are
    // running (deleting a running job is a cancel request, or refused without cancellation).
    const fresh = await h.open();
    await enqueueJobs(fresh, batch);
    expect((await acquire(fresh)).map((j) => j.payload)).toEqual(expected);
  });

  it('ids order numerically, not as text, when priority and due time tie', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const dueAt = new Date(now - 1000);
    const jobs = await enqueueJobs(
      store,
      Array.from({ length: 12 }, () => ({ dueAt })),
    );
    expect(ids(await acquire(store))).toEqual(ids(jobs));
  });

  it('acquire returns at most limit jobs, the first ones in order', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(
      store,
      Array.from({ length: 7 }, (_, i) => ({ priority: -i })),
    );
    expect(ids(await acquire(store, { limit: 3 }))).toEqual(ids(jobs.slice(0, 3)));
    expect(ids(await acquire(store, { limit: 3 }))).toEqual(ids(jobs.slice(3, 6)));
    expect(ids(await acquire(store, { limit: 3 }))).toEqual(ids(jobs.slice(6)));
    expect(await acquire(store, { limit: 3 })).toEqual([]);
  });

  it('acquire takes only the requested types', async () => {
    const store = await h.open();
    const [a, b, c] = await enqueueJobs(store, [{ type: 'a' }, { type: 'b' }, { type: 'c' }]);
    expect(ids(await acquire(store, { types: ['c', 'a'] }))).toEqual([a!.id, c!.id]);
    expect(ids(await acquire(store, { types: ['zzz'] }))).toEqual([]);
    expect(ids(await acquire(store, { types: ['b'] }))).toEqual([b!.id]);
  });

  it('acquire takes only the requested queues, or all queues when queues is null', async () => {
    const store = await h.open();
    const [d, m, l] = await enqueueJobs(store, [{}, { queue: 'mail' }, { queue: 'low' }]);
    expect(ids(await acquire(store, { queues: ['mail'] }))).toEqual([m!.id]);
    expect(ids(await acquire(store, { queues: ['nothing'] }))).toEqual([]);
    expect(ids(await acquire(store, { queues: null }))).toEqual([d!.id, l!.id]);
  });

  it('acquire takes only the requested tenants; null takes all, including jobs without tenant', async () => {
    const store = await h.open();
    const [none, t1, t2] = await enqueueJobs(store, [{}, { tenantId: 't1' }, { tenantId: 't2' }]);
    expect(ids(await acquire(store, { tenants: ['t2', 'tx'] }))).toEqual([t2!.id]);
    expect(ids(await acquire(store, { tenants: null }))).toEqual([none!.id, t1!.id]);
  });

  it('type, queue and tenant filters combine with AND', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(store, [
      { type: 'a', queue: 'q1', tenantId: 't1' },
      { type: 'a', queue: 'q2', tenantId: 't1' },
      { type: 'a', queue: 'q1', tenantId: 't2' },
      { type: 'b', queue: 'q1', tenantId: 't1' },
    ]);
    const got = await acquire(store, { types: ['a'], queues: ['q1'], tenants: ['t1'] });
    expect(ids(got)).toEqual([jobs[0]!.id]);
  });

  it('empty batches are no-ops: complete, fail, release and renew of nothing, acquire of limit 0', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    expect(await store.complete([])).toEqual({ lost: [] });
    expect(await store.fail([])).toEqual({ lost: [] });
    expect(await store.release([])).toEqual({ lost: [] });
    expect(await store.renewLeases('owner-a', 1000, [])).toEqual({ lost: [] });
    expect(await acquire(store, { limit: 0 })).toEqual([]);
    expect(await store.recoverExpiredLeases(0)).toEqual({ requeued: [], deadlettered: [] });
    expect((await store.listJobs({ limit: 10, offset: 0 }))[0]).toMatchObject({ state: 'async' });
  });

  it('large batches work in one call: 5000 jobs enqueued, acquired, renewed and completed', async () => {
    const store = await h.open();
    const count = 5000;
    const jobs = await enqueueJobs(
      store,
      Array.from({ length: count }, (_, i) => ({ payload: { i }, key: `bulk-${i}` })),
    );
    expect(jobs.map((j) => (j.payload as { i: number }).i)).toEqual(
      Array.from({ length: count }, (_, i) => i),
    );
    const held = await acquire(store, { limit: count });
    expect(held).toHaveLength(count);
    expect(await store.renewLeases('owner-a', 60_000, held.map(refOf))).toEqual({ lost: [] });
    expect(await store.complete(held.map(refOf))).toEqual({ lost: [] });
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  it('complete deletes the job and reports nothing lost', async () => {
    const store = await h.open();
    const [job, other] = await enqueueJobs(store, [{}, {}]);
    const held = await acquire(store);
    expect(await store.complete(held.map(refOf))).toEqual({ lost: [] });
    await h.expectStored(store, job!.id, null);
    await h.expectStored(store, other!.id, null);
    expect(await store.complete(held.map(refOf))).toEqual({ lost: [job!.id, other!.id] });
  });

  it('complete of a job that is not running (unknown id, never acquired) reports it lost', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{}]);
    const result = await store.complete([
      { id: job!.id, token: 'not-a-token' },
      { id: '987654321', token: 'x' },
    ]);
    expect(result.lost.sort()).toEqual([job!.id, '987654321'].sort());
    await h.expectStored(store, job!.id, { state: 'async', attempts: 0 });
  });

  it('nextDueAt is the earliest due time of waiting jobs matching the filter, or null', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    expect(await store.nextDueAt({ types: [WORK], queues: null, tenants: null })).toBeNull();
    await enqueueJobs(store, [
      { dueAt: new Date(now + 50_000) },
      { dueAt: new Date(now + 20_000), type: 'other' },
      { dueAt: new Date(now + 30_000), queue: 'q' },
      { dueAt: new Date(now + 40_000), tenantId: 't' },
    ]);
    const next = (request: Partial<Parameters<JobStore['nextDueAt']>[0]>) =>
      store
        .nextDueAt({ types: [WORK], queues: null, tenants: null, ...request })
        .then((d) => d?.getTime() ?? null);
    expect(await next({})).toBe(now + 30_000);
    expect(await next({ types: [WORK, 'other'] })).toBe(now + 20_000);
    expect(await next({ queues: ['default'] })).toBe(now + 40_000);
    expect(await next({ tenants: ['t'] })).toBe(now + 40_000);
    expect(await next({ types: ['none'] })).toBeNull();
  });

  it('nextDueAt ignores running, deadletter and suspended jobs', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    await enqueueJobs(store, [{}, { dueAt: new Date(now + 90_000), scope: 's' }]);
    const [held] = await acquire(store);
    expect(await store.nextDueAt({ types: [WORK], queues: null, tenants: null })).toEqual(
      new Date(now + 90_000),
    );
    await store.fail([
      { ...refOf(held!), error: { message: 'x', stack: null }, deadletter: true, retryDelayMs: 0 },
    ]);
    await store.suspend({ scope: 's' });
    expect(await store.nextDueAt({ types: [WORK], queues: null, tenants: null })).toBeNull();
  });

  it('completeAndAcquire (when the store has it) completes and acquires in one call', async (ctx) => {
    const store = await h.open();
    if (!store.completeAndAcquire)
      return ctx.skip('the store has no completeAndAcquire (optional)');
    const jobs = await enqueueJobs(store, [{}, {}, {}]);
    const first = await acquire(store, { limit: 1 });
    const result = await store.completeAndAcquire(
      [refOf(first[0]!), { id: '987654', token: 'x' }],
      {
        owner: 'owner-a',
        limit: 5,
        leaseMs: 30_000,
        types: [WORK],
        queues: null,
        tenants: null,
      },
    );
    expect(result.lost).toEqual(['987654']);
    expect(ids(result.jobs)).toEqual(ids(jobs.slice(1)));
    await h.expectStored(store, jobs[0]!.id, null);
    await h.expectStored(store, jobs[1]!.id, {
      state: 'running',
      lockToken: result.jobs[0]!.lockToken,
    });
  });
}
