/**
 * History cost: no-op jobs drained by one engine (concurrency 50, default adaptive prefetch)
 * with `history: { keep: 'all' }` against `keep: 'none'`, on SQLite and PostgreSQL, alternating
 * the two settings so drift on a shared machine hits both. Target: `all` costs at most 25 % of
 * the throughput of `none`. Prints jobs/s per run and the ratio of the medians.
 *
 * Run alone: `npx tsx bench/src/history.ts [--quick]` (PostgreSQL at `JOBS_PG_URL`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type HistoryKeep, JobEngine, type JobStore, silentLogger } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';

const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const quick = process.argv.includes('--quick');
const JOBS = quick ? 5_000 : 20_000;
const ROUNDS = quick ? 2 : 3;

interface Target {
  name: string;
  open(): Promise<{ store: JobStore; cleanup(): Promise<void> }>;
}

const targets: Target[] = [
  {
    name: 'sqlite',
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'jobs-history-bench-'));
      const store = new SqliteJobStore({ filename: join(dir, 'jobs.db') });
      await store.migrate();
      return { store, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'postgres',
    async open() {
      const schema = `bench_history_${process.pid}_${Date.now()}`;
      const store = new PostgresJobStore({ connectionString: PG_URL, schema, max: 4 });
      await store.migrate();
      return {
        store,
        cleanup: async () => {
          const drop = new PostgresJobStore({ connectionString: PG_URL, schema: 'public' });
          await drop.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          await drop.close();
        },
      };
    },
  },
];

/** Jobs per second for one drain of `JOBS` no-op jobs with history set to `keep`. */
async function drain(target: Target, keep: HistoryKeep): Promise<number> {
  const { store, cleanup } = await target.open();
  try {
    const client = new JobEngine({ store, logger: silentLogger });
    for (let i = 0; i < JOBS; i += 1000) {
      await client.enqueueMany(
        Array.from({ length: Math.min(1000, JOBS - i) }, (_, k) => ({
          type: 'noop',
          payload: { i: i + k },
        })),
      );
    }
    let done = 0;
    let finished: () => void = () => {};
    const all = new Promise<void>((resolve) => {
      finished = resolve;
    });
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      concurrency: 50,
      history: { keep },
      handlers: { noop: async (job) => ({ echoed: job.id }) },
    });
    engine.on('completed', () => {
      done += 1;
      if (done === JOBS) finished();
    });
    const started = performance.now();
    await engine.start();
    await all;
    const ms = performance.now() - started;
    await engine.stop();
    // The setting took effect: records exactly when history keeps them.
    const kept = (await store.listHistory?.({ limit: 1 })) ?? [];
    if (kept.length > 0 !== (keep === 'all')) {
      throw new Error(`history keep ${keep}: found ${kept.length} record(s)`);
    }
    return (JOBS / ms) * 1000;
  } finally {
    await store.close();
    await cleanup();
  }
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

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
