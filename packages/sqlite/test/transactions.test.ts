import { JobEngine, ValidationError } from '@jobs/core';
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { newJob, openStore, readRow, sleep } from './helpers.js';

function countJobs(filename: string): number {
  return Number(readRow(filename, 'SELECT COUNT(*) AS n FROM jobs_jobs')!.n);
}

describe("enqueue inside the caller's transaction", () => {
  test("store.enqueue with tx commits with the caller's writes", async () => {
    const store = await openStore();
    store.db.exec('CREATE TABLE orders (id INTEGER PRIMARY KEY)');
    store.db.transaction(() => {
      store.db.prepare('INSERT INTO orders (id) VALUES (1)').run();
      void store.enqueue([newJob({ payload: { order: 1 } })], { tx: store.db });
    })();
    expect(countJobs(store.db.name)).toBe(1);
    expect(readRow(store.db.name, 'SELECT COUNT(*) AS n FROM orders')).toEqual({ n: 1 });
  });

  test('a rollback (throw inside db.transaction) leaves no job behind', async () => {
    const store = await openStore();
    let promise: Promise<unknown> | undefined;
    expect(() =>
      store.db.transaction(() => {
        promise = store.enqueue([newJob(), newJob({ key: 'k' })], { tx: store.db });
        throw new Error('business rule failed');
      })(),
    ).toThrow('business rule failed');
    await promise;
    expect(countJobs(store.db.name)).toBe(0);
    // the key was not taken by the rolled-back job
    const [again] = await store.enqueue([newJob({ key: 'k' })]);
    expect(again!.created).toBe(true);
  });

  test('engine.enqueue(…, { tx }) joins the transaction: rollback leaves nothing, commit runs the job', async () => {
    const store = await openStore();
    const ran: unknown[] = [];
    const engine = new JobEngine({
      store,
      handlers: { work: async (job) => void ran.push(job.payload) },
      leaseMs: 1_000,
    });
    await engine.start();
    try {
      expect(() =>
        store.db.transaction(() => {
          void engine.enqueue('work', 'rolled back', { tx: store.db });
          throw new Error('rollback');
        })(),
      ).toThrow('rollback');
      store.db.transaction(() => {
        void engine.enqueue('work', 'committed', { tx: store.db });
      })();
      for (let i = 0; i < 200 && ran.length === 0; i++) await sleep(10);
      await sleep(50);
      expect(ran).toEqual(['committed']);
    } finally {
      await engine.stop({ timeoutMs: 1_000 });
    }
  });

  test('tx may be another connection to the same file', async () => {
    const store = await openStore();
    const other = new Database(store.db.name);
    try {
      other.pragma('busy_timeout = 5000');
      other.transaction(() => {
        store.enqueueSync([newJob()], other);
      })();
      expect((await store.listJobs({ limit: 10, offset: 0 })).length).toBe(1);
      expect(() =>
        other.transaction(() => {
          store.enqueueSync([newJob()], other);
          throw new Error('no');
        })(),
      ).toThrow('no');
      expect((await store.listJobs({ limit: 10, offset: 0 })).length).toBe(1);
    } finally {
      other.close();
    }
  });

  test('a tx that is not inside a transaction is rejected, nothing written', async () => {
    const store = await openStore();
    await expect(store.enqueue([newJob()], { tx: store.db })).rejects.toThrow(ValidationError);
    await expect(store.enqueue([newJob()], { tx: { not: 'a db' } })).rejects.toThrow(
      /better-sqlite3 Database/,
    );
    // The store itself (what holds the connections, like a pool) says what to pass instead.
    await expect(store.enqueue([newJob()], { tx: store })).rejects.toThrow(
      /tx must be a better-sqlite3 Database \(e\.g\. store\.db\) inside db\.transaction/,
    );
    expect(countJobs(store.db.name)).toBe(0);
  });

  test('a user-provided db is used as is and not closed by close()', async () => {
    const first = await openStore();
    const db = new Database(first.db.name);
    const { SqliteJobStore } = await import('@jobs/sqlite');
    const store = new SqliteJobStore({ db });
    expect(store.db).toBe(db);
    await store.migrate();
    await store.enqueue([newJob()]);
    await store.close();
    expect(db.open).toBe(true);
    expect(db.prepare('SELECT COUNT(*) AS n FROM jobs_jobs').get()).toEqual({ n: 1 });
    db.close();
  });
});
