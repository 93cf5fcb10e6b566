import type { StatsRow } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf } from '../harness.js';

const sortStats = (rows: StatsRow[]) =>
  [...rows].sort((a, b) => `${a.type}/${a.state}`.localeCompare(`${b.type}/${b.state}`));

/** getJob, listJobs, deleteJob, stats: what the admin API and operators see. */
export function adminGroup(h: Harness): void {
  it('getJob returns null for ids that do not exist', async () => {
    const store = await h.open();
    expect(await store.getJob('1')).toBeNull();
    expect(await store.getJob('987654321')).toBeNull();
  });

  it('malformed ids name no job: reads return null/false and settles report them lost', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    for (const id of ['abc', '', '1.5', '-1', '99999999999999999999999']) {
      expect(await store.getJob(id), JSON.stringify(id)).toBeNull();
      expect(await store.deleteJob(id), JSON.stringify(id)).toBe(false);
      expect(await store.retryDeadletter(id, 1), JSON.stringify(id)).toBeNull();
      expect(await store.complete([{ id, token: 't' }]), JSON.stringify(id)).toEqual({
        lost: [id],
      });
      expect(await store.release([{ id, token: 't' }]), JSON.stringify(id)).toEqual({ lost: [id] });
    }
    expect(await store.listJobs({ limit: 10, offset: 0 })).toHaveLength(1);
  });

  it('listJobs returns jobs in numeric id order, paged by limit and offset', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(
      store,
      Array.from({ length: 12 }, (_, i) => ({ priority: i })),
    );
    const all = jobs.map((j) => j.id);
    expect((await store.listJobs({ limit: 100, offset: 0 })).map((j) => j.id)).toEqual(all);
    expect((await store.listJobs({ limit: 5, offset: 0 })).map((j) => j.id)).toEqual(
      all.slice(0, 5),
    );
    expect((await store.listJobs({ limit: 5, offset: 10 })).map((j) => j.id)).toEqual(
      all.slice(10),
    );
    expect(await store.listJobs({ limit: 5, offset: 12 })).toEqual([]);
  });

  it('listJobs filters by one state or several, type, scope, tenant, queue and schedule', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(store, [
      { type: 'a', scope: 's1', tenantId: 't1', queue: 'q1', schedule: 'nightly' },
      { type: 'a', scope: 's2', tenantId: 't2', delayMs: 60_000 },
      { type: 'b', scope: 's1', queue: 'q1' },
      { type: 'b' },
    ]);
    const [running] = await acquire(store, { types: ['b'], limit: 1 });
    const list = async (filter: object) =>
      (await store.listJobs({ limit: 100, offset: 0, ...filter })).map((j) => j.id);
    const [a1, a2, b1, b2] = jobs.map((j) => j.id);
    expect(running!.id).toBe(b1);
    expect(await list({ state: 'timer' })).toEqual([a2]);
    expect(await list({ state: ['async', 'running'] })).toEqual([a1, b1, b2]);
    expect(await list({ state: [] })).toEqual([]);
    expect(await list({ type: 'a' })).toEqual([a1, a2]);
    expect(await list({ scope: 's1' })).toEqual([a1, b1]);
    expect(await list({ tenantId: 't2' })).toEqual([a2]);
    expect(await list({ queue: 'q1' })).toEqual([a1, b1]);
    expect(await list({ schedule: 'nightly' })).toEqual([a1]);
    expect(await list({ type: 'b', state: 'async' })).toEqual([b2]);
  });

  it('deleteJob removes a job that is not running and returns false when there is none', async () => {
    const store = await h.open();
    const [waiting, dead] = await enqueueJobs(store, [{ delayMs: 60_000 }, { retries: 0 }]);
    const [held] = await acquire(store);
    const error = { message: 'boom', stack: null };
    await store.fail([{ ...refOf(held!), error, deadletter: true, retryDelayMs: 0 }]);
    expect(await store.deleteJob(waiting!.id)).toBe(true);
    expect(await store.deleteJob(dead!.id)).toBe(true);
    expect(await store.deleteJob(dead!.id)).toBe(false);
    expect(await store.deleteJob('987654321')).toBe(false);
    await h.expectStored(store, waiting!.id, null);
    await h.expectStored(store, dead!.id, null);
  });

  it('deleteJob of a running job on a store without cancellation is refused: the job keeps running for its owner', async ({
    skip,
  }) => {
    const store = await h.open();
    if (store.cancellation) {
      skip(
        'the store has `cancellation`: deleting a running job is a cancel request, checked by the cancellation group',
      );
    }
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    await expect(store.deleteJob(job!.id)).rejects.toThrow();
    await h.expectStored(store, job!.id, {
      state: 'running',
      lockToken: held!.lockToken,
      attempts: 1,
    });
    expect(await store.complete([refOf(held!)])).toEqual({ lost: [] });
    await h.expectStored(store, job!.id, null);
  });

  it('stats counts jobs by type and state', async () => {
    const store = await h.open();
    await enqueueJobs(store, [
      { type: 'a' },
      { type: 'a' },
      { type: 'a', delayMs: 60_000 },
      { type: 'b' },
    ]);
    await acquire(store, { types: ['b'] });
    expect(sortStats(await store.stats())).toEqual([
      { type: 'a', state: 'async', count: 2 },
      { type: 'a', state: 'timer', count: 1 },
      { type: 'b', state: 'running', count: 1 },
    ]);
  });
}
