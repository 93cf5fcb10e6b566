/**
 * Start marks (invariant 4, seed 000's "acquired" vs "executing"): the store knows which held
 * jobs' handlers started. A lease that lapses before its handler started costs no attempt; a
 * started one costs one, so a job that kills its worker every time still reaches the
 * dead-letter area after its retries. Stores without `capabilities.startMarks` skip the group.
 */
import type { Job, JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, waitFor } from '../harness.js';

const SHORT_LEASE_MS = 50;

function skipWithoutStartMarks(store: JobStore, skip: (note: string) => void): void {
  if (!store.capabilities.startMarks) {
    skip('SKIPPED: the store has no capabilities.startMarks (start marks)');
  }
}

/** Recovers until `id` comes back in some list of the result, or times out. */
async function recoverUntil(h: Harness, store: JobStore, ids: readonly string[]) {
  const seen = new Set<string>();
  const merged = {
    requeued: [] as string[],
    deadlettered: [] as string[],
    released: [] as string[],
  };
  await waitFor(
    'the leases to lapse and be recovered',
    async () => {
      const result = await store.recoverExpiredLeases(100);
      merged.requeued.push(...result.requeued);
      merged.deadlettered.push(...result.deadlettered);
      merged.released.push(...(result.released ?? []));
      for (const id of [...result.requeued, ...result.deadlettered, ...(result.released ?? [])]) {
        seen.add(id);
      }
      return ids.every((id) => seen.has(id));
    },
    h.timeoutMs / 3,
  );
  return merged;
}

export function startMarksGroup(h: Harness): void {
  it('acquire records the first `start` jobs as started and `startAhead` more, each only with retries left', async ({
    skip,
  }) => {
    const store = await h.open();
    skipWithoutStartMarks(store, skip);
    const jobs = await enqueueJobs(store, [
      { priority: 9 },
      { priority: 8 },
      { priority: 7, retries: 0 },
      { priority: 6 },
      { priority: 5 },
    ]);
    const held = await acquire(store, { start: 2, startAhead: 2 });
    expect(held.map((j) => j.id)).toEqual(jobs.map((j) => j.id));
    // 1, 2 start; 3 (no retries left) and 4 are the two ahead, but 3 may not be recorded
    // ahead; 5 is beyond.
    expect(held.map((j) => j.startedAt !== null && j.startedAt !== undefined)).toEqual([
      true,
      true,
      false,
      true,
      false,
    ]);
    for (const job of held) {
      const stored = await store.getJob(job.id);
      expect(stored?.startedAt?.getTime() ?? null, job.id).toBe(job.startedAt?.getTime() ?? null);
    }
    // Absent `start`: every leased job starts (callers written before start marks).
    const [all] = await enqueueJobs(store, [{}]);
    const [again] = await acquire(store);
    expect(again?.id).toBe((all as Job).id);
    expect(again?.startedAt).toBeInstanceOf(Date);
  });

  it('acquire counts `start` and `startAhead` in acquisition order, not insertion order, whatever the batch size', async ({
    skip,
  }) => {
    const store = await h.open();
    skipWithoutStartMarks(store, skip);
    const started = (jobs: readonly Job[]) =>
      Object.fromEntries(jobs.map((j) => [j.id, j.startedAt instanceof Date]));
    // Acquisition order: 9 (no retries), 7, 5 (no retries), 1. A job without retries left is
    // never recorded by a lease that says `start`: a renewal records it just before it starts,
    // so a late answer or a dead owner cannot dead-letter it unrun.
    const shape = [
      { priority: 1 },
      { priority: 9, retries: 0 },
      { priority: 5, retries: 0 },
      { priority: 7 },
    ];
    // The batch reaches beyond the starts: 9 and 7 start (9 unrecorded: no retries left), 5 is
    // ahead but has no retries left, 1 is beyond.
    const [p1, p9, p5, p7] = (await enqueueJobs(store, shape)).map((j) => j.id);
    expect(started(await acquire(store, { start: 2, startAhead: 1 }))).toEqual({
      [p1 as string]: false,
      [p9 as string]: false,
      [p5 as string]: false,
      [p7 as string]: true,
    });
    // The whole batch is within the starts and those ahead: 9 starts without retries left
    // (unrecorded), 5 is ahead without retries left, 7 and 1 are ahead.
    const [q1, q9, q5, q7] = (await enqueueJobs(store, shape)).map((j) => j.id);
    const batch = await acquire(store, { limit: 4, start: 1, startAhead: 3 });
    expect(started(batch)).toEqual({
      [q1 as string]: true,
      [q9 as string]: false,
      [q5 as string]: false,
      [q7 as string]: true,
    });
    // Every job of the batch starts: those with retries left are recorded.
    const [r1, r9, r5, r7] = (await enqueueJobs(store, shape)).map((j) => j.id);
    expect(started(await acquire(store, { limit: 4, start: 4 }))).toEqual({
      [r1 as string]: true,
      [r9 as string]: false,
      [r5 as string]: false,
      [r7 as string]: true,
    });
    for (const job of batch) {
      const stored = await store.getJob(job.id);
      expect(stored?.startedAt?.getTime() ?? null, job.id).toBe(job.startedAt?.getTime() ?? null);
    }
  });

  it('a renewal with start records the start once; without it the job stays unstarted', async ({
    skip,
  }) => {
    const store = await h.open();
    skipWithoutStartMarks(store, skip);
    await enqueueJobs(store, [{}, {}]);
    const [a, b] = await acquire(store, { start: 0 });
    expect(a?.startedAt ?? null).toBeNull();
    const refA = refOf(a as Job);
    const refB = refOf(b as Job);
    expect(await store.renewLeases('owner-a', 30_000, [{ ...refA, start: true }, refB])).toEqual({
      lost: [],
    });
    const first = (await store.getJob(refA.id))?.startedAt;
    expect(first).toBeInstanceOf(Date);
    expect((await store.getJob(refB.id))?.startedAt ?? null).toBeNull();
    // Again: the first start time is kept.
    await store.renewLeases('owner-a', 30_000, [{ ...refA, start: true }]);
    expect((await store.getJob(refA.id))?.startedAt?.getTime()).toBe(first?.getTime());
    // A stale token records nothing.
    const stale = { id: refB.id, token: 'not-the-token', start: true };
    expect(await store.renewLeases('owner-a', 30_000, [stale])).toEqual({ lost: [refB.id] });
    expect((await store.getJob(refB.id))?.startedAt ?? null).toBeNull();
  });

  it('a lease that lapses before its handler started costs no attempt: async again, attempts, retries and last error untouched (released)', async ({
    skip,
  }) => {
    const store = await h.open();
    skipWithoutStartMarks(store, skip);
    const [job] = await enqueueJobs(store, [{ retries: 0 }]);
    const id = (job as Job).id;
    // A first run failed for good and an operator retried it (so there is an error to keep).
    const [first] = await acquire(store);
    const error = { message: 'first run failed', stack: 'at first' };
    await store.fail([{ ...refOf(first as Job), error, deadletter: true, retryDelayMs: 0 }]);
    expect(await store.retryDeadletter(id, 0)).not.toBeNull();
    const before = await store.getJob(id);
    // Prefetched by an owner that then died: never started.
    const [held] = await acquire(store, { owner: 'crashed', leaseMs: SHORT_LEASE_MS, start: 0 });
    expect(held?.id).toBe(id);
    const result = await recoverUntil(h, store, [id]);
    expect(result).toMatchObject({ requeued: [], deadlettered: [], released: [id] });
    await h.expectStored(store, id, {
      state: 'async',
      attempts: before?.attempts,
      retriesLeft: 0,
      lockOwner: null,
      lockToken: null,
    });
    expect((await store.getJob(id))?.lastError).toEqual(before?.lastError);
    // It runs as if nothing happened.
    const [next] = await acquire(store, { owner: 'next' });
    expect(next).toMatchObject({ id, attempts: (before?.attempts ?? 0) + 1 });
  });

  it('a lapsed lease of a started job costs an attempt; a job that kills its worker every run reaches the dead-letter area after its retries', async ({
    skip,
  }) => {
    const store = await h.open();
    skipWithoutStartMarks(store, skip);
    const [job] = await enqueueJobs(store, [{ retries: 2 }]);
    const id = (job as Job).id;
    const outcomes: string[] = [];
    for (let run = 1; run <= 3; run++) {
      // Prefetched first (a lapse then costs nothing), then started by a renewal, then the
      // worker dies.
      const [held] = await acquire(store, {
        owner: `worker-${run}`,
        leaseMs: 2_000,
        start: 0,
      });
      expect(held?.id, `run ${run}`).toBe(id);
      const renewed = await store.renewLeases(`worker-${run}`, SHORT_LEASE_MS, [
        { ...refOf(held as Job), start: true },
      ]);
      expect(renewed.lost).toEqual([]);
      const result = await recoverUntil(h, store, [id]);
      outcomes.push(result.deadlettered.includes(id) ? 'deadletter' : 'requeued');
    }
    expect(outcomes).toEqual(['requeued', 'requeued', 'deadletter']);
    await h.expectStored(store, id, { state: 'deadletter', attempts: 3, retriesLeft: 0 });
    expect((await store.getJob(id))?.lastError?.message).toMatch(/lease expired/);
  });

  it('startedAt is null while a job waits, set while it runs, and kept in history for a completed run', async ({
    skip,
  }) => {
    const store = await h.open();
    skipWithoutStartMarks(store, skip);
    store.history?.configure({ keep: 'all', retentionMs: 7 * 24 * 3_600_000 });
    const [job] = await enqueueJobs(store, [{}]);
    const id = (job as Job).id;
    expect((await store.getJob(id))?.startedAt ?? null).toBeNull();
    const [held] = await acquire(store, { start: 0 });
    const ref = refOf(held as Job);
    await store.renewLeases('owner-a', 30_000, [{ ...ref, start: true }]);
    const started = (await store.getJob(id))?.startedAt as Date;
    expect(started).toBeInstanceOf(Date);
    // Released: waiting again, no start time.
    await store.release([ref]);
    expect((await store.getJob(id))?.startedAt ?? null).toBeNull();
    const [again] = await acquire(store);
    expect(again?.startedAt).toBeInstanceOf(Date);
    await store.complete([{ ...refOf(again as Job), durationMs: 5 }]);
    if (store.history) {
      const record = await store.history.get(id);
      expect(record?.startedAt?.getTime()).toBe(again?.startedAt?.getTime());
    }
  });
}
