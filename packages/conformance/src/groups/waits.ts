/**
 * Durable waits (ability `waits`, DESIGN invariant 23 "Waits free the worker"): `waits.sleep`
 * gives a held job back to waiting — a `timer` due after the delay, with its step list, the
 * attempt not counted, its lease and scope slot freed — in one write fenced by the token, so a
 * stale owner cannot checkpoint a sleep; `ctx.sleep` on an engine frees the slot, runs the job
 * again after the time and does not run its completed steps again; signals nobody took expire
 * (`waits.pruneSignals`) and waits never do. Short real waits (a few hundred ms), so it runs on
 * stores without an injected clock (the retention's boundary is checked on one where the store
 * takes one). Skipped by name without `waits`.
 */
import {
  type EngineOptions,
  FakeClock,
  type Job,
  type JobContext,
  JobEngine,
  type JobStore,
  LockLostError,
  type StoreSteps,
  type StoreWaits,
  silentLogger,
} from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, storeNow, waitFor } from '../harness.js';

type Skip = (note: string) => never;
type WaitsStore = JobStore & { steps: StoreSteps; waits: StoreWaits };

async function openWithWaits(h: Harness, skip: Skip): Promise<WaitsStore> {
  const store: JobStore = await h.open();
  if (!store.waits) skip('SKIPPED: the store has no `waits`');
  if (!store.steps) skip('SKIPPED: the store has `waits` without `steps`');
  return store as WaitsStore;
}

/** Starts an engine on `store` and stops it after the test (before the stores close). */
export async function startEngine(
  h: Harness,
  store: JobStore,
  options: Omit<EngineOptions, 'store'>,
): Promise<JobEngine> {
  const engine = new JobEngine({
    store,
    logger: silentLogger,
    pollIntervalMs: 50,
    retry: { kind: 'fixed', delayMs: 10 },
    ...options,
  });
  h.defer(() => engine.stop({ timeoutMs: 1_000 }));
  await engine.start();
  return engine;
}

const STEPS = [{ name: 'charge', result: { id: 'ch_1' }, at: 1_000, durationMs: 3 }];

export function waitsGroup(h: Harness): void {
  it('waits.sleep gives the held job back as a timer due after the delay, with its steps, the attempt not counted and the lock cleared', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const [job] = await enqueueJobs(store, [{ retries: 2 }]);
    const [held] = await acquire(store, { limit: 1 });
    const before = await storeNow(store);
    const list = [
      ...STEPS,
      { name: 'nap', result: { $sleepUntil: before + 60_000 }, at: before, durationMs: 0 },
    ];
    expect(await store.waits.sleep(refOf(held as Job), JSON.stringify(list), 60_000)).toBe(true);
    const after = await storeNow(store);
    const slept = await store.getJob((job as Job).id);
    expect(slept).toMatchObject({
      state: 'timer',
      attempts: 0,
      retriesLeft: 2,
      lockOwner: null,
      lockToken: null,
      lockExpiresAt: null,
      lastError: null,
    });
    expect(slept?.steps).toEqual(list.map((s) => ({ ...s, at: new Date(s.at) })));
    const due = slept?.dueAt.getTime() ?? 0;
    expect(due).toBeGreaterThanOrEqual(before + 60_000 - 5);
    expect(due).toBeLessThanOrEqual(after + 60_000 + 5);
    // Not acquirable before its time.
    expect(await acquire(store, { owner: 'owner-b' })).toEqual([]);
  });

  it('a stale lease cannot checkpoint a sleep: a lapsed owner, a foreign token, a finished job change nothing', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const [job] = await enqueueJobs(store, [{ retries: 5 }]);
    const id = (job as Job).id;
    const [lapsed] = await acquire(store, { owner: 'owner-a', leaseMs: 100, limit: 1 });
    await waitFor('the lease to lapse and be recovered', async () =>
      (await store.recoverExpiredLeases(10)).requeued.includes(id),
    );
    const [current] = await acquire(store, { owner: 'owner-b', limit: 1 });
    expect(current?.id).toBe(id);
    const list = JSON.stringify(STEPS);
    expect(await store.waits.sleep(refOf(lapsed as Job), list, 60_000)).toBe(false);
    expect(await store.waits.sleep({ id, token: 'foreign' }, list, 60_000)).toBe(false);
    const still = await store.getJob(id);
    expect(still).toMatchObject({ state: 'running', lockOwner: 'owner-b', steps: [] });
    await store.complete([{ ...refOf(current as Job), durationMs: 1 }]);
    expect(await store.waits.sleep(refOf(current as Job), list, 60_000)).toBe(false);
    expect(await store.waits.sleep({ id: '987654321', token: 't' }, list, 10)).toBe(false);
  });

  it('a sleeping job frees its scope slot: the next exclusive job of its scope is acquired at once; it runs again after its time', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const [first, second] = await enqueueJobs(store, [
      { scope: 's', exclusive: true, payload: 'first' },
      { scope: 's', exclusive: true, payload: 'second' },
    ]);
    const [held] = await acquire(store, { limit: 10 });
    expect(held?.id).toBe((first as Job).id);
    expect(await acquire(store, { owner: 'owner-b' })).toEqual([]);
    expect(await store.waits.sleep(refOf(held as Job), JSON.stringify(STEPS), 300)).toBe(true);
    const [next] = await acquire(store, { owner: 'owner-b' });
    expect(next?.id).toBe((second as Job).id);
    await store.complete([{ ...refOf(next as Job), durationMs: 1 }]);
    const again = await waitFor(
      'the sleeper to be due again',
      async () => (await acquire(store, { owner: 'owner-c' }))[0],
    );
    expect(again).toMatchObject({ id: (first as Job).id, attempts: 1 });
    expect(again.steps?.map((s) => s.name)).toEqual(['charge']);
  });

  it('ctx.sleep frees the worker and counts no attempt: another job runs meanwhile; after the time the job runs again, its steps not again, and completes', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const calls: string[] = [];
    const attempts: number[] = [];
    const sleeping: string[] = [];
    let whileAsleep: Job | null = null;
    const engine = await startEngine(h, store, {
      concurrency: 1,
      handlers: {
        work: async (job: Job, ctx) => {
          if (job.payload === 'other') {
            whileAsleep = await store.getJob(sleeperId);
            calls.push('other');
            return;
          }
          attempts.push(ctx.attempt);
          const charge = await ctx.step('charge', () => {
            calls.push('charge');
            return { id: 'ch_1' };
          });
          // Long enough that the other job, enqueued once this one sleeps, runs meanwhile on
          // a loaded machine too.
          await ctx.sleep('cool-off', 800);
          calls.push('after sleep');
          await ctx.sleep('second', 'PT0.2S');
          return charge;
        },
      },
    });
    engine.on('sleeping', ({ job, name }) => sleeping.push(`${job.id}:${name}`));
    const sleeper = await engine.enqueue('work', 'sleeper', { retries: 0 });
    const sleeperId = sleeper.id;
    await waitFor('the job to sleep', async () => sleeping.length > 0);
    await engine.enqueue('work', 'other');
    await waitFor('the other job to run on the only slot', async () => calls.includes('other'));
    expect(whileAsleep).toMatchObject({ state: 'timer', attempts: 0, lockOwner: null });
    expect((whileAsleep as Job | null)?.steps?.map((s) => s.name)).toEqual(['charge', 'cool-off']);
    await waitFor('the sleeper to complete', async () => (await store.getJob(sleeperId)) === null);
    // The step ran once; code between steps runs again on every run (after each sleep).
    expect(calls).toEqual(['charge', 'other', 'after sleep', 'after sleep']);
    expect(sleeping).toEqual([`${sleeperId}:cool-off`, `${sleeperId}:second`]);
    // Every run is the first attempt: a sleep is not a failure and counts none.
    expect(attempts).toEqual([1, 1, 1]);
  });

  it('a sleep whose job runs before its wake time (given back due now) sleeps the rest: same checkpoint, due at its wake time, the handler not past it', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const [job] = await enqueueJobs(store, [{}]);
    const id = (job as Job).id;
    const [held] = await acquire(store, { limit: 1 });
    const wake = (await storeNow(store)) + 60_000;
    const list = [
      { name: 'long', result: { $sleepUntil: wake }, at: wake - 60_000, durationMs: 0 },
    ];
    // Due at once, though its sleep is not over (as an operator running it early would).
    expect(await store.waits.sleep(refOf(held as Job), JSON.stringify(list), 0)).toBe(true);
    expect((await store.getJob(id))?.state).toBe('async');
    const past: string[] = [];
    await startEngine(h, store, {
      handlers: {
        work: async (_job: Job, ctx) => {
          await ctx.sleep('long', 60_000);
          past.push('woke');
        },
      },
    });
    const again = await waitFor('the job to sleep again', async () => {
      const j = await store.getJob(id);
      return j?.state === 'timer' ? j : undefined;
    });
    expect(again.steps).toEqual(list.map((s) => ({ ...s, at: new Date(s.at) })));
    expect(Math.abs(again.dueAt.getTime() - wake)).toBeLessThan(2_000);
    expect(again.attempts).toBe(0);
    expect(past).toEqual([]);
  });

  it('pruneSignals deletes the oldest signals nobody took past the retention, at most limit, and never a job’s wait', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const [waiting, taker] = await enqueueJobs(store, [{}, {}]);
    await store.waits.signal('expiring', 'k-1', JSON.stringify('first'));
    await store.waits.signal('expiring', 'k-1', JSON.stringify('second'));
    const [w] = await acquire(store, { limit: 1 });
    expect(w?.id).toBe((waiting as Job).id);
    expect(
      await store.waits.waitSignal(
        refOf(w as Job),
        'expiring',
        'k-2',
        JSON.stringify(STEPS),
        60_000,
      ),
    ).toBe(true);
    // Nothing is older than a day.
    expect(await store.waits.pruneSignals(86_400_000, 10)).toBe(0);
    // Once the store's clock moved past the sends, a retention of 0 expires both: oldest first.
    const sent = await storeNow(store);
    await waitFor('the store clock to move on', async () => (await storeNow(store)) > sent + 2);
    expect(await store.waits.pruneSignals(0, 1)).toBe(1);
    const [t] = await acquire(store, { limit: 1 });
    expect(t?.id).toBe((taker as Job).id);
    const listOf = (payload: string | null) =>
      payload === null
        ? null
        : JSON.stringify([{ name: 'expiring', result: JSON.parse(payload), at: 1, durationMs: 0 }]);
    expect(await store.waits.takeSignal(refOf(t as Job), 'expiring', 'k-1', listOf)).toBe(
      JSON.stringify('second'),
    );
    // The waiting job's wait was not pruned: a signal for it still makes it due at once.
    expect(await store.waits.pruneSignals(0, 10)).toBe(0);
    await store.waits.signal('expiring', 'k-2', 'null');
    expect((await store.getJob((waiting as Job).id))?.state).toBe('async');
  });

  it('pruneSignals keeps a signal until the retention passed on the store’s clock', async ({
    skip,
  }) => {
    const clock = new FakeClock();
    const store = (await h.openOnClock(clock, { skip })) as JobStore;
    if (!store.waits) skip('SKIPPED: the store has no `waits`');
    const waits = store.waits as StoreWaits;
    await waits.signal('expiring', 'k-1', '1');
    clock.advance(59 * 60_000);
    await waits.signal('expiring', 'k-1', '2');
    expect(await waits.pruneSignals(3_600_000, 10)).toBe(0);
    clock.advance(2 * 60_000);
    expect(await waits.pruneSignals(3_600_000, 10)).toBe(1);
    clock.advance(59 * 60_000);
    expect(await waits.pruneSignals(3_600_000, 10)).toBe(1);
  });

  it('takeSignal takes the oldest signal once, writing the steps fenced by the token; a stale owner takes nothing and the signal stays', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const [a, b] = await enqueueJobs(store, [{ retries: 5 }, {}]);
    await store.waits.signal('approval', 'o-1', JSON.stringify({ ok: true, n: 1 }));
    await store.waits.signal('approval', 'o-1', JSON.stringify('second'));
    await store.waits.signal('approval', 'o-2', 'null');
    const id = (a as Job).id;
    const [lapsed] = await acquire(store, { owner: 'owner-a', leaseMs: 100, limit: 1 });
    expect(lapsed?.id).toBe(id);
    await waitFor('the lease to lapse and be recovered', async () =>
      (await store.recoverExpiredLeases(10)).requeued.includes(id),
    );
    const listOf = (payload: string | null) =>
      JSON.stringify([
        {
          name: 'approval',
          result: { $signal: JSON.parse(payload ?? 'null') },
          at: 1,
          durationMs: 0,
        },
      ]);
    await expect(
      store.waits.takeSignal(refOf(lapsed as Job), 'approval', 'o-1', listOf),
    ).rejects.toBeInstanceOf(LockLostError);
    const [current, other] = await acquire(store, { owner: 'owner-b', limit: 2 });
    expect(current?.id).toBe(id);
    expect(await store.waits.takeSignal(refOf(current as Job), 'approval', 'o-1', listOf)).toBe(
      JSON.stringify({ ok: true, n: 1 }),
    );
    expect((await store.getJob(id))?.steps?.[0]?.result).toEqual({ $signal: { ok: true, n: 1 } });
    // The next signal for the key is the other job's; then none is left (nothing written).
    expect(await store.waits.takeSignal(refOf(other as Job), 'approval', 'o-1', listOf)).toBe(
      JSON.stringify('second'),
    );
    const onlyTaken = (payload: string | null) => (payload === null ? null : listOf(payload));
    expect(await store.waits.takeSignal(refOf(other as Job), 'approval', 'o-1', onlyTaken)).toBe(
      null,
    );
    expect((await store.getJob((b as Job).id))?.steps?.[0]?.result).toEqual({ $signal: 'second' });
    expect(await store.waits.takeSignal(refOf(other as Job), 'approval', 'o-2', listOf)).toBe(
      'null',
    );
  });

  it('ctx.waitFor: a signal sent after the wait makes the waiting job due at once and returns its payload; one sent before is found; a timeout returns null', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const results = new Map<string, unknown>();
    const engine = await startEngine(h, store, {
      handlers: {
        work: async (job: Job, ctx) => {
          const { key, timeoutMs } = job.payload as { key: string; timeoutMs: number };
          const got = await ctx.waitFor('approval', { key, timeoutMs });
          results.set(key, got);
          return got;
        },
      },
    });
    // Before: stored, found by the wait when it begins.
    await engine.signal('approval', { key: 'before', payload: { ok: 'before' } });
    const before = await engine.enqueue('work', { key: 'before', timeoutMs: 60_000 });
    // After: the job waits (a timer due at its timeout, a minute away) until the signal.
    const after = await engine.enqueue('work', { key: 'after', timeoutMs: 60_000 });
    const timeout = await engine.enqueue('work', { key: 'none', timeoutMs: 300 });
    const waiting = await waitFor('the job to wait', async () => {
      const j = await store.getJob(after.id);
      return j?.state === 'timer' ? j : undefined;
    });
    expect(waiting.attempts).toBe(0);
    expect(waiting.steps?.map((s) => s.name)).toEqual(['approval']);
    await engine.signal('approval', { key: 'after', payload: [1, 'two'] });
    await waitFor('every job to finish', async () => {
      for (const job of [before, after, timeout]) if (await store.getJob(job.id)) return false;
      return true;
    });
    expect(Object.fromEntries(results)).toEqual({
      before: { ok: 'before' },
      after: [1, 'two'],
      none: null,
    });
  });

  it('each signal is delivered to exactly one waiting job, once, with two engines racing; the jobs without one time out with null', async ({
    skip,
  }) => {
    const store = await openWithWaits(h, skip);
    const peer = h.options.connectPeer ? await h.peer(store) : store;
    const got: unknown[] = [];
    const handler = async (_job: Job, ctx: JobContext) => {
      const payload = await ctx.waitFor('go', { key: 'k', timeoutMs: 1_500 });
      got.push(payload);
    };
    const a = await startEngine(h, store, { handlers: { work: handler } });
    await startEngine(h, peer, { handlers: { work: handler } });
    const jobs = await Promise.all([0, 1, 2, 3].map((n) => a.enqueue('work', { n })));
    await waitFor('every job to wait', async () => {
      for (const job of jobs) if ((await store.getJob(job.id))?.state !== 'timer') return false;
      return true;
    });
    await Promise.all([
      a.signal('go', { key: 'k', payload: 1 }),
      a.signal('go', { key: 'k', payload: 2 }),
    ]);
    await waitFor('every job to finish', async () => {
      for (const job of jobs) if (await store.getJob(job.id)) return false;
      return true;
    });
    expect(got.filter((p) => p !== null).sort()).toEqual([1, 2]);
    expect(got.filter((p) => p === null)).toHaveLength(2);
  });
}
