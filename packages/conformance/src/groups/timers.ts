import type { Job } from '@jobs/core';
import { expect, it } from 'vitest';
import {
  acquire,
  acquiredAt,
  enqueueJobs,
  type Harness,
  sleep,
  storeNow,
  WORK,
  waitFor,
} from '../harness.js';

const LEASE = 30_000;

/** Invariant 5: nothing is acquired before its due time; at due time exactly once. */
export function timersGroup(h: Harness): void {
  it('a timer is not acquired before its due time', async () => {
    const store = await h.open();
    const [timer] = await enqueueJobs(store, [{ delayMs: 60_000 }]);
    expect(await acquire(store)).toEqual([]);
    expect(await store.nextDueAt({ types: [WORK], queues: null, tenants: null })).toEqual(
      timer!.dueAt,
    );
    await h.expectStored(store, timer!.id, { state: 'timer', attempts: 0, lockToken: null });
  });

  it('a short timer becomes acquirable at its due time, never earlier on the store clock', async () => {
    const store = await h.open();
    const [timer] = await enqueueJobs(store, [{ delayMs: 150 }]);
    const polls: Job[][] = [];
    const [got] = await waitFor('the timer to be acquired', async () => {
      const jobs = await acquire(store, { leaseMs: LEASE });
      polls.push(jobs);
      return jobs.length > 0 ? jobs : undefined;
    });
    expect(got!.id).toBe(timer!.id);
    expect(got!.state).toBe('running');
    expect(got!.attempts).toBe(1);
    // The lease started when the store acquired it: not before due, by the store's own clock.
    expect(acquiredAt(got!, LEASE)).toBeGreaterThanOrEqual(timer!.dueAt.getTime());
    expect(polls.flat()).toHaveLength(1);
  });

  it(
    'a due timer is acquired exactly once by peers polling for it',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      for (let round = 0; round < Math.min(h.rounds, 5); round++) {
        const [timer] = await enqueueJobs(store, [{ delayMs: 100 }]);
        const winners: Job[] = [];
        const due = timer!.dueAt.getTime();
        await Promise.all(
          peers.map(async (peer, i) => {
            while ((await storeNow(peer)) < due + 50) {
              const got = await acquire(peer, { owner: `peer-${i}`, leaseMs: LEASE });
              winners.push(...got);
              await sleep(2);
            }
            winners.push(...(await acquire(peer, { owner: `peer-${i}`, leaseMs: LEASE })));
          }),
        );
        expect(
          winners.map((j) => j.id),
          `round ${round}`,
        ).toEqual([timer!.id]);
        expect(acquiredAt(winners[0]!, LEASE)).toBeGreaterThanOrEqual(due);
      }
    },
    h.raceTimeout(),
  );

  it('timers with different due times become due one after another', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const [early, late] = await enqueueJobs(store, [
      { dueAt: new Date(now + 150) },
      { dueAt: new Date(now + 60_000) },
    ]);
    const [got] = await waitFor('the early timer', async () => {
      const jobs = await acquire(store, { leaseMs: LEASE });
      return jobs.length > 0 ? jobs : undefined;
    });
    expect(got!.id).toBe(early!.id);
    expect(await acquire(store)).toEqual([]);
    await h.expectStored(store, late!.id, { state: 'timer' });
  });
}
