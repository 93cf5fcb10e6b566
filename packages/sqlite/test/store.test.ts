import { FakeClock, type Job, LEASE_EXPIRED_MESSAGE } from '@jobs/core';
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { newJob, openStore, readRow, request } from './helpers.js';

const T0 = Date.UTC(2026, 0, 1);

async function clocked() {
  const clock = new FakeClock(T0);
  const store = await openStore({ clock });
  const filename = store.db.name;
  return { clock, store, filename };
}

const ref = (job: Job) => ({ id: job.id, token: job.lockToken! });

describe('enqueue', () => {
  test('enqueue stores rows with epoch-ms times and returns them in input order', async () => {
    const { store, filename } = await clocked();
    const results = await store.enqueue([
      newJob({ type: 'a', payload: { n: 1 } }),
      newJob({ type: 'b', delayMs: 5_000 }),
      newJob({ type: 'c', dueAt: new Date(T0 - 1_000) }),
    ]);
    expect(results.map((r) => [r.job.type, r.job.state, r.created])).toEqual([
      ['a', 'async', true],
      ['b', 'timer', true],
      ['c', 'async', true],
    ]);
    expect(Number(results[0]!.job.id)).toBeLessThan(Number(results[1]!.job.id));
    const raw = readRow(
      filename,
      'SELECT * FROM jobs_jobs WHERE id = ?',
      Number(results[1]!.job.id),
    );
    expect(raw).toMatchObject({ state: 'timer', due_at: T0 + 5_000, created_at: T0, exclusive: 0 });
    expect(
      JSON.parse(
        String(readRow(filename, 'SELECT payload FROM jobs_jobs WHERE type = ?', 'a')!.payload),
      ),
    ).toEqual({ n: 1 });
  });

  test('a held key returns the holder, also for a duplicate later in the same batch', async () => {
    const { store } = await clocked();
    const [first] = await store.enqueue([newJob({ key: 'k1' })]);
    const results = await store.enqueue([
      newJob({ key: 'k2', payload: 1 }),
      newJob({ key: 'k1' }),
      newJob({ payload: 'plain' }),
      newJob({ key: 'k2', payload: 2 }),
    ]);
    expect(results.map((r) => r.created)).toEqual([true, false, true, false]);
    expect(results[1]!.job.id).toBe(first!.job.id);
    expect(results[3]!.job.id).toBe(results[0]!.job.id);
    expect(results[3]!.job.payload).toBe(1);
    expect((await store.listJobs({ limit: 100, offset: 0 })).length).toBe(3);
  });

  test('a key is free again once its job finished', async () => {
    const { store } = await clocked();
    await store.enqueue([newJob({ key: 'k' })]);
    const [job] = await store.acquire(request);
    await store.complete([ref(job!)]);
    const [again] = await store.enqueue([newJob({ key: 'k' })]);
    expect(again!.created).toBe(true);
    expect(Number(again!.job.id)).toBeGreaterThan(Number(job!.id));
  });

  test('an undefined payload is stored as null', async () => {
    const { store } = await clocked();
    const [r] = await store.enqueue([newJob({ payload: undefined })]);
    expect(r!.job.payload).toBeNull();
  });

  test('a batch larger than one INSERT chunk keeps input order and ids', async () => {
    const { store } = await clocked();
    const jobs = Array.from({ length: 2_500 }, (_, i) =>
      newJob({ payload: i, key: i % 500 === 7 ? `k${i % 1000}` : null }),
    );
    const results = await store.enqueue(jobs);
    results.forEach((r, i) => {
      expect(r.job.payload).toBe(jobs[i]!.key === null ? i : r.job.payload);
    });
    // keys k7 and k507 repeat (i = 7, 507, 1007, 1507, 2007): first of each wins
    expect(results[1007]!.created).toBe(false);
    expect(results[1007]!.job.id).toBe(results[7]!.job.id);
    expect(results[2007]!.job.id).toBe(results[7]!.job.id);
    expect(results[1507]!.job.id).toBe(results[507]!.job.id);
    const ids = results.filter((r) => r.created).map((r) => Number(r.job.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(2_500 - 3);
  });
});

describe('acquire', () => {
  test('acquires due jobs by priority, due time, insertion; never future timers', async () => {
    const { store, clock } = await clocked();
    const [low, high, early, later, future] = await store.enqueue([
      newJob({ payload: 'low', priority: 0 }),
      newJob({ payload: 'high', priority: 5 }),
      newJob({ payload: 'early', dueAt: new Date(T0 - 10) }),
      newJob({ payload: 'later', priority: 0 }),
      newJob({ payload: 'future', delayMs: 1_000 }),
    ]);
    const jobs = await store.acquire({ ...request, limit: 10 });
    expect(jobs.map((j) => j.payload)).toEqual(['high', 'early', 'low', 'later']);
    expect(jobs.every((j) => j.state === 'running' && j.attempts === 1)).toBe(true);
    expect(jobs[0]!.lockExpiresAt!.getTime()).toBe(T0 + 30_000);
    expect(new Set(jobs.map((j) => j.lockToken)).size).toBe(1);
    expect([low, high, early, later].every((r) => jobs.some((j) => j.id === r!.job.id))).toBe(true);
    clock.advance(999);
    expect(await store.acquire(request)).toEqual([]);
    clock.advance(1);
    expect((await store.acquire(request)).map((j) => j.id)).toEqual([future!.job.id]);
  });

  test('filters by type, queue and tenant; null tenants include jobs without tenant', async () => {
    const { store } = await clocked();
    await store.enqueue([
      newJob({ type: 'a', queue: 'q1', tenantId: 't1' }),
      newJob({ type: 'a', queue: 'q2', tenantId: null }),
      newJob({ type: 'b', queue: 'q1', tenantId: 't2' }),
    ]);
    const byQueue = await store.acquire({
      ...request,
      types: ['a', 'b'],
      queues: ['q1'],
      owner: 'x',
    });
    expect(byQueue.map((j) => [j.type, j.queue])).toEqual([
      ['a', 'q1'],
      ['b', 'q1'],
    ]);
    const byTenant = await store.acquire({ ...request, types: ['a'], tenants: ['t1'] });
    expect(byTenant).toEqual([]);
    const rest = await store.acquire({ ...request, types: ['a'] });
    expect(rest.map((j) => [j.queue, j.tenantId])).toEqual([['q2', null]]);
  });

  test('respects the limit', async () => {
    const { store } = await clocked();
    await store.enqueue(Array.from({ length: 5 }, () => newJob()));
    expect((await store.acquire({ ...request, limit: 2 })).length).toBe(2);
    expect((await store.acquire({ ...request, limit: 10 })).length).toBe(3);
  });

  test('exclusive: only the head of a scope goes, one per batch, in order', async () => {
    const { store } = await clocked();
    const [a1, a2, b1, n1, a0] = await store.enqueue([
      newJob({ scope: 's', exclusive: true, payload: 'a1' }),
      newJob({ scope: 's', exclusive: true, payload: 'a2' }),
      newJob({ scope: 't', exclusive: true, payload: 'b1' }),
      newJob({ scope: 's', exclusive: false, payload: 'n1' }),
      newJob({ scope: 's', exclusive: true, payload: 'a0', priority: 1 }),
    ]);
    const first = await store.acquire(request);
    expect(first.map((j) => j.payload).sort()).toEqual(['a0', 'b1', 'n1']);
    // a0 is running: nothing else of scope s goes, even with a lease that is live
    expect(await store.acquire(request)).toEqual([]);
    await store.complete([ref(first.find((j) => j.id === a0!.job.id)!)]);
    expect((await store.acquire(request)).map((j) => j.id)).toEqual([a1!.job.id]);
    expect(a2 && b1 && n1).toBeTruthy();
  });

  test('exclusive: a head of another type still blocks; so does a lapsed lease, until recovered', async () => {
    const { store, clock } = await clocked();
    await store.enqueue([
      newJob({ type: 'other', scope: 's', exclusive: true }),
      newJob({ type: 'work', scope: 's', exclusive: true, payload: 'w' }),
    ]);
    expect(await store.acquire(request)).toEqual([]);
    const [other] = await store.acquire({ ...request, types: ['other'], leaseMs: 100 });
    expect(other).toBeDefined();
    expect(await store.acquire(request)).toEqual([]);
    clock.advance(100);
    // Its owner may still be running it: the scope stays taken until recovery requeues it.
    expect(await store.acquire(request)).toEqual([]);
    expect((await store.recoverExpiredLeases(10)).requeued).toEqual([other!.id]);
    const [again] = await store.acquire({ ...request, types: ['other'] });
    await store.complete([ref(again!)]);
    expect((await store.acquire(request)).map((j) => j.payload)).toEqual(['w']);
  });

  test('exclusive: a waiting head that is not due yet does not block', async () => {
    const { store } = await clocked();
    await store.enqueue([
      newJob({ scope: 's', exclusive: true, priority: 9, delayMs: 10_000 }),
      newJob({ scope: 's', exclusive: true, payload: 'now' }),
    ]);
    expect((await store.acquire(request)).map((j) => j.payload)).toEqual(['now']);
  });

  test('deadletter and suspended jobs are never acquired', async () => {
    const { store } = await clocked();
    await store.enqueue([newJob({ payload: 1 }), newJob({ payload: 2, type: 'x' })]);
    const [job] = await store.acquire(request);
    await store.fail([
      { ...ref(job!), error: { message: 'boom', stack: null }, deadletter: true, retryDelayMs: 0 },
    ]);
    expect(await store.suspend({ type: 'x' })).toBe(1);
    expect(await store.acquire({ ...request, types: ['work', 'x'] })).toEqual([]);
  });

  test('with nothing due, acquire reads without the write lock; with a due job it takes it', async () => {
    const store = await openStore({ busyTimeoutMs: 100 });
    const [due] = await store.enqueue([
      newJob({ type: 'other' }),
      newJob({ payload: 'later', delayMs: 60_000 }),
    ]);
    // Another process holds the write lock, as a long write transaction would.
    const writer = new Database(store.db.name);
    writer.exec('BEGIN IMMEDIATE');
    try {
      // Nothing of type `work` is due: answered at once, not after the busy timeout.
      expect(await store.acquire(request)).toEqual([]);
      // A due `other` job must be leased under the lock, so this one waits and gives up.
      await expect(store.acquire({ ...request, types: ['other'] })).rejects.toThrow(/locked|busy/i);
    } finally {
      writer.exec('ROLLBACK');
      writer.close();
    }
    expect((await store.acquire({ ...request, types: ['other'] })).map((j) => j.id)).toEqual([
      due!.job.id,
    ]);
  });
});

describe('settling', () => {
  test('complete deletes held jobs; a stale token is reported lost and changes nothing', async () => {
    const { store, filename } = await clocked();
    await store.enqueue([newJob(), newJob()]);
    const [a, b] = await store.acquire(request);
    const result = await store.complete([
      ref(a!),
      { id: b!.id, token: 'stale' },
      { id: 'nope', token: 'x' },
    ]);
    expect(result.lost.sort()).toEqual([b!.id, 'nope'].sort());
    expect(
      readRow(filename, 'SELECT id FROM jobs_jobs WHERE id = ?', Number(a!.id)),
    ).toBeUndefined();
    expect(readRow(filename, 'SELECT state FROM jobs_jobs WHERE id = ?', Number(b!.id))).toEqual({
      state: 'running',
    });
  });

  test('fail: retry → timer after the delay with one retry fewer; deadletter keeps retries', async () => {
    const { store, clock } = await clocked();
    await store.enqueue([newJob({ payload: 'r' }), newJob({ payload: 'd' })]);
    const [r, d] = await store.acquire(request);
    clock.advance(10);
    const result = await store.fail([
      { ...ref(r!), error: { message: 'm1', stack: 's1' }, deadletter: false, retryDelayMs: 500 },
      { ...ref(d!), error: { message: 'm2', stack: null }, deadletter: true, retryDelayMs: 0 },
      {
        id: '999',
        token: 'stale',
        error: { message: 'x', stack: null },
        deadletter: true,
        retryDelayMs: 0,
      },
    ]);
    expect(result.lost).toEqual(['999']);
    const retried = (await store.getJob(r!.id))!;
    expect(retried).toMatchObject({
      state: 'timer',
      retriesLeft: 2,
      attempts: 1,
      lockToken: null,
      lockOwner: null,
      lockExpiresAt: null,
      lastError: { message: 'm1', stack: 's1' },
    });
    expect(retried.dueAt.getTime()).toBe(T0 + 510);
    expect(await store.getJob(d!.id)).toMatchObject({
      state: 'deadletter',
      retriesLeft: 3,
      lastError: { message: 'm2', stack: null },
    });
  });

  test('release gives the job back as async without counting the attempt', async () => {
    const { store } = await clocked();
    await store.enqueue([newJob()]);
    const [job] = await store.acquire(request);
    expect(await store.release([ref(job!)])).toEqual({ lost: [] });
    expect(await store.getJob(job!.id)).toMatchObject({
      state: 'async',
      attempts: 0,
      lockToken: null,
    });
    expect(await store.release([ref(job!)])).toEqual({ lost: [job!.id] });
  });

  test("renewLeases extends only the owner's held jobs, even after expiry while the token matches", async () => {
    const { store, clock } = await clocked();
    await store.enqueue([newJob(), newJob()]);
    const [a, b] = await store.acquire({ ...request, leaseMs: 100 });
    clock.advance(150);
    const renewed = await store.renewLeases('owner-a', 1_000, [
      ref(a!),
      { id: b!.id, token: 'bad' },
    ]);
    expect(renewed.lost).toEqual([b!.id]);
    expect((await store.getJob(a!.id))!.lockExpiresAt!.getTime()).toBe(T0 + 1_150);
    expect((await store.renewLeases('someone-else', 1_000, [ref(a!)])).lost).toEqual([a!.id]);
  });

  test('recoverExpiredLeases requeues with a retry fewer, deadletters at zero, leaves live leases', async () => {
    const { store, clock } = await clocked();
    await store.enqueue([newJob({ retries: 1 }), newJob({ retries: 0 }), newJob({ type: 'long' })]);
    const short = await store.acquire({ ...request, leaseMs: 100 });
    const [long] = await store.acquire({ ...request, types: ['long'], leaseMs: 10_000 });
    clock.advance(100);
    const result = await store.recoverExpiredLeases(10);
    expect(result).toEqual({ requeued: [short[0]!.id], deadlettered: [short[1]!.id] });
    expect(await store.getJob(short[0]!.id)).toMatchObject({
      state: 'async',
      retriesLeft: 0,
      attempts: 1,
      lockToken: null,
      lastError: { message: LEASE_EXPIRED_MESSAGE, stack: null },
    });
    expect((await store.getJob(long!.id))!.state).toBe('running');
    expect((await store.complete([ref(short[0]!)])).lost).toEqual([short[0]!.id]);
  });

  test('completeAndAcquire settles and leases in one transaction', async () => {
    const { store } = await clocked();
    await store.enqueue([newJob(), newJob(), newJob()]);
    const [first] = await store.acquire({ ...request, limit: 1 });
    const before = store.counters.transactions;
    const { lost, jobs } = await store.completeAndAcquire([ref(first!)], { ...request, limit: 5 });
    expect(lost).toEqual([]);
    expect(jobs.length).toBe(2);
    expect(store.counters.transactions - before).toBe(1);
    expect(await store.getJob(first!.id)).toBeNull();
  });

  test('nextDueAt is the earliest waiting due time matching the filter', async () => {
    const { store } = await clocked();
    expect(await store.nextDueAt({ types: ['work'], queues: null, tenants: null })).toBeNull();
    await store.enqueue([
      newJob({ delayMs: 700 }),
      newJob({ delayMs: 300, queue: 'q' }),
      newJob({ type: 'x', delayMs: 1 }),
    ]);
    expect(await store.nextDueAt({ types: ['work'], queues: null, tenants: null })).toEqual(
      new Date(T0 + 300),
    );
    expect(await store.nextDueAt({ types: ['work'], queues: ['default'], tenants: null })).toEqual(
      new Date(T0 + 700),
    );
  });
});

describe('admin', () => {
  test('listJobs filters and pages in id order; getJob/deleteJob take only real ids', async () => {
    const { store } = await clocked();
    const results = await store.enqueue(
      Array.from({ length: 6 }, (_, i) =>
        newJob({ type: i % 2 ? 'odd' : 'even', scope: `s${i % 3}` }),
      ),
    );
    const odd = await store.listJobs({ type: 'odd', limit: 2, offset: 1 });
    expect(odd.map((j) => j.id)).toEqual([results[3]!.job.id, results[5]!.job.id]);
    expect(
      (await store.listJobs({ state: ['async', 'timer'], scope: 's0', limit: 10, offset: 0 }))
        .length,
    ).toBe(2);
    expect(await store.getJob('abc')).toBeNull();
    expect(await store.getJob(`${results[0]!.job.id}x`)).toBeNull();
    expect(await store.deleteJob('0')).toBe(false);
    expect(await store.deleteJob(results[0]!.job.id)).toBe(true);
    expect(await store.deleteJob(results[0]!.job.id)).toBe(false);
  });

  test('retryDeadletter only moves deadletter jobs, with fresh retries and due now', async () => {
    const { store, clock } = await clocked();
    const [r] = await store.enqueue([newJob()]);
    expect(await store.retryDeadletter(r!.job.id, 5)).toBeNull();
    const [job] = await store.acquire(request);
    await store.fail([
      { ...ref(job!), error: { message: 'x', stack: null }, deadletter: true, retryDelayMs: 0 },
    ]);
    clock.advance(1_000);
    const retried = await store.retryDeadletter(job!.id, 5);
    expect(retried).toMatchObject({ state: 'async', retriesLeft: 5, lastError: { message: 'x' } });
    expect(retried!.dueAt.getTime()).toBe(T0 + 1_000);
  });

  test('suspend and activate restore the state each job came from', async () => {
    const { store } = await clocked();
    await store.enqueue([
      newJob({ tenantId: 't' }),
      newJob({ tenantId: 't', delayMs: 1_000 }),
      newJob({ tenantId: 'u' }),
    ]);
    expect(await store.suspend({ tenantId: 't' })).toBe(2);
    expect(
      (await store.listJobs({ state: 'suspended', limit: 10, offset: 0 })).map(
        (j) => j.suspendedFrom,
      ),
    ).toEqual(['async', 'timer']);
    expect(await store.activate({ tenantId: 't' })).toBe(2);
    expect(
      (await store.listJobs({ tenantId: 't', limit: 10, offset: 0 })).map((j) => [
        j.state,
        j.suspendedFrom,
      ]),
    ).toEqual([
      ['async', null],
      ['timer', null],
    ]);
  });

  test('stats counts by type and state', async () => {
    const { store } = await clocked();
    await store.enqueue([
      newJob({ type: 'a' }),
      newJob({ type: 'a' }),
      newJob({ type: 'b', delayMs: 5 }),
    ]);
    expect(await store.stats()).toEqual([
      { type: 'a', state: 'async', count: 2 },
      { type: 'b', state: 'timer', count: 1 },
    ]);
  });
});

describe('schedules', () => {
  test('saveSchedule inserts, then updates keeping paused and progress unless reset', async () => {
    const { store, clock } = await clocked();
    const created = await store.saveSchedule({
      name: 'n',
      spec: { cron: '* * * * *' },
      nextAt: new Date(T0 + 60_000),
      resetProgress: false,
    });
    expect(created).toMatchObject({
      name: 'n',
      paused: false,
      pendingMisfire: false,
      fired: 0,
      skipped: 0,
      version: 1,
      spec: { cron: '* * * * *' },
    });
    await store.setSchedulePaused('n', true);
    clock.advance(5);
    const updated = await store.saveSchedule({
      name: 'n',
      spec: { every: 'PT1M' },
      nextAt: null,
      resetProgress: false,
    });
    expect(updated).toMatchObject({
      paused: true,
      version: 3,
      nextAt: null,
      spec: { every: 'PT1M' },
    });
    expect(updated!.updatedAt.getTime()).toBe(T0 + 5);
    expect(updated!.createdAt.getTime()).toBe(T0);
    expect(await store.setSchedulePaused('missing', true)).toBeNull();
    expect((await store.listSchedules()).map((s) => s.name)).toEqual(['n']);
    expect(await store.deleteSchedule('n')).toBe(true);
    expect(await store.deleteSchedule('n')).toBe(false);
  });

  test('dueSchedules: unpaused, next_at reached or a pending misfire', async () => {
    const { store, clock } = await clocked();
    await store.saveSchedule({
      name: 'later',
      spec: {},
      nextAt: new Date(T0 + 10),
      resetProgress: false,
    });
    await store.saveSchedule({ name: 'now', spec: {}, nextAt: new Date(T0), resetProgress: false });
    await store.saveSchedule({
      name: 'paused',
      spec: {},
      nextAt: new Date(T0),
      resetProgress: false,
    });
    await store.setSchedulePaused('paused', true);
    expect((await store.dueSchedules(10)).map((s) => s.name)).toEqual(['now']);
    clock.advance(10);
    expect((await store.dueSchedules(10)).map((s) => s.name)).toEqual(['now', 'later']);
  });

  test('fireSchedule: fired, then skipped / coalesced while busy, conflict on a stale version', async () => {
    const { store } = await clocked();
    let s = await store.saveSchedule({
      name: 'n',
      spec: {},
      nextAt: new Date(T0),
      resetProgress: false,
    });
    const fire = (overlap: 'skip' | 'coalesce' | 'allow', version: number) =>
      store.fireSchedule({
        name: 'n',
        version,
        nextAt: new Date(T0 + 1_000),
        overlap,
        jobs: [newJob({ schedule: 'n', occurrence: new Date(T0), shard: { index: 0, count: 1 } })],
        occurrences: 1,
      });
    const fired = await fire('skip', s!.version);
    expect(fired.status).toBe('fired');
    expect(fired.jobs[0]).toMatchObject({
      schedule: 'n',
      occurrence: new Date(T0),
      shard: { index: 0, count: 1 },
    });
    expect(await fire('skip', s!.version)).toEqual({ status: 'conflict', jobs: [] });
    s = (await store.getSchedule('n'))!;
    expect(s).toMatchObject({ fired: 1, version: 2, nextAt: new Date(T0 + 1_000) });
    expect((await fire('skip', 2)).status).toBe('skipped');
    expect((await fire('coalesce', 3)).status).toBe('coalesced');
    expect(await store.getSchedule('n')).toMatchObject({
      skipped: 1,
      pendingMisfire: true,
      fired: 1,
      version: 4,
    });
    expect((await store.dueSchedules(5)).map((x) => x.name)).toEqual(['n']);
    expect((await fire('allow', 4)).status).toBe('fired');
    expect(await store.getSchedule('n')).toMatchObject({
      pendingMisfire: false,
      fired: 2,
      version: 5,
    });
    expect((await store.listJobs({ schedule: 'n', limit: 10, offset: 0 })).length).toBe(2);
    const reset = await store.saveSchedule({
      name: 'n',
      spec: {},
      nextAt: null,
      resetProgress: true,
    });
    expect(reset).toMatchObject({ fired: 0, skipped: 0, pendingMisfire: false, version: 6 });
  });
});

describe('store lifecycle', () => {
  test('a closed store rejects calls with a StoreError', async () => {
    const { store } = await clocked();
    await store.close();
    await expect(store.getJob('1')).rejects.toThrow(
      /\[@jobs\/sqlite\] getJob: the store is closed/,
    );
    await store.close();
  });

  test('unknown options and bad prefixes are rejected', async () => {
    const { SqliteJobStore } = await import('@jobs/sqlite');
    expect(() => new SqliteJobStore({ filename: 'x.db', tablePrefx: 'a' } as never)).toThrow(
      /tablePrefx/,
    );
    expect(() => new SqliteJobStore({ filename: 'x.db', tablePrefix: 'a; DROP' })).toThrow(
      /tablePrefix/,
    );
    expect(() => new SqliteJobStore({})).toThrow(/filename/);
    const { db } = await openStore();
    expect(() => new SqliteJobStore({ db, filename: 'x.db' })).toThrow(
      /exactly one of `filename` or `db`/,
    );
  });

  test('a table prefix keeps two stores apart in one file', async () => {
    const a = await openStore({ tablePrefix: 'app_' });
    const b = await openStore({ filename: a.db.name, tablePrefix: 'other_' });
    await a.enqueue([newJob()]);
    expect(await b.listJobs({ limit: 10, offset: 0 })).toEqual([]);
    expect(readRow(a.db.name, 'SELECT COUNT(*) AS n FROM app_jobs')).toEqual({ n: 1 });
  });
});

describe('the statement runner', () => {
  test("rows it builds from better-sqlite3's array rows equal the driver's own row objects", async () => {
    const { SqliteSyncRunner } = await import('@jobs/core/sql');
    const db = new Database(':memory:');
    db.exec(
      `CREATE TABLE t (id INTEGER PRIMARY KEY, "a b" TEXT, "__proto__" TEXT, n REAL, x BLOB)`,
    );
    db.exec(`INSERT INTO t VALUES (1, 'one', 'p', 1.5, x'00ff'), (2, NULL, NULL, NULL, NULL)`);
    const runner = new SqliteSyncRunner(() => db);
    const texts = [
      'SELECT * FROM t ORDER BY id',
      // Duplicate names: the last one wins, as in the driver's objects.
      'SELECT id, "a b" AS id, n FROM t ORDER BY id',
      'SELECT id, "a b", n FROM t ORDER BY id',
      `UPDATE t SET n = n + 1 RETURNING id, "a b", n, x`,
    ];
    db.exec('BEGIN');
    for (const sql of texts) {
      const own = db.prepare(sql).all();
      db.exec('ROLLBACK');
      db.exec('BEGIN');
      // Twice: the first run prepares the statement, the second reuses it.
      for (let i = 0; i < 2; i++) {
        const rows = runner.execute({ sql, params: [] }).rows;
        expect(rows, sql).toEqual(own);
        db.exec('ROLLBACK');
        db.exec('BEGIN');
      }
    }
    db.exec('ROLLBACK');
    expect(runner.execute({ sql: 'UPDATE t SET n = 0', params: [] })).toMatchObject({
      rows: [],
      affected: 2,
    });
  });
});
