/**
 * Due-time lateness: how long after its due time a delayed job starts on an idle engine.
 *
 * One engine (ours, default configuration, concurrency 10) idles on a fresh table until its
 * idle back-off is at its longest; then another connection enqueues 200 jobs (`--quick`: 100),
 * one every 0–60 ms, each due 50–1,000 ms later (a fixed pseudo-random sequence, the same on
 * every store and run). Lateness = `Date.now()` at handler start − the job's `dueAt` (the
 * store's clock; every database here runs on this machine, so on the same clock). Each suite
 * adds the p50/p99 line for its store; `pnpm bench due [sqlite|postgres|mysql ...]` runs only
 * this, for every store whose database answers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobEngine, type JobStore, silentLogger } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import mysql from 'mysql2/promise';
import {
  type BenchMeasure,
  dropPostgresSchemas,
  latencyMeasures,
  percentile,
  printReport,
  sleep,
} from './harness.js';

const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const PG_SCHEMA = 'bench_due_time';
const MYSQL_DATABASE = 'jobs_bench_due_time';
const TYPE = 'due';

export type DueStore = 'sqlite' | 'postgres' | 'mysql';
const STORES: DueStore[] = ['sqlite', 'postgres', 'mysql'];

/** The table line each suite adds, for its default contender's column. */
export function dueTimeMeasures(contender: string, samples: readonly number[]): BenchMeasure[] {
  return latencyMeasures(
    contender,
    samples,
    (p) => `due-time lateness p${p}, idle engine (ms)`,
    [50, 99],
  );
}

/** A deterministic sequence in [0, 1): the same delays and gaps on every store and run. */
function sequence(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

async function openStores(
  store: DueStore,
): Promise<{ worker: JobStore; producer: JobStore; cleanup(): Promise<void> }> {
  if (store === 'sqlite') {
    const folder = mkdtempSync(join(tmpdir(), 'jobs-bench-due-'));
    const filename = join(folder, 'due.db');
    const producer = new SqliteJobStore({ filename });
    await producer.migrate();
    return {
      producer,
      worker: new SqliteJobStore({ filename }),
      cleanup: async () => rmSync(folder, { recursive: true, force: true }),
    };
  }
  if (store === 'postgres') {
    await dropPostgresSchemas(PG_URL, [PG_SCHEMA]);
    const producer = new PostgresJobStore({ connectionString: PG_URL, schema: PG_SCHEMA, max: 2 });
    await producer.migrate();
    return {
      producer,
      worker: new PostgresJobStore({ connectionString: PG_URL, schema: PG_SCHEMA }),
      cleanup: () => dropPostgresSchemas(PG_URL, [PG_SCHEMA]),
    };
  }
  const admin = await mysql.createConnection({ uri: MYSQL_URL });
  try {
    await admin.query(`DROP DATABASE IF EXISTS \`${MYSQL_DATABASE}\``);
    await admin.query(`CREATE DATABASE \`${MYSQL_DATABASE}\``);
  } finally {
    await admin.end();
  }
  const producer = new MysqlJobStore({ uri: MYSQL_URL, database: MYSQL_DATABASE });
  await producer.migrate();
  return {
    producer,
    worker: new MysqlJobStore({ uri: MYSQL_URL, database: MYSQL_DATABASE }),
    cleanup: async () => {
      const connection = await mysql.createConnection({ uri: MYSQL_URL });
      await connection
        .query(`DROP DATABASE IF EXISTS \`${MYSQL_DATABASE}\``)
        .finally(() => connection.end());
    },
  };
}

/** Lateness of each job in ms (handler start − due time), in start order. */
export async function dueTimeLateness(store: DueStore, quick = false): Promise<number[]> {
  const count = quick ? 100 : 200;
  const { worker, producer, cleanup } = await openStores(store);
  const late: number[] = [];
  const engine = new JobEngine({
    store: worker,
    concurrency: 10,
    logger: silentLogger,
    handlers: { [TYPE]: (job) => void late.push(Date.now() - job.dueAt.getTime()) },
  });
  const client = new JobEngine({ store: producer, logger: silentLogger });
  try {
    await engine.start();
    // Idle until the idle back-off is at its longest (it doubles up to 1 s).
    await sleep(3_000);
    const next = sequence(29);
    let lastDue = 0;
    for (let n = 0; n < count; n++) {
      const job = await client.enqueue(TYPE, { n }, { delayMs: 50 + Math.round(next() * 950) });
      lastDue = Math.max(lastDue, job.dueAt.getTime());
      await sleep(Math.round(next() * 60));
    }
    const deadline = lastDue + 10_000;
    while (late.length < count && Date.now() < deadline) await sleep(20);
    if (late.length < count) {
      throw new Error(`due-time lateness (${store}): ${late.length} of ${count} jobs ran`);
    }
    return late;
  } finally {
    await engine.stop({ timeoutMs: 5_000 });
    await producer.close();
    await worker.close().catch(() => undefined);
    await cleanup();
  }
}

/** `pnpm bench due [sqlite|postgres|mysql ...] [--quick]`: this line alone, per store. */
export async function runDueTime(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const chosen = argv.filter((a): a is DueStore => (STORES as string[]).includes(a));
  const measures: BenchMeasure[] = [];
  const notes: string[] = [];
  for (const store of chosen.length ? chosen : STORES) {
    console.log(`[bench] due-time lateness: ${store} ...`);
    try {
      const late = await dueTimeLateness(store, quick);
      measures.push(...dueTimeMeasures(`@jobs/${store}`, late));
      measures.push({
        metric: 'due-time lateness max, idle engine (ms)',
        contender: `@jobs/${store}`,
        value: percentile(late, 100),
        unit: 'ms',
        higherIsBetter: false,
      });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (!/ECONNREFUSED|ENOTFOUND|connect/i.test(message.split('\n')[0] ?? '')) throw error;
      notes.push(`${store}: skipped (database unreachable: ${message})`);
    }
  }
  notes.push(
    `${quick ? 100 : 200} jobs per store enqueued from another connection one every 0–60 ms, each due 50–1,000 ms later, on an idle engine (default configuration, concurrency 10); lateness = handler start − dueAt`,
  );
  printReport({ suite: 'due-time lateness', measures, notes, ours: [] });
}
