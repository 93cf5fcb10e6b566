import { STORE_ABILITIES, StoreError } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, makeNewJob } from '../harness.js';
import { abilityGaps } from '../requires.js';

/** migrate / close / now / capabilities: what every other group relies on. */
export function lifecycleGroup(h: Harness): void {
  it('migrate is idempotent and leaves an empty store', async () => {
    const store = await h.open(); // migrated twice already
    await store.migrate();
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
    expect(await store.stats()).toEqual([]);
    expect(await store.listSchedules()).toEqual([]);
  });

  it('migrate run by several peers at once succeeds on every one', async () => {
    const store = await h.open();
    const peers = await h.peers(store);
    await Promise.all(peers.map((p) => p.migrate()));
    const [job] = await enqueueJobs(peers[0]!, [{}]);
    expect(await store.getJob(job!.id)).not.toBeNull();
  });

  it('migrate keeps existing jobs', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ payload: { keep: true } }]);
    await store.migrate();
    expect((await store.getJob(job!.id))?.payload).toEqual({ keep: true });
  });

  it('capabilities declare every flag as a boolean and name is a non-empty string', async () => {
    const store = await h.open();
    expect(typeof store.name).toBe('string');
    expect(store.name.length).toBeGreaterThan(0);
    for (const flag of ['notifications', 'transactionalEnqueue', 'multiProcess'] as const) {
      expect(typeof store.capabilities[flag], flag).toBe('boolean');
    }
    if (store.capabilities.notifications) expect(typeof store.subscribe).toBe('function');
  });

  it('every ability the store has is there whole: an object with each of its methods', async () => {
    const store = await h.open();
    expect(STORE_ABILITIES.flatMap((ability) => abilityGaps(store, ability))).toEqual([]);
  });

  it('now() returns a valid Date', async () => {
    const store = await h.open();
    const now = await store.now();
    expect(now).toBeInstanceOf(Date);
    expect(Number.isNaN(now.getTime())).toBe(false);
  });

  it('after close() every call rejects with StoreError, and a second close() is harmless', async () => {
    const store = await h.open();
    await store.close();
    await store.close();
    await expect(store.enqueue([makeNewJob()])).rejects.toBeInstanceOf(StoreError);
    await expect(acquire(store)).rejects.toBeInstanceOf(StoreError);
    await expect(store.getJob('1')).rejects.toBeInstanceOf(StoreError);
  });
}
