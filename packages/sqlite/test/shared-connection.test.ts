/**
 * A store on the app's own connection (`{ db }`) never runs its own work inside a transaction
 * the app holds open across awaits: an acquisition joining it would be undone by the app's
 * rollback while the engine runs the job, and another engine would then acquire it too.
 */
import { type Job, JobEngine, silentLogger } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { freshFile, newJob, openStore, sleep } from './helpers.js';

const JOBS = 40;

describe('a store on a connection the app also uses', () => {
  test('an app transaction rolled back while the store acquires: no job is held by two engines, each runs once', async () => {
    const file = freshFile();
    const seed = await openStore({ filename: file });
    seed.db.exec('CREATE TABLE app_log (n INTEGER)');
    await seed.enqueue(Array.from({ length: JOBS }, (_, i) => newJob({ payload: { i } })));

    const appDb = new Database(file);
    appDb.pragma('busy_timeout = 5000');
    const shared = new SqliteJobStore({ db: appDb });
    // One process holds both connections: a long busy wait of one (synchronous) would stop the
    // app from ever ending its transaction, so the second store gives up on the lock quickly.
    const own = await openStore({ filename: file, busyTimeoutMs: 20 });
    const running = new Set<string>();
    const runs = new Map<string, number>();
    const overlaps: string[] = [];
    const handler = async (job: Job): Promise<void> => {
      if (running.has(job.id)) overlaps.push(job.id);
      running.add(job.id);
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      await sleep(15);
      running.delete(job.id);
    };
    const engines = [shared, own].map(
      (store) =>
        new JobEngine({
          store,
          handlers: { work: handler },
          concurrency: 3,
          leaseMs: 30_000,
          logger: silentLogger,
        }),
    );
    // The app: a transaction open across awaits (a write in it), then rolled back, again and
    // again, while both engines acquire.
    let appRunning = true;
    const app = (async () => {
      for (let n = 0; appRunning; n++) {
        appDb.exec('BEGIN');
        appDb.prepare('INSERT INTO app_log (n) VALUES (?)').run(n);
        await sleep(8);
        appDb.exec('ROLLBACK');
        await sleep(8);
      }
    })();
    try {
      await Promise.all(engines.map((engine) => engine.start()));
      while (runs.size < JOBS) await sleep(20);
      // Time for a job acquired twice to start again on the other engine.
      await sleep(200);
    } finally {
      appRunning = false;
      await app;
      await Promise.all(engines.map((engine) => engine.stop({ timeoutMs: 2_000 })));
      await shared.close();
      appDb.close();
      await seed.close();
    }
    expect(overlaps).toEqual([]);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
    expect(runs.size).toBe(JOBS);
    expect(await own.listJobs({ limit: 100, offset: 0 })).toEqual([]);
  });

  test('enqueue with { tx: db } still joins the app transaction on the shared connection', async () => {
    const file = freshFile();
    await openStore({ filename: file });
    const appDb = new Database(file);
    const shared = new SqliteJobStore({ db: appDb });
    try {
      appDb.exec('BEGIN');
      const [rolled] = await shared.enqueue([newJob({ key: 'r' })], { tx: appDb });
      appDb.exec('ROLLBACK');
      expect(await shared.getJob(rolled?.job.id as string)).toBeNull();
      appDb.exec('BEGIN');
      const [kept] = await shared.enqueue([newJob({ key: 'k' })], { tx: appDb });
      appDb.exec('COMMIT');
      expect((await shared.getJob(kept?.job.id as string))?.key).toBe('k');
    } finally {
      await shared.close();
      appDb.close();
    }
  });

  test('store work waits for the app transaction to end, and fails with a clear error when it never does', async () => {
    const file = freshFile();
    await openStore({ filename: file });
    const appDb = new Database(file);
    const shared = new SqliteJobStore({ db: appDb, busyTimeoutMs: 300 });
    try {
      appDb.exec('BEGIN');
      appDb.exec('CREATE TABLE app_rolled_back (n INTEGER)');
      const waiting = shared.enqueue([newJob()]);
      await sleep(50);
      appDb.exec('ROLLBACK');
      // Enqueued after the rollback, in a transaction of its own: it stays.
      const [job] = await waiting;
      expect((await shared.getJob(job?.job.id as string))?.state).toBe('async');

      appDb.exec('BEGIN');
      await expect(shared.enqueue([newJob()])).rejects.toThrow(
        /\[@jobs\/sqlite\] enqueue: the connection stayed inside a transaction the store did not open/,
      );
      appDb.exec('ROLLBACK');
    } finally {
      await shared.close();
      appDb.close();
    }
  });
});
