import { FakeClock, LEASE_EXPIRED_MESSAGE } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, sleep, storeNow, waitFor } from '../harness.js';

/** Invariant 4: an expired lease makes the job acquirable again; poison pills end in deadletter. */
export function recoveryGroup(h: Harness): void {
  it('an expired lease is recovered: async again, one retry fewer, lock cleared, lease-expired error', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ retries: 3 }]);
    const [held] = await acquire(store, { leaseMs: 100 });
    await sleep(150);
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [job!.id], deadlettered: [] });
    await h.expectStored(store, job!.id, {
      state: 'async',
      retriesLeft: 2,
      attempts: 1,
      lockOwner: null,
      lockToken: null,
      lockExpiresAt: null,
      lastError: { message: LEASE_EXPIRED_MESSAGE, stack: null },
    });
    const [again] = await acquire(store, { owner: 'rescuer' });
    expect(again).toMatchObject({ id: job!.id, attempts: 2, lockOwner: 'rescuer' });
    expect(again!.lockToken).not.toBe(held!.lockToken);
  });

  it('a live lease is not recovered', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { leaseMs: 60_000 });
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [], deadlettered: [] });
    await h.expectStored(store, held!.id, { state: 'running', lockToken: held!.lockToken });
  });

  it('a lease is never recovered before it expires on the store clock (recovery polled until it is)', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { leaseMs: 400 });
    const expiresAt = held!.lockExpiresAt!.getTime();
    // Each call is followed by a reading of the store's clock: a call that recovered the job ran
    // at or before that reading, so the reading must not be earlier than the lease's end (give
    // or take a few ms, for a store whose SQL rounds the time where now() truncates it; the
    // injected-clock test below holds the exact millisecond).
    const SLACK_MS = 5;
    const early: string[] = [];
    await waitFor(
      'the lease to expire and be recovered',
      async () => {
        const result = await store.recoverExpiredLeases(10);
        const after = await storeNow(store);
        if (result.requeued.length === 0) return false;
        expect(result.requeued).toEqual([job!.id]);
        if (after < expiresAt - SLACK_MS) {
          early.push(
            `recovered by a call that returned ${expiresAt - after} ms before the lease ended`,
          );
        }
        return true;
      },
      h.timeoutMs / 2,
      2,
    );
    expect(early).toEqual([]);
  });

  it('on an injected clock, a lease is recovered at its expiry to the millisecond and not 1 ms before', async (ctx) => {
    const clock = new FakeClock();
    const store = await h.openOnClock(clock, ctx);
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { leaseMs: 1_000 });
    expect(held!.lockExpiresAt!.getTime()).toBe(clock.now() + 1_000);
    clock.advance(999);
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [], deadlettered: [] });
    expect(await acquire(store, { owner: 'other' })).toEqual([]);
    await h.expectStored(store, job!.id, { state: 'running', lockToken: held!.lockToken });
    clock.advance(1);
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [job!.id], deadlettered: [] });
  });

  it('an expired lease with no retries left goes to the dead-letter area', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ retries: 0 }]);
    await acquire(store, { leaseMs: 50 });
    await sleep(100);
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [], deadlettered: [job!.id] });
    await h.expectStored(store, job!.id, {
      state: 'deadletter',
      lockToken: null,
      lockOwner: null,
      lastError: { message: LEASE_EXPIRED_MESSAGE, stack: null },
    });
    expect(await acquire(store)).toEqual([]);
  });

  it('a job that keeps losing its lease ends in deadletter after its retries instead of looping', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ retries: 2 }]);
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const got = await acquire(store, { leaseMs: 30 });
      if (got.length === 0) break;
      await sleep(50);
      const r = await store.recoverExpiredLeases(10);
      outcomes.push(
        r.requeued.length ? 'requeued' : r.deadlettered.length ? 'deadlettered' : 'none',
      );
    }
    expect(outcomes).toEqual(['requeued', 'requeued', 'deadlettered']);
    await h.expectStored(store, job!.id, { state: 'deadletter', attempts: 3, retriesLeft: 0 });
  });

  it('recoverExpiredLeases handles at most limit jobs per call', async () => {
    const store = await h.open();
    await enqueueJobs(
      store,
      Array.from({ length: 5 }, () => ({})),
    );
    await acquire(store, { leaseMs: 50 });
    await sleep(100);
    const first = await store.recoverExpiredLeases(2);
    expect(first.requeued).toHaveLength(2);
    const rest = await store.recoverExpiredLeases(10);
    expect(rest.requeued).toHaveLength(3);
    expect(new Set([...first.requeued, ...rest.requeued]).size).toBe(5);
  });

  it(
    'peers recovering the same expired leases at once recover each job once',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      for (let round = 0; round < Math.min(h.rounds, 5); round++) {
        const jobs = await enqueueJobs(
          store,
          Array.from({ length: 20 }, () => ({})),
        );
        await acquire(store, { leaseMs: 30 });
        await sleep(60);
        const results = await Promise.all(peers.map((p) => p.recoverExpiredLeases(100)));
        const requeued = results.flatMap((r) => r.requeued);
        expect(requeued.sort(), `round ${round}`).toEqual(jobs.map((j) => j.id).sort());
        for (const job of jobs) await store.deleteJob(job.id);
      }
    },
    h.raceTimeout(),
  );

  it(
    'renew racing recovery of a just-expired lease: exactly one of them wins',
    async () => {
      const store = await h.open();
      const [peer] = await h.peers(store, 1);
      const counts = { renewed: 0, recovered: 0 };
      for (let round = 0; round < h.rounds; round++) {
        const [job] = await enqueueJobs(store, [{}]);
        const [held] = await acquire(store, { leaseMs: 20, owner: 'me' });
        await sleep(30);
        const [renew, recover] = await Promise.all([
          store.renewLeases('me', 60_000, [refOf(held!)]),
          peer!.recoverExpiredLeases(10),
        ]);
        const renewed = renew.lost.length === 0;
        const recovered = recover.requeued.includes(job!.id);
        expect(
          renewed !== recovered,
          `round ${round}: renewed=${renewed} recovered=${recovered}`,
        ).toBe(true);
        const stored = await store.getJob(job!.id);
        expect(stored!.state).toBe(renewed ? 'running' : 'async');
        counts[renewed ? 'renewed' : 'recovered'] += 1;
        // A renewed job is still held: its owner completes it (deleting a running job is a
        // cancel request, or refused by a store without cancellation); a requeued one waits.
        if (renewed) expect(await store.complete([refOf(held!)])).toEqual({ lost: [] });
        else expect(await store.deleteJob(job!.id)).toBe(true);
      }
      expect(counts.renewed + counts.recovered).toBe(h.rounds);
    },
    h.raceTimeout(),
  );

  it(
    'complete racing recovery of a just-expired lease: the job is either deleted or requeued, never both',
    async () => {
      const store = await h.open();
      const [peer] = await h.peers(store, 1);
      for (let round = 0; round < h.rounds; round++) {
        const [job] = await enqueueJobs(store, [{}]);
        const [held] = await acquire(store, { leaseMs: 20 });
        await sleep(30);
        const [complete, recover] = await Promise.all([
          store.complete([refOf(held!)]),
          peer!.recoverExpiredLeases(10),
        ]);
        const completed = complete.lost.length === 0;
        const recovered = recover.requeued.includes(job!.id);
        expect(completed !== recovered, `round ${round}`).toBe(true);
        const stored = await store.getJob(job!.id);
        if (completed) expect(stored).toBeNull();
        else expect(stored?.state).toBe('async');
        if (stored) await store.deleteJob(job!.id);
      }
    },
    h.raceTimeout(),
  );
}
