import type { Job, JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, sleep, storeNow } from '../harness.js';

/** Acquire with a short lease, let it expire, recover it and acquire it again under a new token. */
async function staleAndFresh(store: JobStore): Promise<{ stale: Job; fresh: Job }> {
  await enqueueJobs(store, [{ retries: 5 }]);
  const [stale] = await acquire(store, { owner: 'old', leaseMs: 100 });
  await sleep(150);
  const recovered = await store.recoverExpiredLeases(10);
  expect(recovered.requeued).toEqual([stale!.id]);
  const [fresh] = await acquire(store, { owner: 'new', leaseMs: 60_000 });
  expect(fresh!.id).toBe(stale!.id);
  return { stale: stale!, fresh: fresh! };
}

/** Invariants 2 and 3 (store side): leases, fencing tokens, renewal. */
export function leasesGroup(h: Harness): void {
  it('every acquisition writes a fresh token, distinct from the job’s previous tokens', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    const tokens = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const [held] = await acquire(store);
      tokens.add(held!.lockToken!);
      expect(await store.release([refOf(held!)])).toEqual({ lost: [] });
    }
    expect(tokens.size).toBe(5);
  });

  it('complete with a stale token changes nothing and reports the job lost', async () => {
    const store = await h.open();
    const { stale, fresh } = await staleAndFresh(store);
    expect(await store.complete([refOf(stale)])).toEqual({ lost: [stale.id] });
    await h.expectStored(store, fresh.id, {
      state: 'running',
      lockOwner: 'new',
      lockToken: fresh.lockToken,
      attempts: 2,
    });
  });

  it('fail with a stale token changes nothing and reports the job lost', async () => {
    const store = await h.open();
    const { stale, fresh } = await staleAndFresh(store);
    const error = { message: 'late failure', stack: null };
    for (const deadletter of [true, false]) {
      expect(
        await store.fail([{ ...refOf(stale), error, deadletter, retryDelayMs: 1000 }]),
      ).toEqual({ lost: [stale.id] });
    }
    await h.expectStored(store, fresh.id, {
      state: 'running',
      lockToken: fresh.lockToken,
      retriesLeft: 4,
      attempts: 2,
    });
    expect((await store.getJob(fresh.id))?.lastError?.message).not.toBe('late failure');
  });

  it('release with a stale token changes nothing and reports the job lost', async () => {
    const store = await h.open();
    const { stale, fresh } = await staleAndFresh(store);
    expect(await store.release([refOf(stale)])).toEqual({ lost: [stale.id] });
    await h.expectStored(store, fresh.id, {
      state: 'running',
      lockToken: fresh.lockToken,
      attempts: 2,
    });
  });

  it('renewLeases with a stale token changes nothing and reports the job lost', async () => {
    const store = await h.open();
    const { stale, fresh } = await staleAndFresh(store);
    expect(await store.renewLeases('old', 60_000, [refOf(stale)])).toEqual({ lost: [stale.id] });
    expect(await store.renewLeases('new', 60_000, [refOf(stale)])).toEqual({ lost: [stale.id] });
    await h.expectStored(store, fresh.id, {
      lockOwner: 'new',
      lockToken: fresh.lockToken,
      lockExpiresAt: fresh.lockExpiresAt,
    });
  });

  it('settling a finished job (token of a completed job) reports it lost', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    await store.complete([refOf(held!)]);
    const ref = refOf(held!);
    expect(await store.complete([ref])).toEqual({ lost: [held!.id] });
    expect(await store.release([ref])).toEqual({ lost: [held!.id] });
    expect(await store.renewLeases('owner-a', 1000, [ref])).toEqual({ lost: [held!.id] });
    expect(
      await store.fail([
        { ...ref, error: { message: 'x', stack: null }, deadletter: false, retryDelayMs: 0 },
      ]),
    ).toEqual({ lost: [held!.id] });
    await h.expectStored(store, held!.id, null);
  });

  it('renewLeases extends every listed lease of the owner to now + leaseMs in one call', async () => {
    const store = await h.open();
    await enqueueJobs(
      store,
      Array.from({ length: 5 }, () => ({})),
    );
    const held = await acquire(store, { owner: 'me', leaseMs: 1_000 });
    const before = await storeNow(store);
    expect(await store.renewLeases('me', 120_000, held.map(refOf))).toEqual({ lost: [] });
    const after = await storeNow(store);
    for (const job of held) {
      const stored = await store.getJob(job.id);
      expect(stored!.lockExpiresAt!.getTime()).toBeGreaterThanOrEqual(before + 120_000);
      expect(stored!.lockExpiresAt!.getTime()).toBeLessThanOrEqual(after + 120_000);
      expect(stored!.lockToken).toBe(job.lockToken);
      if (h.hasRaw) {
        expect((await h.raw(store, job.id))!.lockExpiresAt).toEqual(stored!.lockExpiresAt);
      }
    }
  });

  it('renewLeases by another owner is refused even with the right token', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { owner: 'me', leaseMs: 60_000 });
    expect(await store.renewLeases('someone-else', 600_000, [refOf(held!)])).toEqual({
      lost: [held!.id],
    });
    await h.expectStored(store, held!.id, { lockOwner: 'me', lockExpiresAt: held!.lockExpiresAt });
  });

  it('renewLeases reports only the lost refs of a mixed batch', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}, {}, {}]);
    const [a, b, c] = await acquire(store, { owner: 'me' });
    await store.complete([refOf(b!)]);
    const result = await store.renewLeases('me', 60_000, [
      refOf(a!),
      refOf(b!),
      { id: c!.id, token: 'forged' },
    ]);
    expect(result.lost.sort()).toEqual([b!.id, c!.id].sort());
  });

  it('a lease that expired can still be renewed while nobody else took the job', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { owner: 'me', leaseMs: 50 });
    await sleep(80);
    expect(await store.renewLeases('me', 60_000, [refOf(held!)])).toEqual({ lost: [] });
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [], deadlettered: [] });
    expect(await acquire(store, { owner: 'other' })).toEqual([]);
  });

  it('a job renewed every leaseMs/3 for 3 leases is never recovered nor acquired by peers', async () => {
    const store = await h.open();
    const peers = await h.peers(store, 2);
    // Roomy enough that a loaded CI machine's scheduling delays (hundreds of ms) don't eat the
    // lease: the point is renewal at leaseMs/3, not a tight deadline.
    const leaseMs = 1200;
    await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { owner: 'long', leaseMs });
    let running = true;
    const stolen: Job[] = [];
    const recovered: string[] = [];
    const thieves = peers.map(async (peer, i) => {
      while (running) {
        const r = await peer.recoverExpiredLeases(10);
        recovered.push(...r.requeued, ...r.deadlettered);
        stolen.push(...(await acquire(peer, { owner: `thief-${i}`, leaseMs })));
        await sleep(10);
      }
    });
    const lost: string[] = [];
    const until = Date.now() + leaseMs * 3;
    while (Date.now() < until) {
      await sleep(leaseMs / 3);
      lost.push(...(await store.renewLeases('long', leaseMs, [refOf(held!)])).lost);
    }
    running = false;
    await Promise.all(thieves);
    expect(lost).toEqual([]);
    expect(recovered).toEqual([]);
    expect(stolen).toEqual([]);
    expect(await store.complete([refOf(held!)])).toEqual({ lost: [] });
  });
}
