import { randomUUID } from 'node:crypto';
import type { JobStore, RateTokenRequest, StoreRateLimits } from '@jobs/core';
import { beforeEach, expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, storeNow, waitFor } from '../harness.js';

/** The store's rate-limit windows, or a skip when it has none (no `rateLimits`). */
function rateCalls(store: JobStore, ctx: { skip(note: string): void }): StoreRateLimits {
  if (!store.rateLimits) ctx.skip('the store has no `rateLimits`');
  return store.rateLimits as StoreRateLimits;
}

/**
 * A request for window `key` of this test run: keys are made unique, since a store may keep its
 * windows across tests (a harness that empties only the jobs tables between tests).
 */
const take = (key: string, want: number, extra: Partial<RateTokenRequest> = {}) => ({
  key: `${RUN}:${key}`,
  max: 3,
  perMs: 60_000,
  want,
  ...extra,
});

let RUN = randomUUID();

/** Invariant 19: at most `max` starts per window and key, across every connection. */
export function rateLimitGroup(h: Harness): void {
  beforeEach(() => {
    RUN = randomUUID();
  });

  it('a window grants at most max starts over several calls, then says when it ends', async (ctx) => {
    const store = await h.open();
    const r = rateCalls(store, ctx);
    const before = await storeNow(store);
    const granted = [];
    for (const want of [2, 2, 1]) {
      granted.push((await r.takeRateTokens([take('k', want)]))[0]!.granted);
    }
    expect(granted).toEqual([2, 1, 0]);
    const [last] = await r.takeRateTokens([take('k', 1)]);
    expect(last!.retryAt.getTime()).toBeGreaterThanOrEqual(before + 60_000);
    expect(last!.retryAt.getTime()).toBeLessThanOrEqual((await storeNow(store)) + 60_000);
  });

  it('a new window opens once the last one ended', async (ctx) => {
    const store = await h.open();
    const r = rateCalls(store, ctx);
    const [first] = await r.takeRateTokens([take('k', 5, { perMs: 300 })]);
    expect(first!.granted).toBe(3);
    expect((await r.takeRateTokens([take('k', 1, { perMs: 300 })]))[0]!.granted).toBe(0);
    const end = first!.retryAt.getTime();
    await waitFor('the window to end on the store clock', async () =>
      (await storeNow(store)) >= end ? true : undefined,
    );
    expect((await r.takeRateTokens([take('k', 5, { perMs: 300 })]))[0]!.granted).toBe(3);
  });

  it('each key has its own window; results follow the input, a key given twice shares one', async (ctx) => {
    const store = await h.open();
    const r = rateCalls(store, ctx);
    const grants = await r.takeRateTokens([take('b', 2), take('a', 1), take('b', 2)]);
    expect(grants.map((g) => [g.key, g.granted])).toEqual([
      [`${RUN}:b`, 2],
      [`${RUN}:a`, 1],
      [`${RUN}:b`, 1],
    ]);
  });

  it('a block grants nothing until it lifts, then a fresh window', async (ctx) => {
    const store = await h.open();
    const r = rateCalls(store, ctx);
    expect((await r.takeRateTokens([take('k', 1)]))[0]!.granted).toBe(1);
    const [blocked] = await r.takeRateTokens([take('k', 0, { blockMs: 300 })]);
    expect(blocked!.granted).toBe(0);
    const [during] = await r.takeRateTokens([take('k', 2)]);
    expect(during!.granted).toBe(0);
    expect(during!.retryAt.getTime()).toBe(blocked!.retryAt.getTime());
    await waitFor('the block to lift on the store clock', async () =>
      (await storeNow(store)) >= blocked!.retryAt.getTime() ? true : undefined,
    );
    expect((await r.takeRateTokens([take('k', 5)]))[0]!.granted).toBe(3);
  });

  it(
    'peers racing for one window on other connections are granted exactly max in all (many rounds)',
    async (ctx) => {
      const store = await h.open();
      rateCalls(store, ctx);
      const peers = await h.peers(store);
      for (let round = 0; round < h.rounds; round++) {
        const grants = await Promise.all(
          peers.map((peer) =>
            rateCalls(peer, ctx).takeRateTokens([
              take(`race-${round}`, 2, { max: 5 }),
              take(`other-${round % 2}`, 1, { max: 1_000 }),
            ]),
          ),
        );
        const total = grants.reduce((sum, g) => sum + (g[0]?.granted ?? 0), 0);
        expect(total, `round ${round}`).toBe(Math.min(5, 2 * peers.length));
      }
    },
    h.raceTimeout(),
  );

  it('deferJobs puts held jobs back due later without counting the attempt, fenced by token', async (ctx) => {
    const store = await h.open();
    const r = rateCalls(store, ctx);
    await enqueueJobs(store, [{ payload: 'later' }, { payload: 'now' }]);
    const [later, now] = await acquire(store);
    const before = await storeNow(store);
    expect((await r.deferJobs([refOf(later!)], 60_000)).lost).toEqual([]);
    expect((await r.deferJobs([refOf(now!)], 0)).lost).toEqual([]);
    const stored = (await store.getJob(later!.id))!;
    expect(stored).toMatchObject({ state: 'timer', attempts: 0, lockToken: null, lockOwner: null });
    expect(stored.dueAt.getTime()).toBeGreaterThanOrEqual(before + 59_000);
    // A stale token changes nothing.
    expect((await r.deferJobs([refOf(later!)], 0)).lost).toEqual([later!.id]);
    const again = await acquire(store);
    expect(again.map((j) => [j.payload, j.attempts])).toEqual([['now', 1]]);
  });
}
