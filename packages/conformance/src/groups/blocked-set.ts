import { type Job, JobEngine, type JobRef, type JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, sleep, storeNow, waitFor } from '../harness.js';

const ids = (jobs: readonly Job[]): string[] => jobs.map((j) => j.id);

/** Skips a test on a store without blocked sets (`capabilities.blockedSet`). */
function skipWithoutBlocking(store: JobStore, ctx: { skip(note: string): void }): void {
  if (!store.capabilities.blockedSet)
    ctx.skip('the store keeps no blocked set (capabilities.blockedSet)');
}

async function statesOf(store: JobStore, jobs: readonly Job[]): Promise<string[]> {
  return Promise.all(jobs.map(async (job) => (await store.getJob(job.id))?.state ?? 'gone'));
}

/** The settle paths that free a running job's slot, each as the store is told by an owner. */
const FREEING: Record<string, (store: JobStore, ref: JobRef) => Promise<unknown>> = {
  complete: (store, ref) => store.complete([ref]),
  'fail (retry at once)': (store, ref) =>
    store.fail([
      { ...ref, error: { message: 'boom', stack: null }, deadletter: false, retryDelayMs: 0 },
    ]),
  'fail (dead-letter)': (store, ref) =>
    store.fail([
      { ...ref, error: { message: 'boom', stack: null }, deadletter: true, retryDelayMs: 0 },
    ]),
  release: (store, ref) => store.release([ref]),
  'cancel (running)': async (store, ref) => {
    await store.cancellation?.cancel(ref.id);
    return store.cancellation?.cancelHeld([ref]);
  },
};

/** Jobs enqueued behind a running one in the tests: more than a store keeps in line. */
const QUEUE = 150;

/**
 * Enqueues `1 + QUEUE` exclusive jobs of `scope` (with `extra`), leases the first, and deletes
 * the short queue kept in line behind it, so the job after the running one is blocked. Returns
 * the running job and the jobs still queued (all blocked), in order.
 */
async function untilNextIsBlocked(
  store: JobStore,
  scope: string,
  extra: Parameters<typeof enqueueJobs>[1][number] = {},
  queue = QUEUE,
): Promise<{ running: Job; queued: Job[] }> {
  const jobs = await enqueueJobs(
    store,
    Array.from({ length: 1 + queue }, () => ({ scope, exclusive: true, ...extra })),
  );
  const [running] = await acquire(store);
  expect(running?.id).toBe(jobs[0]!.id);
  if (!store.bulk) throw new Error('the blocked-set group needs JobStore.bulk');
  const inLine = await store.bulk.deleteMany({ scope, state: ['timer', 'async'] }, 1_000);
  expect(inLine).toBeLessThan(queue);
  const queued = jobs.slice(1 + inLine);
  const blocked = await store.listJobs({ scope, state: 'blocked', limit: 1_000, offset: 0 });
  expect(blocked.map((job) => job.id).sort()).toEqual(ids(queued).sort());
  return { running: running!, queued };
}

/** Leases and completes one job at a time until none is acquirable; the ids in start order. */
async function drain(store: JobStore, first?: Job): Promise<string[]> {
  const order: string[] = [];
  let current = first;
  for (;;) {
    if (current) await store.complete([refOf(current)]);
    const got = await acquire(store, { limit: 1 });
    if (got.length === 0) return order;
    current = got[0]!;
    order.push(current.id);
  }
}

/**
 * The blocked set: due limited jobs of a full scope beyond a short queue wait out of the
 * acquisition walk (state `blocked`) and come back in acquisition order as slots free up, on
 * every path that frees one.
 */
export function blockedSetGroup(h: Harness): void {
  it('a long queue into a full scope waits blocked, in order, and the rest of the table goes on', async (ctx) => {
    const store = await h.open();
    skipWithoutBlocking(store, ctx);
    await enqueueJobs(store, [
      { scope: 's', scopeLimit: 2 },
      { scope: 's', scopeLimit: 2 },
    ]);
    const running = await acquire(store, { owner: 'one' });
    expect(running.length).toBe(2);
    const queued = await enqueueJobs(
      store,
      Array.from({ length: 200 }, () => ({ scope: 's', scopeLimit: 2 })),
    );
    const [urgent] = await enqueueJobs(store, [{ scope: 's', scopeLimit: 2, priority: 5 }]);
    const [other] = await enqueueJobs(store, [{ scope: 'other', scopeLimit: 2 }]);
    const states = await statesOf(store, queued);
    const blocked = states.filter((state) => state === 'blocked').length;
    // A store keeps at most a short queue in line; the rest waits blocked.
    expect(blocked).toBeGreaterThanOrEqual(200 - QUEUE);
    expect(states.filter((state) => state !== 'blocked' && state !== 'async')).toEqual([]);
    const counted = (await store.stats())
      .filter((row) => row.state === 'blocked')
      .reduce((n, row) => n + row.count, 0);
    expect(counted).toBe(blocked);
    const listed = await store.listJobs({ state: 'blocked', limit: 50, offset: 0 });
    expect(listed.map((job) => job.state)).toEqual(Array(50).fill('blocked'));
    // Only the free scope's job is acquirable.
    expect(ids(await acquire(store, { owner: 'two' }))).toEqual([other!.id]);
    await store.complete([refOf(running[0]!)]);
    // The urgent job first, then the queue in order, never more than 2 at a time.
    const order = await drain(store, running[1]);
    expect(order).toEqual([urgent!.id, ...ids(queued)]);
  });

  it('a burst into an idle scope keeps its first N and a short queue, and blocks the rest', async (ctx) => {
    const store = await h.open();
    skipWithoutBlocking(store, ctx);
    const jobs = await enqueueJobs(
      store,
      Array.from({ length: 300 }, (_, i) => ({ scope: 'burst', scopeLimit: 3, priority: i % 2 })),
    );
    const states = await statesOf(store, jobs);
    expect(states.filter((state) => state === 'blocked').length).toBeGreaterThanOrEqual(
      300 - 3 - QUEUE,
    );
    // Priority 1 first: jobs 1, 3, 5 are the first three in acquisition order.
    expect(ids(await acquire(store))).toEqual([jobs[1]!.id, jobs[3]!.id, jobs[5]!.id]);
  });

  for (const [path, free] of Object.entries(FREEING)) {
    it(`${path} of a running job lets the scope's next blocked job in`, async (ctx) => {
      const store = await h.open();
      skipWithoutBlocking(store, ctx);
      if (path.startsWith('cancel') && !store.cancellation) {
        ctx.skip('the store cannot cancel');
      }
      const { running, queued } = await untilNextIsBlocked(store, 'p');
      await free(store, refOf(running));
      // A released job keeps its place ahead; every other path lets the blocked one in.
      const next = path === 'release' ? running : queued[0]!;
      expect(ids(await acquire(store))).toEqual([next.id]);
    });
  }

  it('expired-lease recovery lets the next blocked job in', async (ctx) => {
    const store = await h.open();
    skipWithoutBlocking(store, ctx);
    const { running, queued } = await untilNextIsBlocked(store, 'r', { retries: 0 });
    // The running job's owner goes away: its lease lapses.
    await store.release([refOf(running)]);
    const [held] = await acquire(store, { owner: 'gone', leaseMs: 150 });
    expect(held?.id).toBe(running.id);
    const expiresAt = held!.lockExpiresAt!.getTime();
    await waitFor('the lease to lapse on the store clock', async () =>
      (await storeNow(store)) > expiresAt + 50 ? true : undefined,
    );
    const { deadlettered } = await store.recoverExpiredLeases(100);
    expect(deadlettered).toEqual([running.id]);
    expect(ids(await acquire(store))).toEqual([queued[0]!.id]);
  });

  it('a higher-priority job enqueued into a blocked scope starts before the blocked ones', async (ctx) => {
    const store = await h.open();
    skipWithoutBlocking(store, ctx);
    const { running, queued } = await untilNextIsBlocked(store, 'h');
    const [urgent] = await enqueueJobs(store, [{ scope: 'h', exclusive: true, priority: 9 }]);
    expect(await drain(store, running)).toEqual([urgent!.id, ...ids(queued)]);
  });

  it('a job that comes due behind a blocked one never starts ahead of it', async (ctx) => {
    const store = await h.open();
    skipWithoutBlocking(store, ctx);
    const { running, queued } = await untilNextIsBlocked(store, 'o');
    // The running job fails and is due again at once: later than every queued job.
    await FREEING['fail (retry at once)']!(store, refOf(running));
    expect(await drain(store)).toEqual([...ids(queued), running.id]);
  });

  it('a settle from a process that neither leased the job nor names its scope leaves the next one blocked until the sweep', async (ctx) => {
    const store = await h.open();
    skipWithoutBlocking(store, ctx);
    if (!h.hasPeers) ctx.skip('the harness has no separate peer connections');
    const peer = await h.peer(store);
    const { running, queued } = await untilNextIsBlocked(store, 'w');
    // The race the sweep is for: the slot frees where nobody lets the next job in.
    await peer.complete([{ id: running.id, token: running.lockToken as string }]);
    expect(await statesOf(store, queued.slice(0, 1))).toEqual(['blocked']);
    expect(await acquire(store)).toEqual([]);
    // The sweep (every engine runs it with expired-lease recovery) lets it in.
    await store.recoverExpiredLeases(100);
    expect(ids(await acquire(store))).toEqual([queued[0]!.id]);
  });

  it('one sweep lets in the next job of each scope it reaches, however many wait blocked in each', async (ctx) => {
    const store = await h.open();
    skipWithoutBlocking(store, ctx);
    if (!h.hasPeers) ctx.skip('the harness has no separate peer connections');
    const peer = await h.peer(store);
    const heads: Job[] = [];
    const running: Job[] = [];
    for (const scope of ['many-a', 'many-b', 'many-c']) {
      // More blocked jobs per scope than a sweep takes scopes: it must count scopes, not rows.
      const set = await untilNextIsBlocked(store, scope, {}, 400);
      expect(set.queued.length).toBeGreaterThan(250);
      running.push(set.running);
      heads.push(set.queued[0]!);
    }
    // The slots free where nobody lets the next jobs in.
    await peer.complete(running.map((job) => ({ id: job.id, token: job.lockToken as string })));
    expect(await acquire(store)).toEqual([]);
    await store.recoverExpiredLeases(100);
    expect(ids(await acquire(store)).sort()).toEqual(ids(heads).sort());
  });

  it('suspend takes blocked jobs too; activate puts them back, and they run in order', async (ctx) => {
    const store = await h.open();
    skipWithoutBlocking(store, ctx);
    const { running, queued } = await untilNextIsBlocked(store, 'z');
    expect(await store.suspend({ scope: 'z' })).toBe(queued.length);
    const first = await store.getJob(queued[0]!.id);
    expect([first?.state, first?.suspendedFrom]).toEqual(['suspended', 'blocked']);
    await store.complete([refOf(running)]);
    expect(await acquire(store)).toEqual([]);
    expect(await store.activate({ scope: 'z' })).toBe(queued.length);
    expect(await drain(store)).toEqual(ids(queued));
  });

  it(
    'engines on several peers drain a blocked backlog enqueued while they run: never over the limit, each job run once (twice when it failed once)',
    async (ctx) => {
      const store = await h.open();
      skipWithoutBlocking(store, ctx);
      const peers = await h.peers(store, 3);
      const limit = 2;
      const total = Math.max(240, h.rounds * 4);
      let active = 0;
      const over: string[] = [];
      const runs = new Map<number, number>();
      const handlers = {
        work: async (job: Job<{ n: number }>) => {
          active += 1;
          if (active > limit) over.push(`#${job.payload.n}: ${active} at once`);
          runs.set(job.payload.n, (runs.get(job.payload.n) ?? 0) + 1);
          await sleep(1 + (job.payload.n % 3));
          active -= 1;
          // Every fifth job fails once: its retry comes due behind the blocked ones.
          if (job.payload.n % 5 === 0 && job.attempts === 1) throw new Error('once');
        },
      };
      const engines = peers.map(
        (peer) =>
          new JobEngine({
            store: peer,
            handlers,
            concurrency: 4,
            leaseMs: 5_000,
            retry: { kind: 'fixed', delayMs: 0 },
          }),
      );
      for (const engine of engines) h.defer(() => engine.stop({ timeoutMs: 1_000 }));
      await Promise.all(engines.map((engine) => engine.start()));
      // In bursts from every engine while the others run: enqueues race settles.
      await Promise.all(
        engines.map(async (engine, e) => {
          for (let n = e; n < total; n += engines.length) {
            await engine.enqueue(
              'work',
              { n },
              { scope: 'race', scopeLimit: limit, priority: n % 3 },
            );
            if (n % 4 === 0) await sleep(2);
          }
        }),
      );
      const expected = Array.from({ length: total }, (_, n) => n);
      await waitFor(
        'every job to run',
        async () => expected.every((n) => (runs.get(n) ?? 0) >= (n % 5 === 0 ? 2 : 1)),
        h.timeoutMs,
      );
      expect(over).toEqual([]);
      expect(expected.filter((n) => (runs.get(n) ?? 0) !== (n % 5 === 0 ? 2 : 1))).toEqual([]);
      await waitFor('the live table to empty', async () =>
        (await store.listJobs({ limit: 10, offset: 0 })).length === 0 ? true : undefined,
      );
    },
    h.timeout(3),
  );
}
