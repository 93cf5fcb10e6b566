import { type AcquireRequest, LEASE_EXPIRED_MESSAGE, ValidationError } from '@jobs/core';
import { postgresDialect } from '@jobs/core/sql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresJobStore } from '../src/index.js';
import {
  dropSchema,
  newJob,
  openStore,
  PG_URL,
  randomSchema,
  reachable,
  sleep,
  sql,
} from './helpers.js';

/** Every schema version this release knows, oldest first. */
const ALL_VERSIONS = postgresDialect({ tablePrefix: '', schema: null }).migrations.map(
  (m) => m.version,
);

const schema = randomSchema('store');
const request = (over: Partial<AcquireRequest> = {}): AcquireRequest => ({
  owner: 'o1',
  limit: 10,
  leaseMs: 30_000,
  types: ['a'],
  queues: null,
  tenants: null,
  ...over,
});

describe.skipIf(!reachable)('PostgresJobStore (direct)', () => {
  let store: PostgresJobStore;

  beforeAll(async () => {
    store = openStore(schema);
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  async function clear(): Promise<void> {
    await sql(`DELETE FROM "${schema}".jobs`);
  }

  it('migrate is idempotent and records its version', async () => {
    await store.migrate();
    const rows = await sql<{ version: number }>(
      `SELECT version FROM "${schema}".jobs_migrations ORDER BY version`,
    );
    expect(rows.map((r) => r.version)).toEqual(ALL_VERSIONS);
  });

  it('works on a pool you pass in, and leaves that pool open on close', async () => {
    const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    try {
      const mine = new PostgresJobStore({ pool, schema });
      const woke = new Promise<void>((resolve) => mine.subscribe(resolve));
      await mine.listening();
      await store.enqueue([newJob('pool-test')]);
      await woke;
      await mine.close();
      const { rows } = await pool.query('SELECT 1 AS one');
      expect(rows[0]?.one).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it('rejects a schema that is not an identifier', () => {
    expect(() => openStore('jobs; drop table x')).toThrow(/identifier/);
  });

  it('rejects unknown options, both or neither of connectionString and pool, and a bad max', () => {
    const pool = new pg.Pool({ connectionString: PG_URL });
    try {
      expect(() => new PostgresJobStore({ connectionString: PG_URL, shema: 'x' } as never)).toThrow(
        /shema: \[@jobs\/postgres\] unknown option; known: connectionString/,
      );
      expect(() => new PostgresJobStore({ connectionString: PG_URL, pool })).toThrow(
        ValidationError,
      );
      expect(() => new PostgresJobStore({})).toThrow(/exactly one of `connectionString` or `pool`/);
      expect(() => new PostgresJobStore({ connectionString: PG_URL, max: 0 })).toThrow(
        /max: \[@jobs\/postgres\] must be a positive integer/,
      );
    } finally {
      void pool.end();
    }
  });

  it('enqueue returns jobs in input order, honours keys within a batch and against rows', async () => {
    await clear();
    const [first] = await store.enqueue([newJob('a', { key: 'k1' })]);
    const results = await store.enqueue([
      newJob('a', { payload: { n: 1 } }),
      newJob('a', { key: 'k1' }),
      newJob('a', { key: 'k2', payload: { n: 2 } }),
      newJob('a', { key: 'k2', payload: { n: 3 } }),
      newJob('a', { payload: { n: 4 }, delayMs: 60_000 }),
    ]);
    expect(results.map((r) => r.created)).toEqual([true, false, true, false, true]);
    expect(results[1]?.job.id).toBe(first?.job.id);
    expect(results[3]?.job.id).toBe(results[2]?.job.id);
    expect(results[2]?.job.payload).toEqual({ n: 2 });
    expect(results[4]?.job.state).toBe('timer');
    expect(results[0]?.job.state).toBe('async');
    const ids = results.filter((r) => r.created).map((r) => Number(r.job.id));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  });

  it('bulk enqueue of 5,000 jobs is one statement and all are acquirable in order', async () => {
    await clear();
    const jobs = Array.from({ length: 5_000 }, (_, i) => newJob('a', { payload: { i } }));
    const results = await store.enqueue(jobs);
    expect(results).toHaveLength(5_000);
    expect(results.every((r, i) => (r.job.payload as { i: number }).i === i)).toBe(true);
    const got = await store.acquire(request({ limit: 3 }));
    expect(got.map((j) => (j.payload as { i: number }).i)).toEqual([0, 1, 2]);
  });

  it('completeAndAcquire completes the batch and leases the next in one call', async () => {
    await clear();
    await store.enqueue(Array.from({ length: 6 }, () => newJob('a')));
    const first = await store.acquire(request({ limit: 3 }));
    const stale = { id: first[0]?.id as string, token: 'stale' };
    const { lost, jobs } = await store.completeAndAcquire(
      [
        ...first.slice(1).map((j) => ({ id: j.id, token: j.lockToken as string })),
        stale,
        { id: 'x', token: 't' },
      ],
      request({ limit: 10 }),
    );
    expect(lost.sort()).toEqual([stale.id, 'x'].sort());
    expect(jobs).toHaveLength(3);
    expect(await store.getJob(first[1]?.id as string)).toBeNull();
  });

  it('fail, release, renew and recover follow the semantics', async () => {
    await clear();
    await store.enqueue([newJob('a', { retries: 1 }), newJob('a', { retries: 0 }), newJob('a')]);
    const [j1, j2, j3] = await store.acquire(request({ leaseMs: 100 }));
    if (!j1 || !j2 || !j3) throw new Error('expected 3 jobs');
    const ref = (j: typeof j1) => ({ id: j.id, token: j.lockToken as string });
    const failed = await store.fail([
      {
        ...ref(j1),
        error: { message: 'boom', stack: 's' },
        deadletter: false,
        retryDelayMs: 60_000,
      },
    ]);
    expect(failed.lost).toEqual([]);
    const after = await store.getJob(j1.id);
    expect(after).toMatchObject({
      state: 'timer',
      retriesLeft: 0,
      lockToken: null,
      lastError: { message: 'boom', stack: 's' },
    });
    expect((await store.release([ref(j3)])).lost).toEqual([]);
    expect(await store.getJob(j3.id)).toMatchObject({ state: 'async', attempts: 0 });
    await sleep(150);
    // Renewal after expiry still works while the token matches.
    expect((await store.renewLeases('o1', 30_000, [ref(j2), ref(j1)])).lost).toEqual([j1.id]);
    expect((await store.renewLeases('other', 30_000, [ref(j2)])).lost).toEqual([j2.id]);
    await sql(
      `UPDATE "${schema}".jobs SET lock_expires_at = now() - interval '1 second' WHERE id = $1`,
      [j2.id],
    );
    const recovered = await store.recoverExpiredLeases(10);
    expect(recovered).toEqual({ requeued: [], deadlettered: [j2.id] });
    expect(await store.getJob(j2.id)).toMatchObject({
      state: 'deadletter',
      lastError: { message: LEASE_EXPIRED_MESSAGE, stack: null },
    });
  });

  it('a job enqueued now is acquirable by the very next statement', async () => {
    await clear();
    // Due times are stored in milliseconds; rounding "now" up would leave the job not yet due
    // for up to half a millisecond, and the engine's immediate acquire would miss it.
    for (let i = 0; i < 50; i++) {
      const [enqueued] = await store.enqueue([newJob('a')]);
      const got = await store.acquire(request({ limit: 1 }));
      expect(got.map((j) => j.id)).toEqual([enqueued?.job.id]);
    }
  });

  it('acquire uses the database clock: a job due in 200 ms is not acquired before', async () => {
    await clear();
    await store.enqueue([newJob('a', { delayMs: 200 })]);
    expect(await store.acquire(request())).toHaveLength(0);
    const due = await store.nextDueAt({ types: ['a'], queues: null, tenants: null });
    expect(due).not.toBeNull();
    await sleep(250);
    expect(await store.acquire(request())).toHaveLength(1);
  });

  it('an exclusive scope runs one job at a time, in order, across racing stores', async () => {
    await clear();
    const peers = await Promise.all(Array.from({ length: 4 }, () => openStore(schema)));
    try {
      const perScope = 5;
      const scopes = ['s1', 's2', 's3'];
      await store.enqueue(
        scopes.flatMap((scope) =>
          Array.from({ length: perScope }, (_, i) =>
            newJob('a', { scope, exclusive: true, payload: { scope, i } }),
          ),
        ),
      );
      // Some non-exclusive noise in between.
      await store.enqueue(Array.from({ length: 20 }, () => newJob('a')));
      const order = new Map<string, number[]>();
      let done = 0;
      while (done < scopes.length * perScope) {
        const batches = await Promise.all(
          peers.map((p, n) => p.acquire(request({ owner: `p${n}`, limit: 5 }))),
        );
        const exclusive = batches.flat().filter((j) => j.exclusive);
        const byScope = new Map<string, number>();
        for (const j of exclusive)
          byScope.set(j.scope as string, (byScope.get(j.scope as string) ?? 0) + 1);
        // Never two of one scope at once.
        expect([...byScope.values()].every((n) => n === 1)).toBe(true);
        for (const j of exclusive) {
          const list = order.get(j.scope as string) ?? [];
          list.push((j.payload as { i: number }).i);
          order.set(j.scope as string, list);
        }
        const all = batches.flat();
        await store.complete(all.map((j) => ({ id: j.id, token: j.lockToken as string })));
        done += exclusive.length;
      }
      for (const scope of scopes) expect(order.get(scope)).toEqual([0, 1, 2, 3, 4]);
    } finally {
      await Promise.all(peers.map((p) => p.close()));
    }
  });

  it('a higher-priority exclusive job waits while an earlier one of its scope runs', async () => {
    await clear();
    const [low] = await store.enqueue([newJob('a', { scope: 's', exclusive: true })]);
    const [held] = await store.acquire(request());
    expect(held?.id).toBe(low?.job.id);
    await store.enqueue([
      newJob('a', { scope: 's', exclusive: true, priority: 10 }),
      newJob('b', { scope: 's', exclusive: true, priority: 20 }),
    ]);
    // The priority-20 'b' job is the scope's head: it blocks 'a' jobs even for an 'a'-only acquirer.
    expect(await store.acquire(request())).toHaveLength(0);
    await store.complete([{ id: held?.id as string, token: held?.lockToken as string }]);
    expect(await store.acquire(request())).toHaveLength(0);
    const [b] = await store.acquire(request({ types: ['a', 'b'] }));
    expect(b?.type).toBe('b');
  });

  it('a fire of one schedule version wins exactly once among racing stores', async () => {
    const peers = await Promise.all(Array.from({ length: 4 }, () => openStore(schema)));
    try {
      const saved = await store.saveSchedule({
        name: 'nightly',
        spec: { every: 'PT1H' },
        nextAt: new Date(),
        resetProgress: false,
      });
      const results = await Promise.all(
        peers.map((p) =>
          p.fireSchedule({
            name: 'nightly',
            version: saved!.version,
            nextAt: new Date(Date.now() + 3_600_000),
            overlap: 'skip',
            jobs: [newJob('report', { schedule: 'nightly', occurrence: saved!.nextAt })],
            occurrences: 1,
          }),
        ),
      );
      expect(results.filter((r) => r.status === 'fired')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'conflict')).toHaveLength(3);
      const after = await store.getSchedule('nightly');
      expect(after).toMatchObject({ fired: 1, version: saved!.version + 1 });
      const skipped = await store.fireSchedule({
        name: 'nightly',
        version: after?.version as number,
        nextAt: null,
        overlap: 'skip',
        jobs: [newJob('report', { schedule: 'nightly' })],
        occurrences: 1,
      });
      expect(skipped.status).toBe('skipped');
      expect(await store.getSchedule('nightly')).toMatchObject({
        skipped: 1,
        fired: 1,
        nextAt: null,
      });
    } finally {
      await Promise.all(peers.map((p) => p.close()));
    }
  });

  it('admin: list, filter, suspend, activate, retry, delete, stats', async () => {
    await clear();
    await store.enqueue([
      newJob('a', { tenantId: 't1' }),
      newJob('b', { delayMs: 60_000 }),
      newJob('a'),
    ]);
    expect(await store.suspend({ type: 'b' })).toBe(1);
    expect((await store.listJobs({ state: ['suspended'], limit: 10, offset: 0 }))[0]).toMatchObject(
      { type: 'b', suspendedFrom: 'timer' },
    );
    expect(await store.activate({ type: 'b' })).toBe(1);
    expect((await store.listJobs({ type: 'b', limit: 10, offset: 0 }))[0]?.state).toBe('timer');
    expect(await store.listJobs({ tenantId: 't1', limit: 10, offset: 0 })).toHaveLength(1);
    expect(await store.stats()).toEqual([
      { type: 'a', state: 'async', count: 2 },
      { type: 'b', state: 'timer', count: 1 },
    ]);
    const [j] = await store.acquire(request({ limit: 1 }));
    await store.fail([
      {
        id: j?.id as string,
        token: j?.lockToken as string,
        error: { message: 'x', stack: null },
        deadletter: true,
        retryDelayMs: 0,
      },
    ]);
    expect(await store.retryDeadletter('999999', 3)).toBeNull();
    expect(await store.retryDeadletter(j?.id as string, 5)).toMatchObject({
      state: 'async',
      retriesLeft: 5,
      lastError: { message: 'x' },
    });
    expect(await store.deleteJob(j?.id as string)).toBe(true);
    expect(await store.deleteJob(j?.id as string)).toBe(false);
    expect(await store.getJob('nope')).toBeNull();
  });
});
