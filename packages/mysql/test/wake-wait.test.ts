/**
 * Wake-ups without polling (`WakeWaiter`): an idle store waits on the server and sends one
 * statement per `notifyWaitMs` (the read of whether a job is due is the wait's argument); an
 * enqueue ends the waits of a bounded number of waiters (`KILL QUERY`), however many wait; a
 * job committed in a caller's transaction — after a younger job was seen, so the end of the
 * primary key says nothing — is found by the read before the next wait; a due job nobody
 * takes wakes the subscribers once per wait, not in a loop.
 */
import { makeNewJob } from '@jobs/conformance';
import { type Job, type JobContext, JobEngine } from '@jobs/core';
import { waiterPrefix } from '@jobs/core/sql';
import mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import { HELPER_CONNECT_TIMEOUT_MS, MYSQL_URL, reachable, TestDatabase } from './helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Subscribes to `store` and counts its wake-ups. */
function wakes(store: MysqlJobStore) {
  const counter = { count: 0, off: () => {} };
  counter.off = store.subscribe(() => {
    counter.count++;
  });
  return counter;
}

/** Waits (bounded) until `done()`; says whether it came. */
async function until(done: () => boolean, attempts = 250): Promise<boolean> {
  for (let i = 0; i < attempts && !done(); i++) await sleep(20);
  return done();
}

/**
 * One connection that watches the server's process list for the whole file: a fresh connection
 * per look (every 20 ms, hundreds a test) once timed out connecting on a loaded CI machine.
 */
let watcher: mysql.Connection | undefined;

/** Waiters on `store`'s tables sleeping on the server now. */
async function sleepers(store: MysqlJobStore, db: string): Promise<number> {
  watcher ??= await mysql.createConnection({
    uri: MYSQL_URL,
    connectTimeout: HELPER_CONNECT_TIMEOUT_MS,
  });
  const prefix = waiterPrefix(store.tables.jobs);
  const [rows] = await watcher.query(
    `SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND DB = ?`,
    [`SELECT SLEEP(% AS \`${prefix}%`, db],
  );
  return Number((rows as { n: number }[])[0]?.n ?? 0);
}

describe.skipIf(!reachable)('MySQL wake-ups by waiting on the server', () => {
  const db = new TestDatabase();
  db.register();
  afterAll(async () => {
    await watcher?.end();
    watcher = undefined;
  });

  it('an idle store sends one statement per wait, not a read every 20 ms', async () => {
    const store = db.store({ notifyWaitMs: 1_000 });
    await store.migrate();
    const idle = wakes(store);
    try {
      await until(() => store.wakeSignalReads > 0);
      const before = store.wakeSignalReads;
      await sleep(2_500);
      const sent = store.wakeSignalReads - before;
      // Two or three waits of a second each, one statement apiece (four at most: one under way
      // when counting began); polling every 20 ms would have sent about 125 reads.
      expect(sent).toBeGreaterThan(0);
      expect(sent).toBeLessThanOrEqual(4);
      expect(idle.count).toBe(0);
    } finally {
      idle.off();
    }
  });

  it('an enqueue ends a bounded number of waits, however many stores wait', async () => {
    // Waits of a minute: within this test only an enqueue's KILL QUERY ends them.
    const tables = { tablePrefix: 'ring_' };
    const waiters = Array.from({ length: 6 }, () => db.store({ ...tables, notifyWaitMs: 60_000 }));
    const writer = db.store(tables);
    await writer.migrate();
    const counters = waiters.map(wakes);
    try {
      for (let i = 0; i < 250 && (await sleepers(writer, db.name)) < waiters.length; i++) {
        await sleep(20);
      }
      expect(await sleepers(writer, db.name)).toBe(waiters.length);
      await writer.enqueue([makeNewJob({ type: 'work' })]);
      // Two of the six wake (MIN_RUNG), each at its own KILL QUERY (the second may come late on
      // a loaded machine); after a while more, the other four still wait.
      expect(await until(() => counters.filter((c) => c.count > 0).length >= 2)).toBe(true);
      await sleep(300);
      expect(counters.filter((c) => c.count > 0)).toHaveLength(2);
      expect(await sleepers(writer, db.name)).toBe(waiters.length);
    } finally {
      for (const c of counters) c.off();
    }
  });

  it('a job committed after a younger one, in a caller transaction, still wakes a waiter', async () => {
    const tables = { tablePrefix: 'late_' };
    const store = db.store({ ...tables, notifyWaitMs: 400 });
    const writer = db.store(tables);
    await writer.migrate();
    // Nothing due left from earlier tests.
    await writer.bulk.deleteMany({ state: ['timer', 'async'] }, 10_000);
    const counter = wakes(store);
    const pool = mysql.createPool({ uri: MYSQL_URL, database: db.name, connectionLimit: 1 });
    const connection = await pool.getConnection();
    try {
      await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
      await connection.beginTransaction();
      const [older] = await writer.enqueue([makeNewJob({ type: 'late' })], { tx: connection });
      // A younger job commits first; its store wakes waiters, and the job is taken.
      const [younger] = await writer.enqueue([makeNewJob({ type: 'early' })]);
      expect(Number(younger?.job.id)).toBeGreaterThan(Number(older?.job.id));
      expect(await until(() => counter.count > 0)).toBe(true);
      const taken = await writer.acquire({
        owner: 'test',
        limit: 10,
        leaseMs: 30_000,
        types: ['early'],
        queues: null,
        tenants: null,
      });
      expect(taken.map((j) => j.id)).toEqual([younger?.job.id]);
      await writer.complete(taken.map((j) => ({ id: j.id, token: j.lockToken as string })));
      // Nothing is due now: the waits end without waking anyone.
      await sleep(1_000);
      const seen = counter.count;
      await sleep(1_000);
      expect(counter.count).toBe(seen);
      // The older job commits now (the end of the primary key does not move): the next read
      // after a wait finds it due.
      await connection.commit();
      expect(await until(() => counter.count > seen)).toBe(true);
    } finally {
      connection.release();
      await pool.end();
      counter.off();
    }
  });

  it('a due job nobody takes wakes the subscribers once per wait, not in a loop', async () => {
    const tables = { tablePrefix: 'stuck_' };
    const store = db.store({ ...tables, notifyWaitMs: 500 });
    await store.migrate();
    await store.enqueue([makeNewJob({ type: 'nobody-runs-this' })]);
    const counter = wakes(store);
    try {
      expect(await until(() => counter.count > 0)).toBe(true);
      const before = { wakes: counter.count, sent: store.wakeSignalReads };
      const started = Date.now();
      // It wakes again (a plain wait of half a second, then a read that finds the job due)...
      expect(await until(() => counter.count > before.wakes, 500)).toBe(true);
      await sleep(Math.max(0, 2_000 - (Date.now() - started)));
      // ...but once per wait at most (counting the pair under way); a loop would send hundreds.
      const waits = Math.ceil((Date.now() - started) / 500) + 1;
      expect(counter.count - before.wakes).toBeLessThanOrEqual(waits);
      expect(store.wakeSignalReads - before.sent).toBeLessThanOrEqual(2 * waits);
    } finally {
      counter.off();
    }
  });

  it('a signal from another store wakes the idle engine whose job waits for it at once, as an enqueue does', async () => {
    const tables = { tablePrefix: 'signal_' };
    // Waits of a minute and the engine's 30 s poll: only a wake-up resumes the job in time.
    const store = db.store({ ...tables, notifyWaitMs: 60_000 });
    await store.migrate();
    const sender = db.store(tables);
    const resumed: unknown[] = [];
    const engine = new JobEngine({
      store,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      handlers: {
        approve: async (_job: Job, ctx: JobContext) => {
          resumed.push(await ctx.waitFor('approved', { key: 'order-1', timeoutMs: 600_000 }));
        },
      },
    });
    await engine.start();
    try {
      const job = await engine.enqueue('approve', {});
      let parked = false;
      for (let i = 0; i < 500 && !parked; i++) {
        await sleep(20);
        parked = (await store.getJob(job.id))?.state === 'timer';
      }
      expect(parked).toBe(true);
      await sleep(500); // the idle engine's store waits on the server again
      await sender.waits.signal('approved', 'order-1', '"yes"');
      expect(await until(() => resumed.length > 0, 500)).toBe(true);
      expect(resumed).toEqual(['yes']);
    } finally {
      await engine.stop();
    }
  });

  it('closing a store cuts its wait short', async () => {
    const store = db.store({ tablePrefix: 'close_', notifyWaitMs: 60_000 });
    await store.migrate();
    const counter = wakes(store);
    for (let i = 0; i < 250 && (await sleepers(store, db.name)) === 0; i++) await sleep(20);
    expect(await sleepers(store, db.name)).toBeGreaterThan(0);
    const others = await sleepers(store, db.name);
    await store.close();
    counter.off();
    // Its SLEEP is gone from the server.
    let left = others;
    for (let i = 0; i < 500 && left >= others; i++) {
      await sleep(20);
      left = await sleepers(store, db.name);
    }
    expect(left).toBe(others - 1);
  });
});
