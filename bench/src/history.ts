/**
 * History cost: no-op jobs drained by one engine (concurrency 50, default adaptive prefetch)
 * with `history: { keep: 'all' }` against `keep: 'none'`, on SQLite and PostgreSQL, alternating
 * the two settings so drift on a shared machine hits both. Target: `all` costs at most 25 % of
 * the throughput of `none`. Prints jobs/s per run and the ratio of the medians.
 *
 * Run alone: `npx tsx bench/src/history.ts [--quick]` (PostgreSQL at `JOBS_PG_URL`).
 */
import type { HistoryKeep } from '@jobs/core';
import { type DrainTarget, drainRate, drainTargets, median } from './drain-targets.js';

const quick = process.argv.includes('--quick');
const JOBS = quick ? 5_000 : 20_000;
const ROUNDS = quick ? 2 : 3;

const targets = drainTargets('history');

/** Jobs per second for one drain of `JOBS` no-op jobs with history set to `keep`. */
function drain(target: DrainTarget, keep: HistoryKeep): Promise<number> {
  return drainRate(target, JOBS, {
    engine: { history: { keep }, handlers: { noop: async (job) => ({ echoed: job.id }) } },
    // The setting took effect: records exactly when history keeps them.
    async check(store) {
      const kept = (await store.history?.list({ limit: 1 })) ?? [];
      if (kept.length > 0 !== (keep === 'all')) {
        throw new Error(`history keep ${keep}: found ${kept.length} record(s)`);
      }
    },
  });
}

async function main(): Promise<void> {
  for (const target of targets) {
    const rates: Record<'all' | 'none', number[]> = { all: [], none: [] };
    try {
      for (let round = 0; round < ROUNDS; round++) {
        for (const keep of round % 2 === 0
          ? (['none', 'all'] as const)
          : (['all', 'none'] as const)) {
          rates[keep].push(await drain(target, keep));
        }
      }
    } catch (error) {
      console.log(`${target.name}: skipped (${(error as Error).message})`);
      continue;
    }
    const all = median(rates.all);
    const none = median(rates.none);
    const fmt = (xs: number[]): string => xs.map((x) => Math.round(x)).join(', ');
    console.log(
      `${target.name}: ${JOBS} no-op jobs, jobs/s — none: ${fmt(rates.none)}; all: ${fmt(rates.all)}; ` +
        `all ÷ none = ${(all / none).toFixed(2)} (cost ${Math.round((1 - all / none) * 100)} %)`,
    );
  }
}

await main();
