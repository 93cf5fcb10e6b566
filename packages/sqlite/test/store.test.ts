/**
 * What only the SQLite store has: its statement counts and transactions (multi-row INSERT
 * chunks, a read without the write lock, one transaction per completeAndAcquire), its epoch-ms
 * rows, its options and table prefixes in one file, and its statement runner. The rules every
 * store follows (acquisition order, filters, limited scopes, settling, leases, admin,
 * schedules) are stated once, in the conformance suite this store passes (conformance.test.ts).
 */
import { FakeClock, type Job } from '@jobs/core';
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
  test('a bulk enqueue is a few multi-row INSERTs in one transaction; ids and rows as read back, in input order', async () => {
    const { store } = await clocked();
    const before = store.counters;
    const jobs = Array.from({ length: 300 }, (_, n) =>
      newJob({ payload: { n }, delayMs: n % 3 === 0 ? 1_000 : 0, priority: n % 5 }),
    );
    const results = await store.enqueue(jobs);
    // 300 rows in runs of 128, 128, 32, 8 and 4: five statements, one commit.
    expect(store.counters.statements - before.statements).toBe(5);
    expect(store.counters.transactions - before.transactions).toBe(1);
    expect(results.map((r) => (r.job.payload as { n: number }).n)).toEqual(jobs.map((_, n) => n));
    const ids = results.map((r) => Number(r.job.id));
    expect(ids).toEqual(ids.map((_, k) => (ids[0] as number) + k));
    for (const { job, created } of results) {
      expect(created).toBe(true);
      expect(await store.getJob(job.id)).toEqual(job);
    }
  });

  test('a bulk enqueue keeps the optional fields of the few jobs that have them', async () => {
    const { store } = await clocked();
    const jobs = Array.from({ length: 130 }, (_, n) =>
      newJob({
        payload: { n },
        ...(n === 5 ? { tenantId: 't5', scope: 's5' } : {}),
        ...(n === 70 ? { meta: { trace: 'x' }, timeoutMs: 1_500 } : {}),
        ...(n === 129 ? { retryPolicy: { kind: 'fixed', delayMs: 10 } } : {}),
      }),
    );
    const results = await store.enqueue(jobs);
    for (const [n, { job }] of results.entries()) {
      const stored = await store.getJob(job.id);
      expect(stored).toEqual(job);
      expect(stored!.tenantId).toBe(n === 5 ? 't5' : null);
      expect(stored!.scope).toBe(n === 5 ? 's5' : null);
      expect(stored!.meta).toEqual(n === 70 ? { trace: 'x' } : null);
      expect(stored!.timeoutMs).toBe(n === 70 ? 1_500 : null);
      expect(stored!.retryPolicy).toEqual(n === 129 ? { kind: 'fixed', delayMs: 10 } : null);
    }
  });

  test('one keyless job is one INSERT without a transaction of its own; a keyed one has one', async () => {
    const { store } = await clocked();
    let before = store.counters;
    const [plain] = await store.enqueue([newJob({ payload: { a: 1 } })]);
    expect(store.counters.statements - before.statements).toBe(1);
    expect(store.counters.transactions - before.transactions).toBe(0);
    expect(await store.getJob(plain!.job.id)).toEqual(plain!.job);
    before = store.counters;
    const [keyed] = await store.enqueue([newJob({ key: 'k' })]);
    expect(store.counters.transactions - before.transactions).toBe(1);
    const [again] = await store.enqueue([newJob({ key: 'k' })]);
    expect(again!.created).toBe(false);
    expect(again!.job.id).toBe(keyed!.job.id);
  });

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

  // Not in the conformance suite yet: kept here until it is.
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
