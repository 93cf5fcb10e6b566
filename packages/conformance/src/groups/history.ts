import type { HistorySettings, Job, JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import {
  acquire,
  completeJobs,
  enqueueJobs,
  type Harness,
  refOf,
  sleep,
  storeNow,
} from '../harness.js';

const WEEK = 7 * 24 * 3_600_000;
const error = { message: 'gave up', stack: 'Error: gave up' };

type HistoryStore = JobStore & Required<Pick<JobStore, 'history'>>;

/** The store with history configured, or null (the test is skipped) when it keeps none. */
async function historyStore(
  h: Harness,
  skip: (note: string) => void,
  settings: Partial<HistorySettings> = {},
): Promise<HistoryStore> {
  const store = await h.open();
  if (!store.history) skip('the store keeps no history (no `history`)');
  store.history?.configure({ keep: 'all', retentionMs: WEEK, ...settings });
  return store as HistoryStore;
}

async function deadJob(store: JobStore, type = 'work'): Promise<Job> {
  const [job] = await enqueueJobs(store, [{ type, retries: 0 }]);
  const [held] = await acquire(store, { types: [type] });
  await store.fail([{ ...refOf(held as Job), error, deadletter: true, retryDelayMs: 0 }]);
  return job as Job;
}

/** History: finished jobs are recorded with their outcome in the write that finishes them. */
export function historyGroup(h: Harness): void {
  it('complete writes a history record with the result, duration, owner and the job fields', async ({
    skip,
  }) => {
    const store = await historyStore(h, skip);
    const [job] = await enqueueJobs(store, [
      { payload: { to: 'a@b.c' }, priority: 3, scope: 's', key: 'k1', tenantId: 't', queue: 'q' },
    ]);
    const [held] = await acquire(store, { queues: ['q'] });
    const before = await storeNow(store);
    const result = { sent: true, id: 'x'.repeat(60 * 1024) };
    const { lost } = await store.complete([
      { ...refOf(held as Job), resultJson: JSON.stringify(result), durationMs: 1234 },
    ]);
    const after = await storeNow(store);
    expect(lost).toEqual([]);
    expect(await store.getJob(job!.id)).toBeNull();
    const record = await store.history.get(job!.id);
    expect(record).toMatchObject({
      id: job!.id,
      state: 'finished',
      outcome: 'completed',
      type: 'work',
      payload: { to: 'a@b.c' },
      priority: 3,
      scope: 's',
      key: 'k1',
      tenantId: 't',
      queue: 'q',
      attempts: 1,
      lockOwner: 'owner-a',
      lockToken: null,
      durationMs: 1234,
    });
    expect(record!.result).toEqual(result);
    expect(record!.finishedAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(record!.finishedAt.getTime()).toBeLessThanOrEqual(after);
    // The key is free again: history is not the live table.
    const [again] = await enqueueJobs(store, [{ key: 'k1' }]);
    expect(again!.id).not.toBe(job!.id);
  });

  it('a completion without result or duration records null for both', async ({ skip }) => {
    const store = await historyStore(h, skip);
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    await store.complete([refOf(held as Job)]);
    expect(await store.history.get(job!.id)).toMatchObject({ result: null, durationMs: null });
  });

  it('completeAndAcquire writes the records of the jobs it completes', async ({ skip }) => {
    const store = await historyStore(h, skip);
    if (!store.completeAndAcquire) skip('the store has no completeAndAcquire');
    const [first, second] = await enqueueJobs(store, [{}, {}]);
    const [held] = await acquire(store, { limit: 1 });
    const result = await store.completeAndAcquire!(
      [{ ...refOf(held as Job), resultJson: '"done"', durationMs: 7 }],
      {
        owner: 'owner-a',
        limit: 10,
        leaseMs: 30_000,
        types: ['work'],
        queues: null,
        tenants: null,
      },
    );
    expect(result.lost).toEqual([]);
    expect(result.jobs.map((j) => j.id)).toEqual([second!.id]);
    expect(await store.history.get(first!.id)).toMatchObject({ result: 'done', durationMs: 7 });
    expect(await store.history.get(second!.id)).toBeNull();
  });

  it('a completion with a stale token writes no record, also when it races the new holder', async ({
    skip,
  }) => {
    const store = await historyStore(h, skip);
    // Each store instance keeps what its own engine configured: so do the peers here.
    const peers = await h.peers(store, 2);
    for (const peer of peers) peer.history?.configure({ keep: 'all', retentionMs: WEEK });
    for (let round = 0; round < Math.min(h.rounds, 5); round++) {
      const [job] = await enqueueJobs(store, [{}]);
      const [first] = await acquire(store, { owner: 'owner-a', leaseMs: 30 });
      await sleep(60);
      await store.recoverExpiredLeases(100);
      const [second] = await acquire(store, { owner: 'owner-b' });
      expect(second?.id).toBe(job!.id);
      const [stale, current] = await Promise.all([
        peers[0]!.complete([{ ...refOf(first as Job), resultJson: '"stale"' }]),
        peers[1]!.complete([{ ...refOf(second as Job), resultJson: '"current"' }]),
      ]);
      expect(stale.lost).toEqual([job!.id]);
      expect(current.lost).toEqual([]);
      expect(await store.history.get(job!.id)).toMatchObject({
        lockOwner: 'owner-b',
        result: 'current',
        attempts: 2,
      });
    }
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    const { lost } = await store.complete([{ id: job!.id, token: 'not-the-token' }]);
    expect(lost).toEqual([job!.id]);
    expect(await store.history.get(job!.id)).toBeNull();
    await h.expectStored(store, job!.id, { state: 'running', lockToken: held!.lockToken });
  });

  it("deleting a dead-letter job records outcome 'deadletter' with its last error; other deletes record nothing", async ({
    skip,
  }) => {
    const store = await historyStore(h, skip);
    const dead = await deadJob(store);
    const [waiting] = await enqueueJobs(store, [{ delayMs: 60_000 }]);
    expect(await store.deleteJob(dead.id)).toBe(true);
    expect(await store.deleteJob(waiting!.id)).toBe(true);
    expect(await store.history.get(dead.id)).toMatchObject({
      outcome: 'deadletter',
      lastError: error,
      result: null,
      durationMs: null,
      attempts: 1,
    });
    expect(await store.history.get(waiting!.id)).toBeNull();
  });

  it("keep 'failed' records dead-letter deletions only; keep 'none' records nothing", async ({
    skip,
  }) => {
    const store = await historyStore(h, skip, { keep: 'failed' });
    const [completed] = await completeJobs(store, 1);
    const dead = await deadJob(store);
    await store.deleteJob(dead.id);
    expect(await store.history.get(completed!.id)).toBeNull();
    expect(await store.history.get(dead.id)).toMatchObject({ outcome: 'deadletter' });

    store.history.configure({ keep: 'none', retentionMs: WEEK });
    const [quiet] = await completeJobs(store, 1);
    const quietDead = await deadJob(store);
    await store.deleteJob(quietDead.id);
    expect(await store.history.get(quiet!.id)).toBeNull();
    expect(await store.history.get(quietDead.id)).toBeNull();
    expect(await store.getJob(quiet!.id)).toBeNull();
  });

  it('listHistory pages newest first by keyset and filters by type, outcome and time', async ({
    skip,
  }) => {
    const store = await historyStore(h, skip);
    const start = new Date(await storeNow(store));
    const a = await completeJobs(store, 5, 'a');
    const b = await completeJobs(store, 3, 'b');
    const dead = await deadJob(store, 'a');
    await store.deleteJob(dead.id);
    const seen: string[] = [];
    let after: { finishedAt: Date; id: string } | null = null;
    for (let page = 0; page < 10; page++) {
      const records = await store.history.list({ limit: 3, after });
      if (records.length === 0) break;
      seen.push(...records.map((r) => r.id));
      const last = records[records.length - 1]!;
      after = { finishedAt: last.finishedAt, id: last.id };
    }
    expect(seen).toHaveLength(9);
    expect(new Set(seen).size).toBe(9);
    const all = await store.history.list({ limit: 100 });
    expect(all.map((r) => r.id)).toEqual(seen);
    for (let i = 1; i < all.length; i++) {
      const [newer, older] = [all[i - 1]!, all[i]!];
      const order =
        newer.finishedAt.getTime() - older.finishedAt.getTime() ||
        Number(BigInt(newer.id) - BigInt(older.id));
      expect(order, 'newest first').toBeGreaterThan(0);
    }
    const ofB = await store.history.list({ type: 'b', limit: 100 });
    expect(ofB.map((r) => r.id).sort()).toEqual(b.map((j) => j.id).sort());
    const deadOnes = await store.history.list({ outcome: 'deadletter', limit: 100 });
    expect(deadOnes.map((r) => r.id)).toEqual([dead.id]);
    const completedA = await store.history.list({ type: 'a', outcome: 'completed', limit: 100 });
    expect(completedA.map((r) => r.id).sort()).toEqual(a.map((j) => j.id).sort());
    expect(await store.history.list({ since: start, limit: 100 })).toHaveLength(9);
    expect(await store.history.list({ until: start, limit: 100 })).toEqual([]);
  });

  it('pruneHistory deletes only records past the retention, oldest first, at most limit per call', async ({
    skip,
  }) => {
    const store = await historyStore(h, skip);
    const old = await completeJobs(store, 3);
    const between = await storeNow(store);
    await sleep(1_000);
    const recent = await completeJobs(store, 2);
    // Retention reaching back to 300 ms after the old ones finished: only they are expired, and
    // the recent ones stay kept for the next 700 ms of calls (a loaded machine took over 200).
    const retention = (await storeNow(store)) - between - 300;
    expect(await store.history.prune(retention, 2)).toBe(2);
    expect(await store.history.prune(retention, 2)).toBe(1);
    expect(await store.history.prune(retention, 2)).toBe(0);
    for (const job of old) expect(await store.history.get(job.id)).toBeNull();
    for (const job of recent) expect(await store.history.get(job.id)).not.toBeNull();
  });

  it('pruners racing on separate connections delete each expired record once', async ({ skip }) => {
    const store = await historyStore(h, skip);
    const peers = await h.peers(store);
    await completeJobs(store, 12);
    await sleep(20);
    const results = await Promise.all(
      peers.map(async (peer) => {
        let pruned = 0;
        for (let i = 0; i < 50; i++) {
          const n = await peer.history!.prune(5, 1);
          if (n === 0) break;
          pruned += n ?? 0;
          if (n === null) await sleep(5);
        }
        return pruned;
      }),
    );
    expect(results.reduce((x, y) => x + y, 0)).toBe(12);
    expect(await store.history.list({ limit: 100 })).toEqual([]);
  });

  it('retryDeadletterMany and deleteMany act in batches of at most limit and say how many', async ({
    skip,
  }) => {
    const store = await historyStore(h, skip);
    if (!store.bulk) skip('the store has no bulk calls (no `bulk`)');
    const dead = [await deadJob(store, 'x'), await deadJob(store, 'x'), await deadJob(store, 'y')];
    await enqueueJobs(store, [{ type: 'x', delayMs: 60_000 }]);
    expect(await store.bulk!.countJobs({ type: 'x' })).toBe(3);
    expect(await store.bulk!.countJobs({ type: 'x', state: 'deadletter' })).toBe(2);
    expect(await store.bulk!.retryDeadletterMany({ type: 'x' }, 5, 1)).toBe(1);
    expect(await store.bulk!.retryDeadletterMany({ type: 'x' }, 5, 10)).toBe(1);
    expect(await store.bulk!.retryDeadletterMany({ type: 'x' }, 5, 10)).toBe(0);
    await h.expectStored(store, dead[0]!.id, { state: 'async', retriesLeft: 5 });
    expect(await store.bulk!.deleteMany({ type: 'y' }, 10)).toBe(1);
    expect(await store.history.get(dead[2]!.id)).toMatchObject({ outcome: 'deadletter' });
    expect(await store.bulk!.deleteMany({ type: 'x' }, 2)).toBe(2);
    expect(await store.bulk!.deleteMany({ type: 'x' }, 2)).toBe(1);
    expect(await store.bulk!.countJobs({})).toBe(0);
    // Revived jobs that were deleted while waiting are not dead-letter deletions.
    expect(await store.history.get(dead[0]!.id)).toBeNull();
  });
}
