/**
 * `estimateJobs` reads InnoDB's row estimate of this store's jobs table (its database, not a
 * namesake elsewhere): null while it has none, near the real count once analysed.
 * `queueStats({ newest })` groups only the newest jobs.
 */
import { makeNewJob } from '@jobs/conformance';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import { createDatabase, dropDatabase, openStore, reachable, sql } from './helpers.js';

describe.skipIf(!reachable)('estimateJobs on MySQL/MariaDB', () => {
  let filled: string;
  let empty: string;
  let big: MysqlJobStore;
  let none: MysqlJobStore;

  beforeAll(async () => {
    filled = await createDatabase();
    empty = await createDatabase();
    big = openStore(filled);
    none = openStore(empty);
    await big.migrate();
    await none.migrate();
    for (let i = 0; i < 6; i++) {
      await big.enqueue(Array.from({ length: 500 }, () => makeNewJob({ type: 'e' })));
    }
  });

  afterAll(async () => {
    await big?.close();
    await none?.close();
    await dropDatabase(filled);
    await dropDatabase(empty);
  });

  it('is null for a table with no statistics yet', async () => {
    expect(await none.estimateJobs()).toBeNull();
  });

  it("reads the analysed table's estimate, of its own database only", async () => {
    await sql(`ANALYZE TABLE \`${filled}\`.jobs_jobs`);
    const estimate = await big.estimateJobs();
    expect(estimate).not.toBeNull();
    // InnoDB samples pages: near 3,000, not exact.
    expect(estimate).toBeGreaterThan(1_500);
    expect(estimate).toBeLessThan(6_000);
    expect(await none.estimateJobs()).toBeNull();
  });

  it('queueStats({ newest }) groups only the newest jobs', async () => {
    await big.enqueue(Array.from({ length: 200 }, () => makeNewJob({ type: 'late' })));
    const total = (rows: { count: number }[]): number => rows.reduce((n, r) => n + r.count, 0);
    expect(total(await big.queueStats())).toBe(3_200);
    const newest = await big.queueStats({ newest: 150 });
    expect(newest.map((r) => [r.type, r.count])).toEqual([['late', 150]]);
  });
});
