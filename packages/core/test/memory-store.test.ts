import { describe, expect, it } from 'vitest';
import { FakeClock, LEASE_EXPIRED_MESSAGE, MemoryJobStore, StoreError } from '../src/index.js';
import { newJob } from './helpers.js';

function setup() {
  const clock = new FakeClock(new Date('2026-01-01T00:00:00Z'));
  const store = new MemoryJobStore({ clock });
  const acquire = (limit = 10, leaseMs = 1000, types = ['work']) =>
    store.acquire({ owner: 'o1', limit, leaseMs, types, queues: null, tenants: null });
  return { clock, store, acquire };
}

describe('MemoryJobStore', () => {
  it('assigns increasing string ids and returns results in input order', async () => {
    const { store } = setup();
    const results = await store.enqueue([newJob(), newJob({ type: 'b' }), newJob()]);
    expect(results.map((r) => r.job.id)).toEqual(['1', '2', '3']);
    expect(results.map((r) => r.job.type)).toEqual(['work', 'b', 'work']);
    expect(results.every((r) => r.created)).toBe(true);
  });

  it('a future due time makes a timer that is not acquired before the fake clock reaches it', async () => {
    const { clock, store, acquire } = setup();
    const [r] = await store.enqueue([newJob({ delayMs: 5000 })]);
    expect(r?.job.state).toBe('timer');
    expect(await acquire()).toEqual([]);
    expect(
      (await store.nextDueAt({ types: ['work'], queues: null, tenants: null }))?.getTime(),
    ).toBe(clock.now() + 5000);
    clock.advance(4999);
    expect(await acquire()).toEqual([]);
    clock.advance(1);
    const got = await acquire();
    expect(got.map((j) => j.id)).toEqual([r?.job.id]);
    expect(got[0]?.lockExpiresAt?.getTime()).toBe(clock.now() + 1000);
  });

  it('a key held by an unfinished job returns that job, also within one batch, and frees on completion', async () => {
    const { store, acquire } = setup();
    const [a, b] = await store.enqueue([newJob({ key: 'k' }), newJob({ key: 'k' })]);
    expect(a?.created).toBe(true);
    expect(b).toEqual({ job: a?.job, created: false });
    const [held] = await acquire();
    await store.complete([{ id: held!.id, token: held!.lockToken! }]);
    const [c] = await store.enqueue([newJob({ key: 'k' })]);
    expect(c?.created).toBe(true);
    expect(c?.job.id).not.toBe(a?.job.id);
  });

  it('returned jobs and payloads are copies', async () => {
    const { store } = setup();
    const payload = { list: [1, 2] };
    const [r] = await store.enqueue([newJob({ payload })]);
    payload.list.push(3);
    (r!.job.payload as { list: number[] }).list.push(4);
    r!.job.dueAt.setTime(0);
    const fresh = await store.getJob(r!.job.id);
    expect(fresh?.payload).toEqual({ list: [1, 2] });
    expect(fresh?.dueAt.getTime()).not.toBe(0);
  });

  it('a stale token changes nothing and is reported lost', async () => {
    const { clock, store, acquire } = setup();
    await store.enqueue([newJob()]);
    const [first] = await acquire(1, 100);
    clock.advance(100);
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: ['1'], deadlettered: [] });
    const [second] = await acquire(1, 100);
    expect(second?.lockToken).not.toBe(first?.lockToken);
    const stale = { id: first!.id, token: first!.lockToken! };
    expect(await store.complete([stale])).toEqual({ lost: ['1'] });
    expect(await store.release([stale])).toEqual({ lost: ['1'] });
    expect(await store.renewLeases('o1', 1000, [stale])).toEqual({ lost: ['1'] });
    expect(
      await store.fail([
        { ...stale, error: { message: 'x', stack: null }, deadletter: true, retryDelayMs: 0 },
      ]),
    ).toEqual({ lost: ['1'] });
    const job = await store.getJob('1');
    expect(job?.state).toBe('running');
    expect(job?.lockToken).toBe(second?.lockToken);
    expect(job?.attempts).toBe(2);
    expect(job?.retriesLeft).toBe(2);
    expect(job?.lastError?.message).toBe(LEASE_EXPIRED_MESSAGE);
  });

  it('exclusive jobs of one scope go one at a time in order, and a non-matching head blocks', async () => {
    const { store, acquire } = setup();
    await store.enqueue([
      newJob({ type: 'other', scope: 's', exclusive: true }),
      newJob({ scope: 's', exclusive: true }),
      newJob({ scope: 't', exclusive: true }),
      newJob({ scope: 't', exclusive: true }),
    ]);
    expect((await acquire()).map((j) => j.id)).toEqual(['3']);
    const [o] = await acquire(10, 1000, ['other']);
    expect(o?.id).toBe('1');
    await store.complete([{ id: '1', token: o!.lockToken! }]);
    expect(await acquire()).toEqual([{ ...(await store.getJob('2')) }]);
  });

  it('fail, recover and retryDeadletter move jobs through the lifecycle', async () => {
    const { clock, store, acquire } = setup();
    await store.enqueue([newJob({ retries: 1 })]);
    const [j] = await acquire();
    const err = { message: 'boom', stack: 'at x' };
    await store.fail([
      { id: j!.id, token: j!.lockToken!, error: err, deadletter: false, retryDelayMs: 500 },
    ]);
    let job = await store.getJob(j!.id);
    expect(job).toMatchObject({ state: 'timer', retriesLeft: 0, lastError: err, lockToken: null });
    expect(job?.dueAt.getTime()).toBe(clock.now() + 500);
    clock.advance(500);
    await acquire(1, 100);
    clock.advance(100);
    expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [], deadlettered: ['1'] });
    expect(await acquire()).toEqual([]);
    job = await store.retryDeadletter('1', 2);
    expect(job).toMatchObject({ state: 'async', retriesLeft: 2 });
    expect(await store.retryDeadletter('1', 2)).toBeNull();
  });

  it('suspend and activate restore the previous state', async () => {
    const { store, acquire } = setup();
    await store.enqueue([newJob(), newJob({ delayMs: 10_000 })]);
    expect(await store.suspend({ type: 'work' })).toBe(2);
    expect(await acquire()).toEqual([]);
    expect(await store.activate({})).toBe(2);
    expect((await store.listJobs({ limit: 10, offset: 0 })).map((j) => j.state)).toEqual([
      'async',
      'timer',
    ]);
  });

  it('subscribers are woken after an enqueue', async () => {
    const { store } = setup();
    let calls = 0;
    const off = store.subscribe(() => {
      calls += 1;
    });
    await store.enqueue([newJob()]);
    await new Promise((r) => setImmediate(r));
    expect(calls).toBe(1);
    off();
    await store.enqueue([newJob()]);
    await new Promise((r) => setImmediate(r));
    expect(calls).toBe(1);
  });

  it('fireSchedule compares versions and applies overlap', async () => {
    const { store } = setup();
    const s = await store.saveSchedule({
      name: 'n',
      spec: { every: 'PT1M' },
      nextAt: new Date(0),
      resetProgress: false,
    });
    expect(s).toMatchObject({ version: 1, fired: 0, paused: false });
    const fire = {
      name: 'n',
      nextAt: new Date(60_000),
      overlap: 'skip' as const,
      occurrences: 1,
      jobs: [newJob({ schedule: 'n' })],
    };
    expect((await store.fireSchedule({ ...fire, version: 1 })).status).toBe('fired');
    expect((await store.fireSchedule({ ...fire, version: 1 })).status).toBe('conflict');
    expect((await store.fireSchedule({ ...fire, version: 2 })).status).toBe('skipped');
    expect((await store.fireSchedule({ ...fire, version: 3, overlap: 'coalesce' })).status).toBe(
      'coalesced',
    );
    expect(await store.getSchedule('n')).toMatchObject({
      version: 4,
      fired: 1,
      skipped: 1,
      pendingMisfire: true,
    });
  });

  it('a closed store throws StoreError', async () => {
    const { store } = setup();
    await store.close();
    await expect(store.enqueue([newJob()])).rejects.toBeInstanceOf(StoreError);
  });
});
