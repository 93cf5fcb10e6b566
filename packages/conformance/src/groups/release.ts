import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf } from '../harness.js';

/** Invariant 15: jobs acquired but not started go back at once, without counting an attempt. */
export function releaseGroup(h: Harness): void {
  it('release makes the job async again with the attempt given back and the lock cleared', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ retries: 3 }]);
    const [held] = await acquire(store, { owner: 'leaving' });
    expect(await store.release([refOf(held!)])).toEqual({ lost: [] });
    await h.expectStored(store, job!.id, {
      state: 'async',
      attempts: 0,
      retriesLeft: 3,
      lockOwner: null,
      lockToken: null,
      lockExpiresAt: null,
      lastError: null,
    });
  });

  it('a released job is acquirable at once by another owner', async () => {
    const store = await h.open();
    const peer = await h.peer(store);
    await enqueueJobs(store, [{}, {}]);
    const held = await acquire(store, { owner: 'leaving', leaseMs: 60_000 });
    expect(await acquire(peer, { owner: 'other' })).toEqual([]);
    await store.release(held.map(refOf));
    const taken = await acquire(peer, { owner: 'other' });
    expect(taken.map((j) => j.id)).toEqual(held.map((j) => j.id));
    expect(taken.every((j) => j.attempts === 1)).toBe(true);
  });

  it('a released job keeps its place in acquisition order', async () => {
    const store = await h.open();
    const [a, b] = await enqueueJobs(store, [{ priority: 1 }, {}]);
    const held = await acquire(store, { limit: 1 });
    expect(held[0]!.id).toBe(a!.id);
    await store.release(held.map(refOf));
    expect((await acquire(store)).map((j) => j.id)).toEqual([a!.id, b!.id]);
  });

  it('releasing an exclusive job frees its scope', async () => {
    const store = await h.open();
    const [first] = await enqueueJobs(store, [
      { scope: 's', exclusive: true },
      { scope: 's', exclusive: true },
    ]);
    const held = await acquire(store);
    expect(held.map((j) => j.id)).toEqual([first!.id]);
    await store.release(held.map(refOf));
    expect((await acquire(store, { owner: 'next' })).map((j) => j.id)).toEqual([first!.id]);
  });

  it('release of several jobs reports only the stale ones lost', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{}, {}]);
    const [a, b] = await acquire(store);
    const result = await store.release([refOf(a!), { id: b!.id, token: 'stale' }]);
    expect(result).toEqual({ lost: [b!.id] });
    await h.expectStored(store, b!.id, { state: 'running', lockToken: b!.lockToken });
  });
}
