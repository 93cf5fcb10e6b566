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

  test('a commit on another connection wakes subscribers before the next poll (the WAL file changed)', async () => {
    // A poll every 10 minutes: only the file's change event can wake within the test.
    const store = await openStore({ notifyIntervalMs: 600_000 });
    const peer = peerOf(store.db.name);
    const watcher = (store as unknown as { notifier: { reads: number } }).notifier;
    let wakes = 0;
    const unsubscribe = store.subscribe(() => {
      wakes += 1;
    });
    const readsAtStart = watcher.reads;
    await sleep(100);
    // Idle: no events, no reads.
    expect(watcher.reads).toBe(readsAtStart);
    expect(wakes).toBe(0);
    await peer.enqueue([newJob()]);
    await waitFor('a wake-up from the WAL file’s change', async () => wakes > 0, 5_000);
    expect(watcher.reads).toBeGreaterThan(readsAtStart);
    unsubscribe();
  });

  test('while this process writes a lot, the WAL file is not watched (the poll stands in); quiet again, it is', async () => {
    const store = await openStore({ notifyIntervalMs: 20 });
    const peer = peerOf(store.db.name);
    const watcher = (store as unknown as { notifier: { watchingFile: boolean } }).notifier;
    let wakes = 0;
    store.subscribe(() => {
      wakes += 1;
    });
    expect(watcher.watchingFile).toBe(true);
    // Busy: single enqueues back to back, timers let in between runs of 30 (more than the
    // watcher's 20 statements an interval, however slow the machine), until a watcher tick
    // finds the interval busy and stops watching.
    const busyUntil = Date.now() + 5_000;
    while (watcher.watchingFile && Date.now() < busyUntil) {
      for (let n = 0; n < 30; n++) await store.enqueue([newJob()]);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(watcher.watchingFile).toBe(false);
    // Another process's commit is still seen, by the poll (this store's own wake-ups first).
    await new Promise((resolve) => setImmediate(resolve));
    const before = wakes;
    await peer.enqueue([newJob()]);
    await waitFor('a wake-up by the poll', async () => wakes > before, 5_000);
    await waitFor('the file watched again', async () => watcher.watchingFile, 5_000);
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
