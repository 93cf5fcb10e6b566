/**
 * Schedules across processes on one PostgreSQL schema: two engine processes, a one-second
 * schedule whose handler takes 2.5 s, for each overlap policy. Needs @jobs/core built
 * (`npx tsup` in packages/core; CI builds first): the workers load the engine from its dist,
 * like the store does.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  maxConcurrent,
  type Overlap,
  type Run,
  runScheduleScenario,
} from '../../core/test/schedule-overlap-harness.js';
import { dropSchema, openStore, PG_URL, randomSchema, reachable } from './helpers.js';

const STORE_MODULE = fileURLToPath(new URL('../src/index.ts', import.meta.url));
const schemas: string[] = [];

afterAll(async () => {
  for (const schema of schemas) await dropSchema(schema);
});

async function scenario(overlap: Overlap) {
  const schema = randomSchema('sched');
  schemas.push(schema);
  const store = openStore(schema);
  try {
    await store.migrate();
    const runs = await runScheduleScenario({
      storeModule: STORE_MODULE,
      storeClass: 'PostgresJobStore',
      storeOptions: { connectionString: PG_URL, schema, max: 4 },
      overlap,
      runForMs: 6_000,
    });
    const record = await store.getSchedule(`tick-${overlap}`);
    if (process.env.JOBS_TEST_VERBOSE) {
      const t0 = runs[0]?.start ?? 0;
      console.log(
        `${overlap}: skipped=${record?.skipped} fired=${record?.fired}\n${runs
          .map(
            (r) => `  ${r.owner} ${r.occurrence.slice(11, 19)} ${r.start - t0}..${r.end - t0} ms`,
          )
          .join('\n')}`,
      );
    }
    return { runs, record };
  } finally {
    await store.close();
  }
}

function expectEachOccurrenceOnce(runs: readonly Run[]): void {
  const occurrences = runs.map((r) => r.occurrence);
  expect(new Set(occurrences).size, `occurrences ${occurrences.join(', ')}`).toBe(runs.length);
}

describe.skipIf(!reachable)(
  'a one-second schedule with a 2.5 s handler on two engine processes (PostgreSQL)',
  () => {
    it.concurrent('overlap skip: never two runs at once, no occurrence twice, busy fires dropped', async () => {
      const { runs, record } = await scenario('skip');
      expect(runs.length).toBeGreaterThanOrEqual(2);
      expectEachOccurrenceOnce(runs);
      expect(maxConcurrent(runs)).toBe(1);
      expect(record?.skipped).toBeGreaterThanOrEqual(2);
    });

    it.concurrent('overlap coalesce: never two runs at once, no occurrence twice, the coalesced run follows at once', async () => {
      const { runs } = await scenario('coalesce');
      expect(runs.length).toBeGreaterThanOrEqual(2);
      expectEachOccurrenceOnce(runs);
      expect(maxConcurrent(runs)).toBe(1);
      for (let i = 1; i < runs.length; i++) {
        const previous = runs[i - 1] as Run;
        const run = runs[i] as Run;
        // Fires during the previous run were coalesced into this one, which starts as soon as the
        // previous run ended: sooner than the schedule's next one-second tick (the engine fires
        // a pending misfire when an occurrence's job finishes, not on the next poll).
        expect(run.start - previous.end).toBeLessThan(1_000);
      }
    });

    it.concurrent('overlap allow: runs overlap, still no occurrence twice', async () => {
      const { runs } = await scenario('allow');
      expect(runs.length).toBeGreaterThanOrEqual(4);
      expectEachOccurrenceOnce(runs);
      expect(maxConcurrent(runs)).toBeGreaterThanOrEqual(2);
    });
  },
);
