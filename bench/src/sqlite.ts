/**
 * SQLite suite: @jobs/sqlite (better-sqlite3, WAL, synchronous=NORMAL) in one process.
 * - bulk enqueue: `jobs` no-op jobs (default 10,000) in batches of 1,000 through `enqueueMany`;
 * - throughput: one JobEngine (concurrency 10, prefetch 190) runs them; time from start until
 *   every job completed; statements and transactions per job counted on the store;
 * - pickup latency: jobs enqueued one at a time at ~200/s through the running engine
 *   (enqueue-call start → handler start), and the same from ANOTHER connection to the file,
 *   which the engine only learns about through `PRAGMA data_version` (checked every 10 ms by default);
 * - multi-process throughput: 2 and 3 worker processes (one engine each) drain one file;
 * - single enqueue rate (sequential awaited calls).
 *
 * Run alone: `npx tsx bench/src/sqlite.ts [--quick] [--jobs N]`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { JobEngine } from '@jobs/core';
import { SqliteJobStore, type SqliteStoreCounters } from '@jobs/sqlite';
import {
  type BenchMeasure,
  type BenchOptions,
  type BenchReport,
  drainInProcess,
  enqueueInBatches,
  latencyMeasures,
  paced,
  printReport,
  serveWorker,
  singleEnqueueRates,
  timedWorkerRun,
  type WorkerIo,
  waitUntil,
  workUntilStopped,
} from './harness.js';

const CONTENDER = '@jobs/sqlite';
const CONCURRENCY = 10;
/** Jobs leased beyond `concurrency`: the batch-size lever (see DESIGN.md). */
const PREFETCH = 190;
const BULK_BATCH = 1_000;
const LATENCY_RATE = 200;
const SELF = fileURLToPath(import.meta.url);

interface WorkerArgs {
  filename: string;
}

interface WorkerResult {
  ran: number;
  counters: SqliteStoreCounters;
}

/** A worker process: one engine on the shared file, from `go` until the parent says `stop`. */
async function sqliteWorker(args: WorkerArgs, io: WorkerIo): Promise<WorkerResult> {
  const store = new SqliteJobStore({ filename: args.filename });
  let ran = 0;
  const engine = new JobEngine({
    store,
    concurrency: CONCURRENCY,
    prefetch: PREFETCH,
    handlers: {
      noop: () => {
        ran += 1;
      },
    },
  });
  await workUntilStopped(io, {
    start: () => engine.start(),
    stop: () => engine.stop({ timeoutMs: 5_000 }),
    count: () => ran,
  });
  const counters = store.counters;
  await store.close();
  return { ran, counters };
}

/** Jobs run by `processes` worker processes on one file; returns jobs/s and statements/job. */
async function multiProcessThroughput(
  folder: string,
  processes: number,
  total: number,
): Promise<{ perSecond: number; statementsPerJob: number }> {
  const filename = join(folder, `processes-${processes}.db`);
  const store = new SqliteJobStore({ filename });
  await store.migrate();
  const client = new JobEngine({ store });
  await enqueueInBatches(
    total,
    (payloads) => client.enqueueMany(payloads.map((payload) => ({ type: 'noop', payload }))),
    BULK_BATCH,
  );
  const remaining = store.db.prepare('SELECT COUNT(*) FROM jobs').pluck();
  try {
    const { ms, results } = await timedWorkerRun<WorkerResult>({
      module: SELF,
      processes,
      args: () => ({ filename }) satisfies WorkerArgs,
      finished: () => {
        const left = Number(remaining.get());
        progress(`sqlite ${processes} processes: ${total - left}/${total} jobs`);
        return left === 0;
      },
      timeoutMs: 600_000,
      what: `${processes} processes to run ${total} jobs`,
      everyMs: 10,
    });
    endProgress();
    const ran = results.reduce((sum, r) => sum + r.ran, 0);
    if (ran !== total) throw new Error(`${processes} processes ran ${ran} jobs, expected ${total}`);
    const statements = results.reduce((sum, r) => sum + r.counters.statements, 0);
    return { perSecond: (total / ms) * 1000, statementsPerJob: statements / total };
  } finally {
    await store.close();
  }
}

export interface SqliteBenchOptions extends Partial<BenchOptions> {
  /** No-op jobs for the throughput run. Default 10,000 (2,000 with `quick`). */
  jobs?: number;
}

function progress(line: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r${line.padEnd(70)}`);
  else process.stderr.write(`${line}\n`);
}

function endProgress(): void {
  if (process.stderr.isTTY) process.stderr.write('\n');
}

function diff(after: SqliteStoreCounters, before: SqliteStoreCounters): SqliteStoreCounters {
  return {
    statements: after.statements - before.statements,
    transactions: after.transactions - before.transactions,
  };
}

/** Runs the SQLite suite and returns its report (also printed when run alone). */
export async function runSqliteBench(options: SqliteBenchOptions = {}): Promise<BenchReport> {
  const quick = options.quick ?? false;
  const total = options.jobs ?? (quick ? 2_000 : 10_000);
  const latencyJobs = quick ? 200 : 1_000;
  const folder = mkdtempSync(join(tmpdir(), 'jobs-bench-sqlite-'));
  const measures: BenchMeasure[] = [];
  const notes: string[] = [];
  const measure = (metric: string, value: number, unit: string, higherIsBetter: boolean): void => {
    measures.push({ metric, contender: CONTENDER, value, unit, higherIsBetter });
  };

  try {
    // ---- throughput: bulk enqueue up front, then one engine drains the file ----
    {
      const store = new SqliteJobStore({ filename: join(folder, 'throughput.db') });
      let before = store.counters;
      const { enqueueMs, runMs } = await drainInProcess(store, total, {
        concurrency: CONCURRENCY,
        prefetch: PREFETCH,
        beforeRun: () => {
          before = store.counters;
        },
        progress: (done) => progress(`sqlite throughput: ${done}/${total} jobs`),
      });
      measure('bulk enqueue (jobs/s)', (total / enqueueMs) * 1000, 'jobs/s', true);
      progress(`sqlite throughput: ${total}/${total} jobs in ${Math.round(runMs)} ms`);
      endProgress();
      const used = diff(store.counters, before);
      await store.close();
      measure(
        `throughput, 1 engine c=${CONCURRENCY} (jobs/s)`,
        (total / runMs) * 1000,
        'jobs/s',
        true,
      );
      measure('statements per job (run phase)', used.statements / total, 'stmt', false);
      measure('transactions per job (run phase)', used.transactions / total, 'tx', false);
      notes.push(
        `throughput: ${total} no-op jobs enqueued up front in batches of ${BULK_BATCH}, one engine, concurrency ${CONCURRENCY}, prefetch ${PREFETCH}`,
        `round trips per job = statements executed on the store while the engine ran (acquire, complete(+acquire), renew, recover, nextDueAt) ÷ jobs; SQLite is in-process, each statement is a call, not a network round trip`,
      );
    }

    // ---- several processes on one file ----
    for (const processes of [2, 3]) {
      const result = await multiProcessThroughput(folder, processes, total);
      measure(
        `throughput, ${processes} processes c=${CONCURRENCY} (jobs/s)`,
        result.perSecond,
        'jobs/s',
        true,
      );
      measure(`statements per job, ${processes} processes`, result.statementsPerJob, 'stmt', false);
    }
    notes.push(
      `processes: the same ${total} jobs drained by 2 and 3 worker processes, one engine each (same settings), sharing the file through BEGIN IMMEDIATE`,
    );

    // ---- pickup latency and single enqueue ----
    {
      const filename = join(folder, 'latency.db');
      const store = new SqliteJobStore({ filename });
      await store.migrate();
      const started = new Map<number, number>();
      const engine = new JobEngine({
        store,
        concurrency: CONCURRENCY,
        prefetch: PREFETCH,
        handlers: {
          noop: (job) => {
            started.set((job.payload as { n: number }).n, performance.now());
          },
        },
      });
      await engine.start();

      // same engine enqueues: immediate dispatch after commit
      const sentLocal = new Map<number, number>();
      await paced(latencyJobs, LATENCY_RATE, async (n) => {
        sentLocal.set(n, performance.now());
        await engine.enqueue('noop', { n });
        if (n % 100 === 0) progress(`sqlite latency (same engine): ${n}/${latencyJobs}`);
      });
      await waitUntil(() => started.size >= latencyJobs, 60_000, 'local latency jobs to start', 5);
      const local = [...sentLocal].map(([n, t]) => started.get(n)! - t);

      // another connection enqueues: the engine wakes on PRAGMA data_version
      const producer = new SqliteJobStore({ filename });
      const client = new JobEngine({ store: producer });
      const sentRemote = new Map<number, number>();
      await paced(latencyJobs, LATENCY_RATE, async (i) => {
        const n = latencyJobs + i;
        sentRemote.set(n, performance.now());
        await client.enqueue('noop', { n });
        if (i % 100 === 0) progress(`sqlite latency (other connection): ${i}/${latencyJobs}`);
      });
      await waitUntil(
        () => started.size >= 2 * latencyJobs,
        60_000,
        'remote latency jobs to start',
        5,
      );
      const remote = [...sentRemote].map(([n, t]) => started.get(n)! - t);
      endProgress();

      await engine.stop({ timeoutMs: 5_000 });
      // single enqueue: sequential awaited calls, no engine running
      const singles = quick ? 500 : 2_000;
      const singleRates = await singleEnqueueRates(
        [CONTENDER],
        singles,
        (_, i) => client.enqueue('noop', { i }),
        1,
      );
      await producer.close();
      await store.close();

      measures.push(
        ...latencyMeasures(CONTENDER, local, (p) => `pickup latency p${p}, same engine (ms)`),
        ...latencyMeasures(CONTENDER, remote, (p) => `pickup latency p${p}, other connection (ms)`),
      );
      measure('single enqueue (jobs/s)', singleRates.get(CONTENDER) ?? Number.NaN, 'jobs/s', true);
      notes.push(
        `latency: ${latencyJobs} jobs enqueued one at a time at ${LATENCY_RATE}/s, enqueue-call start → handler start; "other connection" enqueues through a second store on the same file (wake-up via PRAGMA data_version, checked every 10 ms, the store default)`,
      );
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  return { suite: 'sqlite', measures, notes };
}

function parseArgs(argv: readonly string[]): SqliteBenchOptions {
  const options: SqliteBenchOptions = { quick: argv.includes('--quick') };
  const at = argv.indexOf('--jobs');
  if (at >= 0) options.jobs = Number(argv[at + 1]);
  return options;
}

const isMain =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain && process.env.BENCH_WORKER_ARGS) {
  // started by spawnWorkers(): this file is its own worker module
  serveWorker(sqliteWorker);
} else if (isMain) {
  runSqliteBench(parseArgs(process.argv.slice(2)))
    .then((report) => printReport(report))
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
