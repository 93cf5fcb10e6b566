/**
 * SQLite suite: @jobs/sqlite (better-sqlite3, WAL) in its default configuration and tuned,
 * against plainjob and liteque (both better-sqlite3 queues), each on its own file, every worker
 * process at concurrency 10:
 * - throughput: no-op jobs enqueued up front, then 1 and 2 worker processes drain the file;
 *   statements per job (every statement a worker ran, counted at better-sqlite3) and peak RSS;
 * - pickup latency: jobs enqueued one at a time at 50/s from this process (another connection),
 *   one worker process per contender, all at once; enqueue-call start → handler start;
 * - single enqueue; bulk enqueue apart from the drains (every contender in turn, fresh files);
 * - enqueue floor: better-sqlite3 alone on each library's table, no library code
 *   (`sqlite-floor.ts`);
 * - backlog series (ours, default configuration): 10k, 100k and 1M jobs on a fresh file.
 *
 * Run alone: `npx tsx bench/src/sqlite.ts [--quick]`. This file is also the worker process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { JobEngine, silentLogger } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { type buildDBClient, migrateDB, Runner, SqliteQueue } from 'liteque';
import { better, defineQueue, defineWorker, JobStatus } from 'plainjob';
import { dueTimeLateness, dueTimeMeasures } from './due-time.js';
import {
  type BenchOptions,
  type BenchReport,
  backlogSeries,
  bulkEnqueueRates,
  type DrainResult,
  drainWithWorkers,
  enqueueInBatches,
  jobRecorder,
  latencyMeasures,
  measuredWork,
  type Producer,
  pickupLatency,
  printReport,
  reportParts,
  serveWorker,
  singleEnqueueRates,
  TUNED_HISTORY,
  throughputRuns,
  type WorkerIo,
  type WorkerStats,
} from './harness.js';
import { enqueueFloor } from './sqlite-floor.js';

/**
 * better-sqlite3 10 for liteque: liteque 0.8 dequeues through `db.transaction(async …)`, which
 * better-sqlite3 11 and later reject ("Transaction function cannot return a promise"), so it
 * runs on the last release it works with (the `better-sqlite3-legacy` alias in package.json).
 */
const LitequeDatabase = createRequire(import.meta.url)('better-sqlite3-legacy') as typeof Database;
const CONCURRENCY = 10;
/** Our tuned configuration: a fixed prefetch (batches of up to 500 from the first one). */
const TUNED_PREFETCH = 490;
/** The peers' poll interval: our engine checks `PRAGMA data_version` every 10 ms by default. */
const PEER_POLL_MS = 10;
const QUEUE = 'noop';
/** Jobs each contender enqueues in bulk (and a tenth of it one by one) before the measured runs. */
const WARM_UP_JOBS = 3_000;
const SELF = fileURLToPath(import.meta.url);

type Contender = 'ours' | 'ours-tuned' | 'plainjob' | 'liteque';
const CONTENDERS: Contender[] = ['ours', 'ours-tuned', 'plainjob', 'liteque'];
const NAMES: Record<Contender, string> = {
  ours: '@jobs/sqlite',
  'ours-tuned': '@jobs/sqlite tuned',
  plainjob: 'plainjob',
  liteque: 'liteque',
};

interface WorkerArgs {
  contender: Contender;
  filename: string;
}

/** `commands`: statements this process ran between `go` and `stop`. */
type WorkerResult = WorkerStats;

/**
 * Counts statements run through better-sqlite3 in this process (every contender uses it):
 * `run`, `get`, `all` and `iterate` of prepared statements, and `exec`.
 */
function countStatements(): () => number {
  let count = 0;
  const wrap = (target: Record<string, unknown>, name: string): void => {
    const original = target[name] as (...args: unknown[]) => unknown;
    target[name] = function counted(this: unknown, ...args: unknown[]) {
      count++;
      return original.apply(this, args);
    };
  };
  // Both copies: ours and plainjob run on better-sqlite3 12, liteque on 10.
  for (const Driver of [Database, LitequeDatabase]) {
    const probe = new Driver(':memory:');
    const statement = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
    const database = Object.getPrototypeOf(probe) as Record<string, unknown>;
    probe.close();
    for (const name of ['run', 'get', 'all', 'iterate']) wrap(statement, name);
    wrap(database, 'exec');
  }
  return () => count;
}

async function openProducer(contender: Contender, filename: string): Promise<Producer> {
  if (contender === 'plainjob') {
    const db = new Database(filename);
    const queue = defineQueue({ connection: better(db), logger: quiet });
    return {
      single: async (payload) => {
        queue.add(QUEUE, payload);
      },
      bulk: async (payloads) => {
        queue.addMany(QUEUE, payloads);
      },
      remaining: async () =>
        queue.countJobs({ status: JobStatus.Pending }) +
        queue.countJobs({ status: JobStatus.Processing }),
      close: async () => {
        queue.close();
        db.close();
      },
    };
  }
  if (contender === 'liteque') {
    const { db, close } = openLiteque(filename);
    migrateDB(db);
    const queue = new SqliteQueue<object>(QUEUE, db, {
      defaultJobArgs: { numRetries: 0 },
      keepFailedJobs: false,
    });
    return {
      single: async (payload) => {
        await queue.enqueue(payload);
      },
      // liteque has no bulk enqueue.
      bulk: async (payloads) => {
        for (const payload of payloads) await queue.enqueue(payload);
      },
      remaining: async () => {
        const stats = await queue.stats();
        return stats.pending + stats.pending_retry + stats.running;
      },
      close: async () => {
        close();
      },
    };
  }
  const store = new SqliteJobStore({ filename });
  await store.migrate();
  const client = new JobEngine({ store, logger: silentLogger });
  const remaining = store.db.prepare('SELECT COUNT(*) FROM jobs_jobs').pluck();
  return {
    single: async (payload) => {
      await client.enqueue(QUEUE, payload);
    },
    bulk: async (payloads) => {
      await client.enqueueMany(payloads.map((payload) => ({ type: QUEUE, payload })));
    },
    remaining: async () => Number(remaining.get()),
    close: () => store.close(),
  };
}

const quiet = { error() {}, warn() {}, info() {}, debug() {} };

/**
 * liteque's database on `filename`, as its `buildDBClient(filename, { walEnabled: true })` opens
 * it (same pragmas), on better-sqlite3 10 (see `LitequeDatabase`).
 */
function openLiteque(filename: string): { db: ReturnType<typeof buildDBClient>; close(): void } {
  const sqlite = new LitequeDatabase(filename);
  for (const pragma of [
    'journal_mode = WAL',
    'synchronous = NORMAL',
    'cache_size = -65536',
    'foreign_keys = ON',
    'temp_store = MEMORY',
  ]) {
    sqlite.pragma(pragma);
  }
  const db = drizzle(sqlite) as unknown as ReturnType<typeof buildDBClient>;
  return { db, close: () => sqlite.close() };
}

/** A worker process: one contender on the file, from `go` until the parent says `stop`. */
async function sqliteWorker(args: WorkerArgs, io: WorkerIo): Promise<WorkerResult> {
  const statements = countStatements();
  const recorder = jobRecorder();
  const onJob = recorder.onJob;
  let start: () => Promise<void>;
  let stop: () => Promise<void>;
  if (args.contender === 'plainjob') {
    const db = new Database(args.filename);
    const queue = defineQueue({ connection: better(db), logger: quiet });
    // plainjob runs one job at a time per worker: concurrency 10 is ten workers.
    const workers = Array.from({ length: CONCURRENCY }, () =>
      defineWorker(QUEUE, (job) => onJob(JSON.parse(job.data)), {
        queue,
        pollIntervall: PEER_POLL_MS,
        logger: quiet,
      }),
    );
    let running: Promise<void>[] = [];
    start = async () => {
      running = workers.map((w) => w.start());
    };
    stop = async () => {
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.allSettled(running);
      queue.close();
      db.close();
    };
  } else if (args.contender === 'liteque') {
    const { db, close } = openLiteque(args.filename);
    const queue = new SqliteQueue<object>(QUEUE, db, {
      defaultJobArgs: { numRetries: 0 },
      keepFailedJobs: false,
    });
    const runner = new Runner<object>(
      queue,
      { run: async (job) => onJob(job.data) },
      { concurrency: CONCURRENCY, pollIntervalMs: PEER_POLL_MS, timeoutSecs: 60 },
    );
    let running: Promise<void> = Promise.resolve();
    start = async () => {
      running = runner.run();
    };
    stop = async () => {
      runner.stop();
      await running;
      close();
    };
  } else {
    const store = new SqliteJobStore({ filename: args.filename });
    const engine = new JobEngine({
      store,
      concurrency: CONCURRENCY,
      ...(args.contender === 'ours-tuned'
        ? { prefetch: TUNED_PREFETCH, history: TUNED_HISTORY }
        : {}),
      logger: silentLogger,
      handlers: { [QUEUE]: (job) => onJob(job.payload) },
    });
    start = () => engine.start();
    stop = async () => {
      await engine.stop({ timeoutMs: 5_000 });
      await store.close();
    };
  }
  return measuredWork(io, { start, stop }, recorder, statements);
}

/** `processes` workers drain `total` jobs already in the file, until none is left. */
function throughput(
  contender: Contender,
  producer: Producer,
  filename: string,
  total: number,
  processes: number,
): Promise<DrainResult> {
  return drainWithWorkers<WorkerResult>({
    module: SELF,
    processes,
    args: () => ({ contender, filename }) satisfies WorkerArgs,
    total,
    remaining: () => producer.remaining(),
    what: `${NAMES[contender]}: ${processes} process(es) ran ${total} jobs`,
  });
}

/** Runs the SQLite suite and returns its reports (also printed when run alone). */
export async function runSqliteBench(options: Partial<BenchOptions> = {}): Promise<BenchReport[]> {
  const quick = options.quick ?? false;
  const total = quick ? 5_000 : 20_000;
  const latencyJobs = quick ? 100 : 300;
  const singles = quick ? 500 : 2_000;
  const folder = mkdtempSync(join(tmpdir(), 'jobs-bench-sqlite-'));
  const parts = reportParts((c: Contender) => NAMES[c]);
  const { measures, notes, add } = parts;
  let files = 0;
  const fresh = (): string => join(folder, `bench-${++files}.db`);
  try {
    // Every contender's enqueue code compiled before anything is measured: else the first one
    // measured (ours) pays for its JIT warm-up in the measured runs, the others less or not.
    console.log('[bench] sqlite: warm-up enqueues ...');
    for (const c of CONTENDERS) {
      const producer = await openProducer(c, fresh());
      try {
        await enqueueInBatches(WARM_UP_JOBS, (payloads) => producer.bulk(payloads));
        for (let i = 0; i < WARM_UP_JOBS / 10; i++) await producer.single({ i });
      } finally {
        await producer.close();
      }
    }
    console.log('[bench] sqlite: single enqueue ...');
    const producers = new Map<Contender, Producer>();
    for (const c of CONTENDERS) producers.set(c, await openProducer(c, fresh()));
    const singleRates = await singleEnqueueRates(CONTENDERS, singles, (c, i) =>
      (producers.get(c) as Producer).single({ i }),
    );
    for (const [c, rate] of singleRates) {
      add('enqueue single (jobs/s)', c, rate, 'jobs/s', true);
      await producers.get(c)?.close();
    }
    producers.clear();

    console.log('[bench] sqlite: bulk enqueue (contenders in turn, fresh files) ...');
    const bulkRates = await bulkEnqueueRates(
      CONTENDERS,
      total,
      (c) => openProducer(c, fresh()),
      quick ? 3 : 5,
    );
    for (const [c, { median, rates }] of bulkRates) {
      add('enqueue bulk, batches of 1,000 (jobs/s)', c, median, 'jobs/s', true);
      notes.push(
        `${NAMES[c]} bulk enqueue: median of ${rates.length} rounds; rounds ran ${rates.map((r) => Math.round(r).toLocaleString('en-US')).join(' / ')} jobs/s`,
      );
    }

    console.log("[bench] sqlite: enqueue floor (the database alone, each library's table) ...");
    const floor = await enqueueFloor(fresh, {
      bulkRows: total,
      singleRows: singles,
      rounds: quick ? 3 : 5,
    });
    for (const [schema, c] of [
      ['ours', 'ours'],
      ['plainjob', 'plainjob'],
    ] as const) {
      const rates = floor.get(schema);
      if (!rates) continue;
      add('enqueue floor bulk, no library code (rows/s)', c, rates.bulk, 'rows/s', true);
      add('enqueue floor single, no library code (rows/s)', c, rates.single, 'rows/s', true);
    }
    const noDue = floor.get('ours-no-due-index');

    // Each run on a fresh file; `drain` needs the file the producer opened.
    const files = new Map<Producer, string>();
    await throughputRuns({
      suite: 'sqlite',
      contenders: CONTENDERS,
      name: (contender) => NAMES[contender],
      jobs: () => total,
      open: async (contender) => {
        const filename = fresh();
        const producer = await openProducer(contender, filename);
        files.set(producer, filename);
        return producer;
      },
      drain: (contender, producer, jobs, processes) =>
        throughput(contender, producer, files.get(producer) as string, jobs, processes),
      commands: () => ['statements per job (1 proc)', 'stmt'],
      rounds: quick ? 1 : undefined,
      parts,
      // Measured above, apart from the drains.
      bulkLine: false,
    });

    console.log('[bench] sqlite: due-time lateness ...');
    measures.push(...dueTimeMeasures(NAMES.ours, await dueTimeLateness('sqlite', quick)));

    console.log('[bench] sqlite: pickup latency (all contenders at once) ...');
    const latencyFiles = new Map(CONTENDERS.map((c) => [c, fresh()] as const));
    for (const c of CONTENDERS) {
      producers.set(c, await openProducer(c, latencyFiles.get(c) as string));
    }
    try {
      const samples = await pickupLatency({
        contenders: CONTENDERS,
        module: SELF,
        args: (c) =>
          ({ contender: c, filename: latencyFiles.get(c) as string }) satisfies WorkerArgs,
        enqueue: (c, payload) => (producers.get(c) as Producer).single(payload),
        count: latencyJobs,
      });
      for (const [c, { fromCall }] of samples) {
        measures.push(
          ...latencyMeasures(NAMES[c], fromCall, (p) => `enqueue call → start p${p} at 50/s (ms)`),
        );
      }
    } finally {
      for (const c of CONTENDERS) await producers.get(c)?.close();
    }

    notes.push(
      `${total} no-op jobs per run, each contender on a fresh file; ${latencyJobs} latency samples at 50/s, enqueued by this process (another connection); ${singles} single enqueues`,
      "@jobs/sqlite: SqliteJobStore + JobEngine({ concurrency: 10 }) and nothing else (adaptive batches; other connections' commits seen through PRAGMA data_version, checked every 10 ms)",
      `@jobs/sqlite tuned: the same with prefetch: ${TUNED_PREFETCH} and history: { keep: 'failed' } (completed jobs leave no history record)`,
      `plainjob 0.0.14: one queue (it sets WAL, synchronous=NORMAL), ${CONCURRENCY} defineWorker()s (a worker runs one job at a time), pollIntervall ${PEER_POLL_MS} ms; bulk enqueue with addMany`,
      `liteque 0.8.0: its database opened as buildDBClient(file, { walEnabled: true }) does, on better-sqlite3 10.1 (liteque 0.8 fails on 11+: it passes an async function to db.transaction); Runner concurrency ${CONCURRENCY}, pollIntervalMs ${PEER_POLL_MS}; no bulk enqueue (one enqueue per job)`,
      'statements: every statement a worker process ran through better-sqlite3 (run/get/all/iterate/exec) ÷ jobs; SQLite runs in-process, so a statement is a call, not a network round trip',
      `enqueue floor: better-sqlite3 alone on each library's migrated table (WAL, synchronous=NORMAL), no library code: bulk ${total} rows in transactions of 1,000 as 50-row INSERTs, single ${singles} autocommit INSERTs; medians of ${quick ? 3 : 5} alternating rounds. Our table without jobs_due_idx: ${noDue ? `${Math.round(noDue.bulk).toLocaleString('en-US')} rows/s bulk, ${Math.round(noDue.single).toLocaleString('en-US')} single` : '—'}. An enqueue slower than the peer's floor cannot catch up in JavaScript, only by writing less`,
      'ratios: ours ÷ each other; for jobs/s higher is better, for ms, stmt and MiB lower is better',
    );
    let filename = '';
    const backlog = await backlogSeries({
      suite: 'sqlite',
      sizes: quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000],
      open: () => {
        filename = fresh();
        return openProducer('ours', filename);
      },
      drain: (producer, jobs) => throughput('ours', producer, filename, jobs, 1),
      commands: ['statements per job', 'stmt'],
      notes: [
        `one worker process, @jobs/sqlite default configuration, concurrency ${CONCURRENCY}; each size on a fresh file, never analysed (no sqlite_stat1)`,
      ],
    });
    return [{ suite: 'sqlite', measures, notes, ours: [NAMES.ours, NAMES['ours-tuned']] }, backlog];
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

const isMain =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain && process.env.BENCH_WORKER_ARGS) {
  // started by spawnWorkers(): this file is its own worker module
  serveWorker(sqliteWorker);
} else if (isMain) {
  runSqliteBench({ quick: process.argv.includes('--quick') })
    .then((reports) => {
      for (const report of reports) printReport(report);
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
