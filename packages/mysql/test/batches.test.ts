/**
 * The default batch size on MySQL/MariaDB: the store asks engines for batches of up to 2,000
 * (`capabilities.batchLimit`; InnoDB's cost per acquisition falls per job as batches grow), and
 * such batches still run every job once and give back what was prefetched on `stop()`.
 */
import { JobEngine, silentLogger } from '@jobs/core';
import { describe, expect, it } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import { randomName, reachable, sql, TestDatabase } from './helpers.js';

const db = new TestDatabase();

async function backlogStore(total: number): Promise<MysqlJobStore> {
  const store = db.store({ tablePrefix: `${randomName('b')}_` });
  await store.migrate();
  const client = new JobEngine({ store });
  for (let i = 0; i < total; i += 1_000) {
    const size = Math.min(1_000, total - i);
    await client.enqueueMany(
      Array.from({ length: size }, (_, k) => ({ type: 'noop', payload: { n: i + k } })),
    );
  }
  return store;
}

describe.skipIf(!reachable)('@jobs/mysql default batches', () => {
  db.register();

  it('asks engines for batches of up to 2,000', () => {
    expect(db.store().capabilities.batchLimit).toBe(2_000);
  });

  it('an engine with default options grows past 1,000 a batch and runs every job once', async () => {
    const total = 9_000;
    const store = await backlogStore(total);
    const batches: number[] = [];
    const runs = new Map<number, number>();
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      handlers: {
        noop: async (job) => {
          const n = (job.payload as { n: number }).n;
          runs.set(n, (runs.get(n) ?? 0) + 1);
        },
      },
    });
    engine.on('acquired', ({ jobs }) => batches.push(jobs.length));
    await engine.start();
    const deadline = Date.now() + 60_000;
    while (runs.size < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await engine.stop();
    expect(runs.size).toBe(total);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
    expect(Math.max(...batches)).toBeGreaterThan(1_000);
    expect(Math.max(...batches)).toBeLessThanOrEqual(2_000);
    const [left] = await sql(`SELECT COUNT(*) AS n FROM ${store.tables.jobs}`);
    expect(Number(left?.n)).toBe(0);
  });

  it('stop() gives back a big prefetch at once, its attempts not counted', async () => {
    const total = 9_000;
    const store = await backlogStore(total);
    let hold = false;
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let ran = 0;
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      handlers: {
        noop: async () => {
          if (hold) await gate;
          ran += 1;
        },
      },
    });
    // Once a batch of more than 1,000 came back, the running handlers stop finishing: the
    // engine sits on that batch.
    engine.on('acquired', ({ jobs }) => {
      if (jobs.length > 1_000) hold = true;
    });
    await engine.start();
    const deadline = Date.now() + 60_000;
    while (engine.snapshot().prefetched <= 1_000 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const prefetched = engine.snapshot().prefetched;
    expect(prefetched).toBeGreaterThan(1_000);
    const stopping = engine.stop({ timeoutMs: 10_000 });
    open();
    await stopping;
    const rows = await sql(
      `SELECT state, attempts, lock_owner FROM ${store.tables.jobs} ORDER BY id`,
    );
    // What ran is gone; everything else waits again, unleased, as if never acquired.
    expect(rows.length).toBe(total - ran);
    expect(rows.length).toBeGreaterThanOrEqual(prefetched);
    expect(rows.every((row) => row.state === 'async' && row.lock_owner === null)).toBe(true);
    expect(rows.every((row) => Number(row.attempts) === 0)).toBe(true);
  });
});
