import { acquire, waitFor } from '@jobs/conformance';
import { describe, expect, test } from 'vitest';
import { newJob, openStore, peerOf, sleep } from './helpers.js';

describe('subscribe', () => {
  test('a commit on another connection wakes subscribers (PRAGMA data_version)', async () => {
    const store = await openStore({ notifyIntervalMs: 20 });
    const peer = peerOf(store.db.name);
    let wakes = 0;
    const unsubscribe = store.subscribe(() => {
      wakes += 1;
    });
    await sleep(60);
    expect(wakes).toBe(0);
    await peer.enqueue([newJob()]);
    await waitFor('a wake-up', async () => wakes > 0, 5_000);
    unsubscribe();
    const after = wakes;
    await peer.enqueue([newJob()]);
    await sleep(80);
    expect(wakes).toBe(after);
  });

  test('enqueue, release and recovery on the store itself wake its own subscribers', async () => {
    const store = await openStore();
    let wakes = 0;
    store.subscribe(() => {
      wakes += 1;
    });
    await store.enqueue([newJob()]);
    await waitFor('a wake-up after enqueue', async () => wakes === 1, 5_000);
    const [job] = await acquire(store, { owner: 'o', limit: 1, leaseMs: 1_000 });
    await store.release([{ id: job!.id, token: job!.lockToken! }]);
    await waitFor('a wake-up after release', async () => wakes === 2, 5_000);
  });

  test('close stops the watcher and drops listeners', async () => {
    const store = await openStore({ notifyIntervalMs: 10 });
    const peer = peerOf(store.db.name);
    let wakes = 0;
    store.subscribe(() => {
      wakes += 1;
    });
    await store.close();
    await peer.enqueue([newJob()]);
    await sleep(50);
    expect(wakes).toBe(0);
    expect(() => store.subscribe(() => {})).toThrow(/closed/);
  });
});
