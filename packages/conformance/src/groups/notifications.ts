import type { JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { enqueueJobs, type Harness, waitFor } from '../harness.js';

/**
 * Enqueues a job on `store` until `woken()` says the subscribers saw it. A listener that
 * connects asynchronously (LISTEN, a file watcher) may miss what is enqueued before it is
 * ready, and how long that takes depends on the link, so the suite enqueues again every 100 ms
 * instead of guessing a fixed head start.
 */
async function enqueueUntilWoken(
  h: Harness,
  store: JobStore,
  what: string,
  woken: () => boolean,
): Promise<void> {
  let lastEnqueue = Number.NEGATIVE_INFINITY;
  await waitFor(
    what,
    async () => {
      if (woken()) return true;
      if (Date.now() - lastEnqueue >= 100) {
        lastEnqueue = Date.now();
        await enqueueJobs(store, [{}]);
      }
      return woken();
    },
    h.timeoutMs / 3,
  );
}

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
      await enqueueUntilWoken(h, store, 'a wake-up', () => wakeUps > 0);
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
      await enqueueUntilWoken(
        h,
        store,
        'both subscribers to wake',
        () => counts.a > 0 && counts.b > 0,
      );
      expect(counts.gone).toBe(0);
    } finally {
      offA();
      offB();
    }
  });
}
