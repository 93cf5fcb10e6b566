/**
 * `estimateJobs` reads the database's own row estimate of this store's jobs table (its schema
 * or database, not a namesake elsewhere): null while there is none, near the real count once
 * the table was analysed. `queueStats({ newest })` groups only the newest jobs. SQLite keeps no
 * estimate (its `estimateJobs` answers null, see the conformance suite). (Was
 * `packages/{postgres,mysql}/test/estimate.test.ts`.)
 */
import { makeNewJob } from '@jobs/conformance';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databases, type Place, type SqlStore } from './databases.js';

/** What differs: how a table is analysed, how near the estimate is, how autovacuum is held off. */
const HOW = {
  postgres: {
    analyse: (jobs: string) => `ANALYZE ${jobs}`,
    // The planner's estimate is near exact; InnoDB samples pages.
    near: [2_700, 3_300],
    // No autovacuum: "never analysed" must stay so while the test reads it.
    hold: (jobs: string) => `ALTER TABLE ${jobs} SET (autovacuum_enabled = false)`,
  },
  mysql: {
    analyse: (jobs: string) => `ANALYZE TABLE ${jobs}`,
    near: [1_500, 6_000],
    hold: null,
  },
} as const;

describe.each(databases('postgres', 'mysql'))(
  '$name: estimateJobs and bounded queueStats',
  (db) => {
    const how = HOW[db.name as keyof typeof HOW];
    let filled: Place;
    let empty: Place;
    let big: SqlStore;
    let none: SqlStore;

    beforeAll(async () => {
      if (db.missing) return;
      filled = await db.create();
      empty = await db.create();
      big = filled.open();
      none = empty.open();
      await big.migrate();
      await none.migrate();
      if (how.hold) {
        await filled.sql(how.hold(filled.jobs));
        await empty.sql(how.hold(empty.jobs));
      }
      for (let i = 0; i < 6; i++) {
        await big.enqueue(
          Array.from({ length: 500 }, (_, k) =>
            makeNewJob({ type: i * 500 + k < 2_000 ? 'older' : 'newer', queue: 'q' }),
          ),
        );
      }
      // On PostgreSQL a namesake table with rows (never analysed); InnoDB would gather statistics
      // of its own for one that changed by over 10%, so there it stays empty.
      if (how.hold) await none.enqueue(Array.from({ length: 40 }, () => makeNewJob({ type: 't' })));
    });

    afterAll(async () => {
      await big?.close();
      await none?.close();
      await filled?.drop();
      await empty?.drop();
    });

    it.skipIf(db.missing)('is null before the table was ever analysed', async () => {
      expect(await none.views.estimateJobs()).toBeNull();
      if (db.name === 'postgres') expect(await big.views.estimateJobs()).toBeNull();
    });

    it.skipIf(db.missing)(
      "reads the analysed table's estimate, of its own place only",
      async () => {
        await filled.sql(how.analyse(filled.jobs));
        const estimate = await big.views.estimateJobs();
        expect(estimate).not.toBeNull();
        expect(estimate).toBeGreaterThan(how.near[0]);
        expect(estimate).toBeLessThan(how.near[1]);
        // The other place's namesake table stays unanalysed.
        expect(await none.views.estimateJobs()).toBeNull();
      },
    );

    // PostgreSQL only: its planner scales the analysed estimate by the table's pages now; InnoDB
    // keeps its sampled count until its next statistics run.
    it.runIf(db.name === 'postgres' && !db.missing)(
      "rows added since the analysis count in as the table's pages grow (the planner's scaling)",
      async () => {
        await big.enqueue(
          Array.from({ length: 900 }, () => makeNewJob({ type: 'newer', queue: 'q' })),
        );
        expect(await big.views.estimateJobs()).toBeGreaterThan(3_300);
      },
    );

    it.skipIf(db.missing)('queueStats({ newest }) groups only the newest jobs', async () => {
      await big.enqueue(
        Array.from({ length: 200 }, () => makeNewJob({ type: 'late', queue: 'q' })),
      );
      const total = (rows: { count: number }[]): number => rows.reduce((n, r) => n + r.count, 0);
      const all = await big.views.queueStats();
      expect(total(all)).toBe(await big.bulk.countJobs({}));
      expect(total(all)).toBeGreaterThan(3_000);
      const newest = await big.views.queueStats({ newest: 150 });
      expect(newest.map((r) => [r.type, r.count, r.due])).toEqual([['late', 150, 150]]);
    });
  },
);
