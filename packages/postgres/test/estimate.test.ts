/**
 * `estimateJobs` reads the planner's row estimate of this store's jobs table (its schema, not a
 * namesake elsewhere), null until the table was analysed; `queueStats({ newest })` groups only
 * the newest jobs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import { dropSchema, newJob, openStore, randomSchema, reachable, sql } from './helpers.js';

describe.skipIf(!reachable)('estimateJobs and bounded queueStats on PostgreSQL', () => {
  const analysed = randomSchema('est');
  const fresh = randomSchema('est');
  let big: PostgresJobStore;
  let small: PostgresJobStore;

  beforeAll(async () => {
    big = openStore(analysed);
    small = openStore(fresh);
    await big.migrate();
    await small.migrate();
    for (const schema of [analysed, fresh]) {
      // No autovacuum: "never analysed" must stay so while the test reads it.
      await sql(`ALTER TABLE "${schema}".jobs SET (autovacuum_enabled = false)`);
    }
    for (let i = 0; i < 6; i++) {
      await big.enqueue(
        Array.from({ length: 500 }, (_, k) =>
          newJob(i * 500 + k < 2_000 ? 'older' : 'newer', { queue: 'q' }),
        ),
      );
    }
    await small.enqueue(Array.from({ length: 40 }, () => newJob('t')));
  });

  afterAll(async () => {
    await big?.close();
    await small?.close();
    await dropSchema(analysed);
    await dropSchema(fresh);
  });

  it('is null before the table was ever analysed', async () => {
    expect(await big.estimateJobs()).toBeNull();
    expect(await small.estimateJobs()).toBeNull();
  });

  it("reads the analysed table's estimate, of its own schema only", async () => {
    await sql(`ANALYZE "${analysed}".jobs`);
    const estimate = await big.estimateJobs();
    expect(estimate).not.toBeNull();
    expect(estimate).toBeGreaterThan(2_700);
    expect(estimate).toBeLessThan(3_300);
    // The other schema's namesake table stays unanalysed.
    expect(await small.estimateJobs()).toBeNull();
    // Rows added since ANALYZE count in as the table's pages grow (the planner's own scaling).
    await big.enqueue(Array.from({ length: 900 }, () => newJob('newer', { queue: 'q' })));
    expect(await big.estimateJobs()).toBeGreaterThan(3_300);
  });

  it('queueStats({ newest }) groups only the newest jobs', async () => {
    const total = (rows: { count: number }[]): number => rows.reduce((n, r) => n + r.count, 0);
    const all = await big.queueStats();
    expect(total(all)).toBe(await big.countJobs({}));
    expect(total(all)).toBeGreaterThan(1_000);
    const newest = await big.queueStats({ newest: 1_000 });
    expect(total(newest)).toBe(1_000);
    expect(newest.map((r) => r.type)).toEqual(['newer']);
    expect(newest[0]?.due).toBe(1_000);
  });
});
