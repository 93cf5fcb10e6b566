import { type Job, JobEngine, type JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, sleep, storeNow, waitFor } from '../harness.js';

const ids = (jobs: readonly Job[]): string[] => jobs.map((j) => j.id);

/** Skips a test on a store without scope limits above 1 (`capabilities.scopeLimits`). */
function skipWithoutLimits(store: JobStore, ctx: { skip(note: string): void }): void {
  if (!store.capabilities.scopeLimits) ctx.skip('the store has no capabilities.scopeLimits');
}

/** Running jobs of a scope, read in one statement around any acquirer. */
async function runningIn(store: JobStore, scope: string): Promise<number> {
  return (await store.listJobs({ state: 'running', scope, limit: 1000, offset: 0 })).length;
}

/**
 * Invariant 18: at most `scopeLimit` limited jobs of a scope run at once, across all acquirers,
 * also when leases lapse and their owners come back; they start in acquisition order.
 */
export function scopeLimitGroup(h: Harness): void {
  it('one acquire takes at most N jobs of a scope with limit N, the first N in order', async (ctx) => {
    const store = await h.open();
    skipWithoutLimits(store, ctx);
    const now = await storeNow(store);
    const at = (ms: number) => new Date(now - 10_000 + ms);
    const jobs = await enqueueJobs(store, [
      { scope: 'a', scopeLimit: 3, dueAt: at(4) },
      { scope: 'a', scopeLimit: 3, dueAt: at(3) },
      { scope: 'a', scopeLimit: 3, dueAt: at(2), priority: 1 },
      { scope: 'a', scopeLimit: 3, dueAt: at(1) },
      { scope: 'b', scopeLimit: 2, dueAt: at(5) },
    ]);
    const got = await acquire(store);
    expect(ids(got)).toEqual([jobs[2]!.id, jobs[3]!.id, jobs[1]!.id, jobs[4]!.id]);
  });

  it('running jobs hold their slots; each completion frees one for the next in order', async (ctx) => {
    const store = await h.open();
    skipWithoutLimits(store, ctx);
    const jobs = await enqueueJobs(
      store,
      Array.from({ length: 5 }, () => ({ scope: 's', scopeLimit: 2 })),
    );
    const first = await acquire(store, { owner: 'a' });
    expect(ids(first)).toEqual([jobs[0]!.id, jobs[1]!.id]);
    expect(await acquire(store, { owner: 'b' })).toEqual([]);
    await store.complete([refOf(first[1]!)]);
    expect(ids(await acquire(store, { owner: 'b' }))).toEqual([jobs[2]!.id]);
    expect(await acquire(store, { owner: 'b' })).toEqual([]);
    expect(await runningIn(store, 's')).toBe(2);
  });

  it('exclusive and scopeLimit 1 are one rule; a job shows its limit', async (ctx) => {
    const store = await h.open();
    skipWithoutLimits(store, ctx);
    const [ex, one, three, free] = await enqueueJobs(store, [
      { scope: 's', exclusive: true, scopeLimit: 1 },
      { scope: 's', exclusive: true, scopeLimit: 1 },
      { scope: 't', scopeLimit: 3 },
      { scope: 't' },
    ]);
    for (const [job, exclusive, scopeLimit] of [
      [ex, true, 1],
      [three, false, 3],
      [free, false, null],
    ] as const) {
      const read = await store.getJob(job!.id);
      expect({ exclusive: read!.exclusive, scopeLimit: read!.scopeLimit ?? null }).toEqual({
        exclusive,
        scopeLimit,
      });
    }
    expect(ids(await acquire(store))).toEqual([ex!.id, three!.id, free!.id]);
    expect(await acquire(store)).toEqual([]);
    expect((await store.getJob(one!.id))!.state).toBe('async');
  });

  it('with mixed limits in one scope, each waiting job checks the scope against its own limit', async (ctx) => {
    const store = await h.open();
    skipWithoutLimits(store, ctx);
    const [a1, b3] = await enqueueJobs(store, [
      { scope: 'm', scopeLimit: 1, exclusive: true },
      { scope: 'm', scopeLimit: 3 },
    ]);
    // a1: nothing runs, nothing ahead (0 < 1); b3: nothing runs, one ahead (1 < 3).
    expect(ids(await acquire(store))).toEqual([a1!.id, b3!.id]);
    const [c1, d3, e3] = await enqueueJobs(store, [
      { scope: 'm', exclusive: true },
      { scope: 'm', scopeLimit: 3 },
      { scope: 'm', scopeLimit: 3 },
    ]);
    // Two run: c1 needs 0 running; d3 has 2 running + c1 ahead = 3, not below 3.
    expect(await acquire(store)).toEqual([]);
    await store.complete([refOf((await store.getJob(a1!.id))!)]);
    // One runs: c1 still needs 0; d3: 1 running + c1 ahead = 2 < 3; e3: 1 + 2 ahead = 3.
    expect(ids(await acquire(store))).toEqual([d3!.id]);
    expect((await store.getJob(c1!.id))!.state).toBe('async');
    expect((await store.getJob(e3!.id))!.state).toBe('async');
  });

  it('a lapsed lease keeps its slot until recovered; its returning owner is fenced', async (ctx) => {
    const store = await h.open();
    skipWithoutLimits(store, ctx);
    const jobs = await enqueueJobs(
      store,
      Array.from({ length: 3 }, () => ({ scope: 'l', scopeLimit: 2 })),
    );
    const lapsed = await acquire(store, { owner: 'gone', leaseMs: 200 });
    expect(ids(lapsed)).toEqual([jobs[0]!.id, jobs[1]!.id]);
    const expiresAt = lapsed[0]!.lockExpiresAt!.getTime();
    await waitFor('the leases to lapse on the store clock', async () =>
      (await storeNow(store)) > expiresAt + 50 ? true : undefined,
    );
    expect(await acquire(store, { owner: 'b' })).toEqual([]);
    const { requeued } = await store.recoverExpiredLeases(100);
    expect(requeued.sort()).toEqual(ids(lapsed).sort());
    const again = await acquire(store, { owner: 'b' });
    expect(ids(again)).toEqual(ids(lapsed));
    // The owner comes back: every write with its old token changes nothing.
    expect((await store.renewLeases('gone', 30_000, lapsed.map(refOf))).lost.sort()).toEqual(
      ids(lapsed).sort(),
    );
    expect((await store.complete(lapsed.map(refOf))).lost.sort()).toEqual(ids(lapsed).sort());
    expect(await runningIn(store, 'l')).toBe(2);
  });

  it(
    'racing peers never run N + 1 jobs of a scope, with leases lapsing on purpose (many rounds)',
    async (ctx) => {
      const store = await h.open();
      skipWithoutLimits(store, ctx);
      const peers = await h.peers(store);
      const limit = 2;
      const scopes = ['r0', 'r1'];
      const perScope = Math.max(6, h.rounds);
      const jobs = await enqueueJobs(
        store,
        Array.from({ length: perScope * scopes.length }, (_, i) => ({
          scope: scopes[i % scopes.length]!,
          scopeLimit: limit,
          retries: 1000,
        })),
      );
      const violations: string[] = [];
      const finished = new Set<string>();
      const deadline = Date.now() + h.raceTimeout() * 0.75;
      const check = async (peer: JobStore, when: string): Promise<void> => {
        for (const scope of scopes) {
          const n = await runningIn(peer, scope);
          if (n > limit) violations.push(`${when}: ${n} running in ${scope}`);
        }
      };
      let step = 0;
      await Promise.all(
        peers.map(async (peer, i) => {
          while (finished.size < jobs.length && Date.now() < deadline) {
            // Every few acquisitions lapse: short leases, and the owner comes back too late.
            const lapse = ++step % 4 === 0;
            const got = await acquire(peer, {
              owner: `peer-${i}`,
              limit: 2,
              leaseMs: lapse ? 150 : 30_000,
            });
            await check(peer, `after peer-${i} acquired ${ids(got)}`);
            if (got.length === 0) {
              await peer.recoverExpiredLeases(100);
              await sleep(5);
              continue;
            }
            if (lapse) {
              await sleep(250);
              await check(peer, `while peer-${i}'s leases lapsed`);
            } else {
              await sleep(1 + (i % 3));
            }
            const { lost } = await peer.complete(got.map(refOf));
            for (const job of got) if (!lost.includes(job.id)) finished.add(job.id);
          }
        }),
      );
      expect(violations).toEqual([]);
      expect(finished.size).toBe(jobs.length);
      for (const scope of scopes) expect(await runningIn(store, scope)).toBe(0);
    },
    h.raceTimeout(2),
  );

  it(
    'engines on several peers never run more than scopeLimit jobs of a scope at once',
    async (ctx) => {
      const store = await h.open();
      skipWithoutLimits(store, ctx);
      const peers = await h.peers(store, 3);
      const limits: Record<string, number> = { two: 2, three: 3 };
      const active = new Map<string, number>();
      const over: string[] = [];
      let done = 0;
      const handlers = {
        work: async (job: Job<{ scope: string; n: number }>) => {
          const { scope, n } = job.payload;
          const now = (active.get(scope) ?? 0) + 1;
          active.set(scope, now);
          if (now > (limits[scope] ?? 0)) over.push(`${scope}#${n}: ${now} at once`);
          await sleep(3);
          active.set(scope, (active.get(scope) ?? 1) - 1);
          done += 1;
        },
      };
      const engines = peers.map(
        (peer) => new JobEngine({ store: peer, handlers, concurrency: 4, leaseMs: 5_000 }),
      );
      for (const engine of engines) h.defer(() => engine.stop({ timeoutMs: 1_000 }));
      await Promise.all(engines.map((engine) => engine.start()));
      const total = 30;
      await engines[0]!.enqueueMany(
        Array.from({ length: total }, (_, n) => {
          const scope = n % 2 ? 'two' : 'three';
          return {
            type: 'work',
            payload: { scope, n },
            options: { scope, scopeLimit: limits[scope] },
          };
        }),
      );
      await waitFor('every limited job to run', async () => done === total, h.timeoutMs);
      expect(over).toEqual([]);
    },
    h.timeout(2),
  );
}
