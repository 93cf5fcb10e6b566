import { expect, it } from 'vitest';
import { enqueueJobs, type Harness, sleep, waitFor } from '../harness.js';

/**
 * `subscribe` (stores with `capabilities.notifications`): engines on other connections wake up
 * when jobs are enqueued, instead of waiting for their next poll.
 */
export function notificationsGroup(h: Harness): void {
  it('a subscriber on a peer is woken after an enqueue on another connection', async (ctx) => {
    const store = await h.open();
    if (!store.capabilities.notifications) ctx.skip('the store declares notifications: false');
    const peer = await h.peer(store);
    expect(typeof peer.subscribe).toBe('function');
    let wakeUps = 0;
    const unsubscribe = peer.subscribe!(() => {
      wakeUps += 1;
    });
    try {
      // Give a listener that connects asynchronously (LISTEN, a file watcher) time to be ready.
      await sleep(100);
      await enqueueJobs(store, [{}]);
      await waitFor('a wake-up', async () => wakeUps > 0, 10_000);
    } finally {
      unsubscribe();
    }
  });

  it('every subscriber is woken, and an unsubscribed listener is not', async (ctx) => {
    const store = await h.open();
    if (!store.capabilities.notifications) ctx.skip('the store declares notifications: false');
    const [a, b] = await h.peers(store, 2);
    const counts = { a: 0, b: 0, gone: 0 };
    const offA = a!.subscribe!(() => {
      counts.a += 1;
    });
    const offB = b!.subscribe!(() => {
      counts.b += 1;
    });
    const offGone = b!.subscribe!(() => {
      counts.gone += 1;
    });
    offGone();
    try {
      await sleep(100);
      await enqueueJobs(store, [{}]);
      await waitFor('both subscribers to wake', async () => counts.a > 0 && counts.b > 0, 10_000);
      expect(counts.gone).toBe(0);
    } finally {
      offA();
      offB();
    }
  });
}
