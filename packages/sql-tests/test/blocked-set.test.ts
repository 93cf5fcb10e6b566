/**
 * Bounds of the blocked sets (`core/sql/operations/scopes.ts`), read around the store, on every
 * SQL database: the sweep (`rebalanceScopes()` without scopes, run after each expired-lease
 * recovery pass) takes a bounded number of scopes each time and goes on from where it stopped,
 * so with more scopes than one sweep takes, every scope still comes round within a few sweeps;
 * and a rebalance blocks a bounded number of jobs per call, so a settle never pays for a whole
 * burst. (Was `packages/sqlite/test/blocked-set.test.ts`, SQLite only.)
 */
import { makeNewJob } from '@jobs/conformance';
import { afterEach, describe, expect, it } from 'vitest';
import { DATABASES, type Place, type SqlStore } from './databases.js';

/** Moves every timer two hours back: what a burst of timers coming due at once looks like. */
const TWO_HOURS_BACK = {
  postgres: (jobs: string) =>
    `UPDATE ${jobs} SET due_at = due_at - interval '2 hours' WHERE state = 'timer'`,
  mysql: (jobs: string) =>
    `UPDATE ${jobs} SET due_at = due_at - INTERVAL 2 HOUR WHERE state = 'timer'`,
  sqlite: (jobs: string) => `UPDATE ${jobs} SET due_at = due_at - 7200000 WHERE state = 'timer'`,
};

const request = { owner: 'o', leaseMs: 30_000, types: ['work'], queues: null, tenants: null };
const limited = (over = {}) => makeNewJob({ type: 'work', exclusive: true, ...over });

describe.each(DATABASES)('$name: blocked-set bounds', (db) => {
  let place: Place | undefined;
  let store: SqlStore | undefined;

  async function open(): Promise<{ place: Place; store: SqlStore }> {
    place = await db.create();
    store = place.open();
    await store.migrate();
    return { place, store };
  }
  afterEach(async () => {
    await store?.close();
    await place?.drop();
    store = undefined;
    place = undefined;
  });

  it.skipIf(db.missing)(
    'a sweep takes a bounded share of the scopes and comes round to all of them in turn',
    async () => {
      const { place, store } = await open();
      // More than two sweeps' worth (a sweep takes 200 scopes: `SWEEP_SCOPES`).
      const scopes = 500;
      await store.enqueue(
        Array.from({ length: scopes }, (_, i) =>
          limited({ scope: `s${String(i).padStart(5, '0')}` }),
        ),
      );
      // What a lost race leaves behind: each scope's only job blocked while its slot is free.
      await place.sql(`UPDATE ${place.jobs} SET state = 'blocked'`);
      expect(await store.acquire({ ...request, limit: 10 })).toEqual([]);

      const letIn: number[] = [];
      for (let sweep = 0; sweep < 20 && letIn.reduce((a, b) => a + b, 0) < scopes; sweep++) {
        letIn.push(await store.rebalanceScopes());
      }
      // Bounded: no sweep takes every scope at once; in turn: all are back within a few sweeps.
      expect(Math.max(...letIn)).toBeLessThan(scopes);
      expect(letIn.reduce((a, b) => a + b, 0)).toBe(scopes);
      expect(letIn.length).toBeLessThanOrEqual(5);
      const blocked = (await store.stats()).filter((row) => row.state === 'blocked');
      expect(blocked).toEqual([]);
      const acquired = await store.acquire({ ...request, limit: 1_000 });
      expect(acquired.length).toBe(scopes);
    },
  );

  it.skipIf(db.missing)(
    'a rebalance blocks a bounded number of jobs per call, and a burst over the next calls',
    async () => {
      const { place, store } = await open();
      await store.enqueue([limited({ scope: 's' })]);
      expect((await store.acquire({ ...request, limit: 10 })).length).toBe(1);
      // A burst that came in without a rebalance: timers of the full scope, all come due at once.
      const burst = 5_000;
      await store.enqueue(
        Array.from({ length: burst }, () => limited({ scope: 's', delayMs: 3_600_000 })),
      );
      await place.sql(TWO_HOURS_BACK[db.name](place.jobs));
      const blocked = async (): Promise<number> =>
        Number(
          (await place.sql(`SELECT COUNT(*) AS n FROM ${place.jobs} WHERE state = 'blocked'`))[0]
            ?.n,
        );
      const counts: number[] = [];
      for (let call = 0; call < 10; call++) {
        await store.rebalanceScopes(['s']);
        counts.push(await blocked());
        if (counts.length > 1 && counts.at(-1) === counts.at(-2)) break;
      }
      // Bounded: the first call blocked part of the burst; all but a short queue in the end.
      expect(counts[0]).toBeGreaterThan(0);
      expect(counts[0]).toBeLessThan(burst / 2);
      expect(counts.at(-1)).toBeGreaterThan(burst - 200);
      expect(counts.at(-1)).toBeLessThan(burst);
    },
  );
});
