/**
 * MySQL/MariaDB suite: @jobs/mysql in its default configuration and tuned, against Sidequest
 * (its MySQL backend, the fastest configuration its documentation gives), with @jobs/postgres
 * (default configuration, same machine) as the reference the MySQL store is held to (≥ 0.5×).
 * Every worker process runs at concurrency 10.
 * - throughput: no-op jobs enqueued up front, then 1 and 2 worker processes run them; round
 *   trips per job (commands written to the MySQL socket by the worker) and peak RSS;
 * - idle cost: commands per second an idle worker sends (our wake-up check vs polling);
 * - pickup latency: jobs enqueued one by one at 50/s from this process, one worker process per
 *   contender, all at once; enqueue-call start → handler start, p50/p95/p99;
 * - single and bulk enqueue;
 * - backlog series (ours, default configuration): 10k, 100k and 1M jobs on a fresh table.
 *
 * Runnable alone: `npx tsx bench/src/mysql.ts [--quick]` (build the packages first). This file is
 * also the worker process (started by `spawnWorkers` with BENCH_WORKER_ARGS set).
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import { JobEngine, type JobStore, silentLogger } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { dueTimeLateness, dueTimeMeasures } from './due-time.js';
import {
  type BenchOptions,
  type BenchReport,
  backlogSeries,
  countSocketWrites,
  type DrainResult,
  drainWithWorkers,
  dropPostgresSchemas,
  jobRecorder,
  latencyMeasures,
  measuredWork,
  type Producer,
  pickupLatency,
  printReport,
  reportParts,
  serverSuiteSizes,
  serveWorker,
  singleEnqueueRates,
  sleep,
  TUNED_HISTORY,
  throughputRuns,
  timedWorkerRun,
  type WorkerStats,
} from './harness.js';

const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_PORT = Number(new URL(MYSQL_URL).port || 3306);
const SELF = fileURLToPath(import.meta.url);
const CONCURRENCY = 10;
/**
 * Our tuned MySQL configuration: fixed batches of up to 2,000. Per batch, not per job, costs
 * dominate on InnoDB: on 2026-11-27 990 drained 14,300 jobs/s against 9,800 with 190, and later
 * that day (three rounds each, history off) fixed 1,990 ran ~22,400 / ~22,200 jobs/s with one /
 * two worker processes, 3,990 ~23,900 / ~21,500 and 990 ~18,200 / ~18,900 (run I): 1,990 is
 * the one that holds up with two processes, where a big last batch runs on one of them alone.
 */
const TUNED_PREFETCH = 1_990;
const QUEUE = 'noop';
const DATABASES = {
  mysql: 'jobs_bench_mysql',
  'mysql-tuned': 'jobs_bench_mysql_tuned',
  sidequest: 'jobs_bench_sidequest',
} as const;
const PG_SCHEMA = 'bench_jobs_vs_mysql';
/** Sidequest enqueues retried after a deadlock with its own claim (see `openProducer`). */
let sidequestDeadlocks = 0;
/** Sidequest polls for jobs every this many ms (its default, `jobPollingInterval`). */
const SIDEQUEST_POLL_MS = 100;

type Contender = 'mysql' | 'mysql-tuned' | 'sidequest' | 'postgres';
const NAMES: Record<Contender, string> = {
  mysql: '@jobs/mysql',
  'mysql-tuned': '@jobs/mysql tuned',
  sidequest: 'sidequest',
  postgres: '@jobs/postgres',
};

interface WorkerArgs {
  contender: Contender;
}

interface WorkerResult extends WorkerStats {
  /** Commands per second after startup, when asked to measure an idle window. */
  idleRate: number;
  deadlockRetries: number;
  lockWaitRetries: number;
}

const urlOf = (database: string): string => {
  const url = new URL(MYSQL_URL);
  url.pathname = `/${database}`;
  return url.toString();
};

/** A store with its defaults (pool of 10) for the default contenders; tuned: a pool of 4. */
function openStore(contender: 'mysql' | 'mysql-tuned' | 'postgres'): JobStore {
  return contender === 'postgres'
    ? new PostgresJobStore({ connectionString: PG_URL, schema: PG_SCHEMA })
    : new MysqlJobStore({
        uri: MYSQL_URL,
        database: DATABASES[contender],
        ...(contender === 'mysql-tuned' ? { connectionLimit: 4 } : {}),
      });
}

async function resetDatabase(contender: Contender): Promise<void> {
  if (contender === 'postgres') {
    await dropPostgresSchemas(PG_URL, [PG_SCHEMA]);
    return;
  }
  const connection = await mysql.createConnection({ uri: MYSQL_URL });
  try {
    await connection.query(`DROP DATABASE IF EXISTS \`${DATABASES[contender]}\``);
    await connection.query(`CREATE DATABASE \`${DATABASES[contender]}\``);
  } finally {
    await connection.end();
  }
}

async function dropDatabase(contender: Contender): Promise<void> {
  if (contender === 'postgres') {
    await dropPostgresSchemas(PG_URL, [PG_SCHEMA]);
    return;
  }
  const connection = await mysql.createConnection({ uri: MYSQL_URL });
  await connection
    .query(`DROP DATABASE IF EXISTS \`${DATABASES[contender]}\``)
    .finally(() => connection.end());
}

async function reachable(contender: 'mysql' | 'postgres'): Promise<boolean> {
  try {
    if (contender === 'mysql') {
      const connection = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 2_000 });
      await connection.end();
    } else {
      const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2_000 });
      await client.connect();
      await client.end();
    }
    return true;
  } catch {
    return false;
  }
}

async function openProducer(contender: Contender): Promise<Producer> {
  await resetDatabase(contender);
  if (contender === 'sidequest') {
    const { Sidequest } = await import('sidequest');
    const { NoopJob } = await import('./peers/sidequest-job.js');
    await Sidequest.configure({
      backend: { driver: '@sidequest/mysql-backend', config: urlOf(DATABASES.sidequest) },
      logger: { level: 'error' },
    });
    const connection = await mysql.createConnection({ uri: urlOf(DATABASES.sidequest) });
    // The queue's row, as Sidequest.start() would write it: two worker processes starting at
    // once otherwise both find it missing and one fails on the unique name.
    await connection.query(
      "INSERT IGNORE INTO sidequest_queues (name, concurrency, priority, state) VALUES (?, ?, 0, 'active')",
      [QUEUE, CONCURRENCY],
    );
    const single = async (payload: object): Promise<void> => {
      // Sidequest's INSERT can deadlock with its own claiming transaction (InnoDB gap locks);
      // it does not retry, so an app would: so does the bench.
      for (let attempt = 1; ; attempt++) {
        try {
          await Sidequest.build(NoopJob).queue(QUEUE).enqueue(payload);
          return;
        } catch (error) {
          if ((error as { errno?: number }).errno !== 1213 || attempt >= 10) throw error;
          sidequestDeadlocks++;
        }
      }
    };
    return {
      single,
      // Sidequest has no bulk enqueue: 100 enqueues at a time.
      bulk: async (payloads) => {
        for (let i = 0; i < payloads.length; i += 100) {
          await Promise.all(payloads.slice(i, i + 100).map(single));
        }
      },
      remaining: async () => {
        const [rows] = await connection.query(
          "SELECT COUNT(*) AS n FROM sidequest_jobs WHERE state IN ('waiting', 'claimed', 'running')",
        );
        return Number((rows as { n: number }[])[0]?.n ?? 0);
      },
      close: async () => {
        await connection.end();
        await Sidequest.stop();
      },
    };
  }
  const store = openStore(contender);
  await store.migrate();
  const client = new JobEngine({ store, logger: silentLogger });
  return {
    single: async (payload) => {
      await client.enqueue(QUEUE, payload);
    },
    bulk: async (payloads) => {
      await client.enqueueMany(payloads.map((payload) => ({ type: QUEUE, payload })));
    },
    remaining: async () => (await store.stats()).reduce((sum, row) => sum + row.count, 0),
    close: () => store.close(),
  };
}

/** Runs `total` pre-enqueued jobs with `processes` workers, until none is left in the database. */
function throughput(
  contender: Contender,
  producer: Producer,
  total: number,
  processes: number,
): Promise<DrainResult<WorkerResult>> {
  return drainWithWorkers<WorkerResult>({
    module: SELF,
    processes,
    args: () => ({ contender }) satisfies WorkerArgs,
    total,
    remaining: () => producer.remaining(),
    what: `${NAMES[contender]}: ${processes} process(es) ran ${total} jobs`,
  });
}

/** Runs the MySQL suite; see the file header. */
export async function runMysqlBench(
  options: BenchOptions = { quick: false },
): Promise<BenchReport[]> {
  const { total, latencyJobs, singles } = serverSuiteSizes(options);
  /** Sidequest runs a few hundred jobs a second: fewer of them keep the run short. */
  const sidequestTotal = options.quick ? 1_000 : 4_000;
  const parts = reportParts((contender: Contender) => NAMES[contender]);
  const { measures, notes, add } = parts;

  if (!(await reachable('mysql'))) {
    throw new Error(
      `MySQL/MariaDB at ${MYSQL_URL} is unreachable (start it: service mariadb start)`,
    );
  }
  const contenders: Contender[] = ['mysql', 'mysql-tuned', 'sidequest'];
  if (await reachable('postgres')) contenders.push('postgres');
  else notes.push(`PostgreSQL at ${PG_URL} unreachable: no @jobs/postgres column`);

  const version = await (async () => {
    const s = new MysqlJobStore({ uri: MYSQL_URL, connectionLimit: 1 });
    try {
      return (await s.serverVersion()).raw;
    } finally {
      await s.close();
    }
  })();

  console.log('[bench] mysql: single enqueue ...');
  const producers = new Map<Contender, Producer>();
  for (const contender of contenders) producers.set(contender, await openProducer(contender));
  const singleRates = await singleEnqueueRates(contenders, singles, (contender, i) =>
    (producers.get(contender) as Producer).single({ i }),
  );
  for (const [contender, rate] of singleRates) {
    add('enqueue single (jobs/s)', contender, rate, 'jobs/s', true);
    await producers.get(contender)?.close();
  }
  producers.clear();

  await throughputRuns({
    suite: 'mysql',
    contenders,
    name: (contender) => NAMES[contender],
    jobs: (contender) => (contender === 'sidequest' ? sidequestTotal : total),
    open: openProducer,
    drain: throughput,
    // Commands are counted on the MySQL socket: none for the PostgreSQL reference.
    commands: (contender) =>
      contender === 'postgres' ? null : ['worker round trips per job (1 proc)', 'rt'],
    rounds: options.quick ? 1 : undefined,
    parts,
    after: (contender, processes, run) => {
      if (contender !== 'mysql' && contender !== 'mysql-tuned') return;
      const results = run.results as WorkerResult[];
      const sum = (f: (r: WorkerResult) => number): number => results.reduce((a, r) => a + f(r), 0);
      if (sum((r) => r.deadlockRetries + r.lockWaitRetries) === 0) return;
      notes.push(
        `${NAMES[contender]} ${processes} proc: ${sum((r) => r.deadlockRetries)} deadlock retries, ${sum((r) => r.lockWaitRetries)} lock-wait retries`,
      );
    },
  });

  console.log('[bench] mysql: idle cost ...');
  for (const contender of ['mysql', 'sidequest'] as const) {
    add(
      'idle worker: commands/s to the server',
      contender,
      await idleCommands(contender),
      'q/s',
      false,
    );
  }

  if (contenders.includes('mysql')) {
    console.log('[bench] mysql: due-time lateness ...');
    measures.push(...dueTimeMeasures(NAMES.mysql, await dueTimeLateness('mysql', options.quick)));
  }

  console.log('[bench] mysql: pickup latency (all contenders at once) ...');
  const latencyContenders = contenders.filter((c) => c !== 'mysql-tuned');
  for (const contender of latencyContenders)
    producers.set(contender, await openProducer(contender));
  try {
    const samples = await pickupLatency({
      contenders: latencyContenders,
      module: SELF,
      args: (contender) => ({ contender }) satisfies WorkerArgs,
      enqueue: (contender, payload) => (producers.get(contender) as Producer).single(payload),
      count: latencyJobs,
    });
    for (const [contender, { fromCall }] of samples) {
      measures.push(
        ...latencyMeasures(
          NAMES[contender],
          fromCall,
          (p) => `enqueue call → start p${p} at 50/s (ms)`,
        ),
      );
    }
  } finally {
    for (const contender of latencyContenders) await producers.get(contender)?.close();
  }
  for (const contender of contenders) await dropDatabase(contender);
  if (sidequestDeadlocks > 0) {
    notes.push(
      `sidequest: ${sidequestDeadlocks} enqueue(s) retried after a deadlock with its own claim`,
    );
  }

  notes.push(
    `server: ${version}; concurrency ${CONCURRENCY} per worker process; ${total} no-op jobs (Sidequest: ${sidequestTotal}); ${latencyJobs} latency samples at 50/s; ${singles} single enqueues`,
    "@jobs/mysql: MysqlJobStore + JobEngine({ concurrency: 10 }) and nothing else: adaptive batches (up to 2,000: the store's capabilities.batchLimit), wake-ups by reading the end of the primary key every 20 ms (notifyIntervalMs) while idle",
    `@jobs/mysql tuned: the same with prefetch: ${TUNED_PREFETCH} and history: { keep: 'failed' } (completed jobs leave no history record), connectionLimit: 4`,
    `sidequest 1.16.4 + @sidequest/mysql-backend 1.16.4: queue concurrency 10, maxConcurrentJobs 10, runner "inline" and fork: false (no worker threads or child process per job: its fastest documented mode for no-op jobs), jobPollingInterval ${SIDEQUEST_POLL_MS} ms (its default); it claims at most the free slots per poll and has no bulk enqueue (100 concurrent enqueue calls at a time)`,
    '@jobs/postgres: the default configuration on the same machine, the reference for "MySQL ≥ 0.5× our PostgreSQL"',
    'round trips: commands the worker process wrote to the MySQL socket (every client library alike) ÷ jobs; idle: commands per second of a worker with nothing to run, after it settled',
    'ratios: ours ÷ each other; for jobs/s higher is better, for ms, rt, q/s and MiB lower is better',
  );
  const backlog = await backlogSeries({
    suite: 'mysql',
    sizes: options.quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000],
    open: () => openProducer('mysql'),
    drain: (producer, jobs) => throughput('mysql', producer, jobs, 1),
    commands: ['worker round trips per job', 'rt'],
    notes: [
      `one worker process, @jobs/mysql default configuration, concurrency ${CONCURRENCY}; each size on a fresh table (InnoDB keeps sampled statistics of its own; acquisition names its index)`,
    ],
  });
  await dropDatabase('mysql');
  return [{ suite: 'mysql', measures, notes, ours: [NAMES.mysql, NAMES['mysql-tuned']] }, backlog];
}

/** Commands per second of one idle worker: started with nothing to run, counted over 3 s. */
async function idleCommands(contender: 'mysql' | 'sidequest'): Promise<number> {
  const producer = await openProducer(contender);
  try {
    const { results } = await timedWorkerRun<WorkerResult>({
      module: SELF,
      processes: 1,
      args: () => ({ contender, idleWindowMs: 3_000 }),
      finished: () => true,
      timeoutMs: 30_000,
      what: `${contender} idle`,
      // The worker measures its own idle window after `go`; wait for it before `stop`.
      settle: async () => {
        await sleep(4_500);
        return 0;
      },
    });
    return results[0]?.idleRate ?? Number.NaN;
  } finally {
    await producer.close();
  }
}

// ---- worker process -------------------------------------------------------------------------

async function sidequestWorker(
  onJob: (payload: unknown) => void,
): Promise<{ start(): Promise<void>; stop(): Promise<void> }> {
  const { Sidequest } = await import('sidequest');
  globalThis.benchOnJob = onJob;
  return {
    start: async () => {
      await Sidequest.start({
        backend: { driver: '@sidequest/mysql-backend', config: urlOf(DATABASES.sidequest) },
        queues: [{ name: QUEUE, concurrency: CONCURRENCY }],
        maxConcurrentJobs: CONCURRENCY,
        runner: 'inline',
        fork: false,
        skipMigration: true,
        gracefulShutdown: false,
        releaseStaleJobsIntervalMin: false,
        cleanupFinishedJobsIntervalMin: false,
        jobPollingInterval: SIDEQUEST_POLL_MS,
        logger: { level: 'error' },
        dashboard: { enabled: false },
      });
    },
    stop: () => Sidequest.stop(),
  };
}

const isMain =
  process.argv[1] !== undefined && pathToFileURL(process.argv[1]).href === import.meta.url;

if (isMain && process.env.BENCH_WORKER_ARGS !== undefined) {
  const commands = countSocketWrites(MYSQL_PORT);
  serveWorker<WorkerArgs & { idleWindowMs?: number }, WorkerResult>(async (args, io) => {
    const recorder = jobRecorder();
    let store: MysqlJobStore | JobStore | null = null;
    let worker: { start(): Promise<void>; stop(): Promise<void> };
    if (args.contender === 'sidequest') {
      worker = await sidequestWorker(recorder.onJob);
    } else {
      const opened = openStore(args.contender);
      store = opened;
      const engine = new JobEngine({
        store: opened,
        concurrency: CONCURRENCY,
        ...(args.contender === 'mysql-tuned'
          ? { prefetch: TUNED_PREFETCH, history: TUNED_HISTORY }
          : {}),
        logger: silentLogger,
        handlers: { [QUEUE]: async (job) => recorder.onJob(job.payload) },
      });
      await opened.now();
      worker = { start: () => engine.start(), stop: () => engine.stop({ timeoutMs: 5_000 }) };
    }
    let idleRate = Number.NaN;
    const idleWindowMs = args.idleWindowMs;
    const stats = await measuredWork(
      io,
      worker,
      recorder,
      commands,
      idleWindowMs
        ? async () => {
            // Idle cost: skip startup, then count over the window.
            await sleep(1_000);
            const from = commands();
            await sleep(idleWindowMs);
            idleRate = ((commands() - from) / idleWindowMs) * 1000;
          }
        : undefined,
    );
    const retries =
      store instanceof MysqlJobStore
        ? store.retryStats
        : { deadlockRetries: 0, lockWaitRetries: 0 };
    await store?.close();
    return { ...stats, idleRate, ...retries };
  });
} else if (isMain) {
  const quick = process.argv.includes('--quick');
  runMysqlBench({ quick }).then(
    (reports) => {
      for (const report of reports) printReport(report);
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
