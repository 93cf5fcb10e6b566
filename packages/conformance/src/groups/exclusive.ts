import type { Job } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, sleep, storeNow, waitFor } from '../harness.js';

const ids = (jobs: readonly Job[]): string[] => jobs.map((j) => j.id);

/** Invariant 8: at most one exclusive job per scope runs at a time, and they start in order. */
export function exclusiveGroup(h: Harness): void {
  it('one acquire takes only the head of an exclusive scope, but one job of each scope', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(store, [
      { scope: 'a', exclusive: true },
      { scope: 'a', exclusive: true },
      { scope: 'b', exclusive: true },
      { scope: 'b', exclusive: true },
    ]);
    expect(ids(await acquire(store))).toEqual([jobs[0]!.id, jobs[2]!.id]);
  });

  it('while an exclusive job of a scope runs, no other exclusive job of that scope is acquired', async () => {
    const store = await h.open();
    const [first, second] = await enqueueJobs(store, [
      { scope: 's', exclusive: true },
      { scope: 's', exclusive: true },
    ]);
    const [held] = await acquire(store, { owner: 'a' });
    expect(held!.id).toBe(first!.id);
    expect(await acquire(store, { owner: 'b' })).toEqual([]);
    await store.complete([refOf(held!)]);
    expect(ids(await acquire(store, { owner: 'b' }))).toEqual([second!.id]);
  });

  it('exclusive jobs of one scope start in order: priority, due time, insertion', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const at = (ms: number) => new Date(now - 10_000 + ms);
    await enqueueJobs(store, [
      { scope: 's', exclusive: true, dueAt: at(5), payload: 'due-late' },
      { scope: 's', exclusive: true, dueAt: at(0), payload: 'due-early' },
      { scope: 's', exclusive: true, dueAt: at(5), payload: 'due-late-second' },
      { scope: 's', exclusive: true, dueAt: at(9), priority: 3, payload: 'high' },
    ]);
    const order: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const got = await acquire(store);
      expect(got).toHaveLength(1);
      order.push(got[0]!.payload);
      await store.complete([refOf(got[0]!)]);
    }
    expect(order).toEqual(['high', 'due-early', 'due-late', 'due-late-second']);
  });

  it('non-exclusive jobs of a scope are neither blocked by nor blocking exclusive ones', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(store, [
      { scope: 's', exclusive: false },
      { scope: 's', exclusive: true },
      { scope: 's', exclusive: false },
      { scope: 's', exclusive: true },
    ]);
    expect(ids(await acquire(store))).toEqual([jobs[0]!.id, jobs[1]!.id, jobs[2]!.id]);
  });

  it('exclusive without a scope has nothing to be exclusive in and blocks nothing', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(store, [{ exclusive: true }, { exclusive: true }]);
    expect(ids(await acquire(store))).toEqual(ids(jobs));
  });

  it('a head of another type blocks its scope for acquirers that cannot run it', async () => {
    const store = await h.open();
    const [head, next] = await enqueueJobs(store, [
      { scope: 's', exclusive: true, type: 'other' },
      { scope: 's', exclusive: true },
    ]);
    expect(await acquire(store)).toEqual([]);
    const [got] = await acquire(store, { types: ['other'] });
    expect(got!.id).toBe(head!.id);
    await store.complete([refOf(got!)]);
    expect(ids(await acquire(store))).toEqual([next!.id]);
  });

  it('a head in another queue or of another tenant blocks its scope too (order is per scope)', async () => {
    const store = await h.open();
    const [queueHead, queueNext, tenantHead, tenantNext] = await enqueueJobs(store, [
      { scope: 'q', exclusive: true, queue: 'other' },
      { scope: 'q', exclusive: true },
      { scope: 't', exclusive: true, tenantId: 'other' },
      { scope: 't', exclusive: true, tenantId: 'mine' },
    ]);
    expect(await acquire(store, { queues: ['default'], tenants: ['mine'] })).toEqual([]);
    const heads = await acquire(store);
    expect(ids(heads)).toEqual([queueHead!.id, tenantHead!.id]);
    await store.complete(heads.map(refOf));
    expect(ids(await acquire(store, { queues: ['default'], tenants: null }))).toEqual([
      queueNext!.id,
      tenantNext!.id,
    ]);
  });

  it('exclusive jobs not yet due, suspended or in deadletter do not block their scope', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const [, , , ready] = await enqueueJobs(store, [
      { scope: 's', exclusive: true, priority: 9, dueAt: new Date(now + 60_000) },
      { scope: 's', exclusive: true, priority: 8, type: 'dead' },
      { scope: 's', exclusive: true, priority: 7, type: 'parked' },
      { scope: 's', exclusive: true },
    ]);
    const [d] = await acquire(store, { types: ['dead'] });
    await store.fail([
      { ...refOf(d!), error: { message: 'x', stack: null }, deadletter: true, retryDelayMs: 0 },
    ]);
    expect(await store.suspend({ type: 'parked' })).toBe(1);
    expect(ids(await acquire(store))).toEqual([ready!.id]);
  });

  it('an exclusive job whose lease lapsed keeps its scope until recovered, and its owner is then fenced', async () => {
    const store = await h.open();
    const [first, second] = await enqueueJobs(store, [
      { scope: 's', exclusive: true },
      { scope: 's', exclusive: true },
    ]);
    const [lapsed] = await acquire(store, { leaseMs: 200 });
    expect(lapsed!.id).toBe(first!.id);
    const expiresAt = lapsed!.lockExpiresAt!.getTime();
    await waitFor('the lease to lapse on the store clock', async () =>
      (await storeNow(store)) > expiresAt + 50 ? true : undefined,
    );
    // A lapsed owner may still be running the job: its slot stays taken until recovery.
    expect(await acquire(store, { owner: 'b' })).toEqual([]);
    const { requeued } = await store.recoverExpiredLeases(100);
    expect(requeued).toEqual([first!.id]);
    const [again] = await acquire(store, { owner: 'b', leaseMs: 30_000 });
    expect(again!.id).toBe(first!.id);
    expect((await store.renewLeases(lapsed!.lockOwner!, 30_000, [refOf(lapsed!)])).lost).toEqual([
      first!.id,
    ]);
    await store.complete([refOf(again!)]);
    expect(ids(await acquire(store, { owner: 'b' }))).toEqual([second!.id]);
  });

  it('a scope blocked by its running exclusive job does not starve other scopes, even with limit 1', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const at = (ms: number) => new Date(now - 10_000 + ms);
    const jobs = await enqueueJobs(store, [
      { scope: 'a', exclusive: true, dueAt: at(0) },
      { scope: 'a', exclusive: true, dueAt: at(1) },
      { scope: 'b', exclusive: true, dueAt: at(2) },
      { scope: 'b', exclusive: true, dueAt: at(3) },
      { scope: 'c', exclusive: true, dueAt: at(4) },
    ]);
    // a and b are blocked by their running heads; c must still come out one job at a time.
    expect(ids(await acquire(store, { limit: 1 }))).toEqual([jobs[0]!.id]);
    expect(ids(await acquire(store, { limit: 1 }))).toEqual([jobs[2]!.id]);
    expect(ids(await acquire(store, { limit: 1 }))).toEqual([jobs[4]!.id]);
    expect(await acquire(store, { limit: 1 })).toEqual([]);
  });

  it(
    'peers racing for the exclusive jobs of one scope get only its head (many rounds)',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      for (let round = 0; round < h.rounds; round++) {
        const jobs = await enqueueJobs(
          store,
          Array.from({ length: 3 }, () => ({ scope: `r${round}`, exclusive: true })),
        );
        // Each peer asks for one job at once: a store that skips the locked head (SKIP LOCKED)
        // must not hand out the second job of the scope to another peer. Under contention every
        // peer may come back empty (they skip each other's locks); then the head goes next.
        const got = (
          await Promise.all(peers.map((p, i) => acquire(p, { owner: `peer-${i}`, limit: 1 })))
        ).flat();
        expect(got.length, `round ${round}: ${ids(got)}`).toBeLessThanOrEqual(1);
        const head = got.length > 0 ? got : await acquire(store, { owner: 'after', limit: 1 });
        expect(ids(head), `round ${round}`).toEqual([jobs[0]!.id]);
        expect(await acquire(store, { owner: 'after' }), `round ${round}`).toEqual([]);
      }
    },
    h.raceTimeout(),
  );

  it(
    'racing peers never hold two exclusive jobs of one scope at once, and each scope runs in order',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      const scopes = ['s0', 's1', 's2'];
      const perScope = Math.max(4, h.rounds);
      const jobs = await enqueueJobs(
        store,
        Array.from({ length: perScope * scopes.length }, (_, i) => ({
          scope: scopes[i % scopes.length]!,
          exclusive: true,
          payload: { scope: scopes[i % scopes.length]!, n: Math.floor(i / scopes.length) },
        })),
      );
      const holding = new Map<string, string>(); // scope → id held
      const violations: string[] = [];
      const started = new Map<string, number[]>();
      let done = 0;
      const deadline = Date.now() + h.raceTimeout() * 0.75;
      await Promise.all(
        peers.map(async (peer, i) => {
          while (done < jobs.length && Date.now() < deadline) {
            const got = await acquire(peer, { owner: `peer-${i}`, limit: 3, leaseMs: 60_000 });
            for (const job of got) {
              const scope = job.scope!;
              const other = holding.get(scope);
              if (other !== undefined) violations.push(`${scope}: ${job.id} while ${other}`);
              holding.set(scope, job.id);
              started.set(scope, [...(started.get(scope) ?? []), (job.payload as { n: number }).n]);
            }
            if (got.length === 0) {
              await sleep(1);
              continue;
            }
            await sleep(1 + (i % 3));
            // Forget the hold before completing: the next job of the scope can only be acquired
            // after complete has taken effect, which is after this line.
            for (const job of got) holding.delete(job.scope!);
            const { lost } = await peer.complete(got.map(refOf));
            expect(lost).toEqual([]);
            done += got.length;
          }
        }),
      );
      expect(violations).toEqual([]);
      expect(done).toBe(jobs.length);
      for (const scope of scopes) {
        expect(started.get(scope), scope).toEqual(Array.from({ length: perScope }, (_, n) => n));
      }
    },
    h.raceTimeout(),
  );
}
