/**
 * MySQL/MariaDB suite: @jobs/mysql, next to @jobs/postgres measured the same way in the same run
 * (when PostgreSQL is reachable), so the ratio column reads "mysql ÷ postgres" (target ≥ 0.5×
 * for throughput).
 * - throughput: 20,000 no-op jobs enqueued up front (bulk), then 1 and 2 worker processes with a
 *   JobEngine at concurrency 10 run them; time from "go" until every job ran;
 * - pickup latency: one worker process, jobs enqueued one by one at 50/s from this process;
 *   enqueue-call start → handler start, p50/p95/p99 (MySQL has no NOTIFY: other processes find
 *   new jobs by adaptive polling);
 * - single enqueue rate (sequential awaited calls) and bulk enqueue rate (batches of 1,000).
 *
 * Runnable alone: `npx tsx bench/src/mysql.ts [--quick]` (build the packages first). This file is
 * also the worker process (started by `spawnWorkers` with BENCH_WORKER_ARGS set).
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import { JobEngine, type JobStore } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import {
  type BenchOptions,
  type BenchReport,
  dropPostgresSchemas,
  enqueueInBatches,
  latencyMeasures,
  pickupLatency,
  printReport,
  reportParts,
  serverSuiteSizes,
  serveWorker,
  singleEnqueueRates,
  timedWorkerRun,
  waitUntil,
  workUntilStopped,
} from './harness.js';

const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SELF = fileURLToPath(import.meta.url);
const CONCURRENCY = 10;
/** Jobs leased beyond `concurrency` (the batch size lever, see DESIGN.md), as in the pg suite. */
const PREFETCH = 190;
const QUEUE = 'noop';
const MYSQL_DATABASE = 'jobs_bench_mysql';
const PG_SCHEMA = 'bench_jobs_vs_mysql';

type Contender = 'mysql' | 'postgres';
const NAMES: Record<Contender, string> = { mysql: '@jobs/mysql', postgres: '@jobs/postgres' };

interface WorkerArgs {
  contender: Contender;
  concurrency: number;
  prefetch: number;
  /** Engine idle polling bound; MySQL has no wake-ups from other processes. */
  pollIntervalMs: number;
}

interface WorkerResult {
  count: number;
  starts: [number, number][];
  deadlockRetries: number;
  lockWaitRetries: number;
}

function openStore(contender: Contender, poolSize = 4): JobStore {
  return contender === 'mysql'
    ? new MysqlJobStore({ uri: MYSQL_URL, database: MYSQL_DATABASE, connectionLimit: poolSize })
    : new PostgresJobStore({ connectionString: PG_URL, schema: PG_SCHEMA, max: poolSize });
}

async function resetDatabase(contender: Contender): Promise<void> {
  if (contender === 'mysql') {
    const connection = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      await connection.query(`DROP DATABASE IF EXISTS \`${MYSQL_DATABASE}\``);
      await connection.query(`CREATE DATABASE \`${MYSQL_DATABASE}\``);
    } finally {
      await connection.end();
    }
    return;
  }
  await dropPostgresSchemas(PG_URL, [PG_SCHEMA]);
}

async function dropDatabase(contender: Contender): Promise<void> {
  if (contender === 'mysql') {
    const connection = await mysql.createConnection({ uri: MYSQL_URL });
    await connection
      .query(`DROP DATABASE IF EXISTS \`${MYSQL_DATABASE}\``)
      .finally(() => connection.end());
    return;
  }
  await resetDatabase('postgres');
}

async function reachable(contender: Contender): Promise<boolean> {
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

interface Producer {
  store: JobStore;
  client: JobEngine;
  remaining(): Promise<number>;
  close(): Promise<void>;
}

async function openProducer(contender: Contender): Promise<Producer> {
  await resetDatabase(contender);
  const store = openStore(contender);
  await store.migrate();
  const client = new JobEngine({ store });
  return {
    store,
    client,
    remaining: async () => (await store.stats()).reduce((sum, row) => sum + row.count, 0),
    close: () => store.close(),
  };
}

function workerArgs(contender: Contender, pollIntervalMs: number): WorkerArgs {
  return { contender, concurrency: CONCURRENCY, prefetch: PREFETCH, pollIntervalMs };
}

/** Runs the MySQL suite; see the file header. */
export async function runMysqlBench(
  options: BenchOptions = { quick: false },
): Promise<BenchReport> {
  const { total, latencyJobs, singles } = serverSuiteSizes(options);
  const { measures, notes, add } = reportParts((contender: Contender) => NAMES[contender]);

  if (!(await reachable('mysql'))) {
    throw new Error(
      `MySQL/MariaDB at ${MYSQL_URL} is unreachable (start it: service mariadb start)`,
    );
  }
  const contenders: Contender[] = ['mysql'];
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

  // Contenders take turns in every phase, so both see the same machine and disk conditions.
  console.log('[bench] mysql suite: single enqueue ...');
  const producers = new Map<Contender, Producer>();
  for (const contender of contenders) producers.set(contender, await openProducer(contender));
  const singleRates = await singleEnqueueRates(contenders, singles, (contender, i) =>
    (producers.get(contender) as Producer).client.enqueue(QUEUE, { i }),
  );
  for (const [contender, rate] of singleRates) {
    add('enqueue single (jobs/s)', contender, rate, 'jobs/s', true);
    await producers.get(contender)?.close();
  }

  for (const processes of [1, 2]) {
    for (const contender of contenders) {
      console.log(
        `[bench] mysql suite: ${NAMES[contender]} throughput, ${processes} process(es) ...`,
      );
      const producer = await openProducer(contender);
      const bulkMs = await enqueueInBatches(total, (payloads) =>
        producer.client.enqueueMany(payloads.map((payload) => ({ type: QUEUE, payload }))),
      );
      if (processes === 1) {
        add(
          'enqueue bulk, batches of 1,000 (jobs/s)',
          contender,
          (total / bulkMs) * 1000,
          'jobs/s',
          true,
        );
      }
      const { ms, results: worker } = await timedWorkerRun<WorkerResult>({
        module: SELF,
        processes,
        args: () => workerArgs(contender, 1_000),
        finished: (ran) => ran >= total,
        timeoutMs: 180_000,
        what: `${contender} ran ${total} jobs`,
      });
      add(
        `throughput ${processes} proc × ${CONCURRENCY} (jobs/s)`,
        contender,
        (total / ms) * 1000,
        'jobs/s',
        true,
      );
      const ran = worker.reduce((a, r) => a + r.count, 0);
      if (ran !== total)
        notes.push(
          `${NAMES[contender]}: ${processes} proc ran ${ran} handler calls for ${total} jobs`,
        );
      if (contender === 'mysql') {
        const deadlocks = worker.reduce((a, r) => a + r.deadlockRetries, 0);
        const waits = worker.reduce((a, r) => a + r.lockWaitRetries, 0);
        notes.push(
          `@jobs/mysql ${processes} proc: ${deadlocks} deadlock retries, ${waits} lock-wait retries`,
        );
      }
      await waitUntil(
        async () => (await producer.remaining()) === 0,
        30_000,
        `${contender} drained`,
      );
      await producer.close();
    }
  }

  for (const contender of contenders) {
    console.log(`[bench] mysql suite: ${NAMES[contender]} pickup latency ...`);
    const producer = await openProducer(contender);
    const samples = await pickupLatency({
      contenders: [contender],
      module: SELF,
      args: (c) => workerArgs(c, 1_000),
      enqueue: (_, payload) => producer.client.enqueue(QUEUE, payload),
      count: latencyJobs,
    });
    measures.push(
      ...latencyMeasures(
        NAMES[contender],
        samples.get(contender)?.fromCall ?? [],
        (p) => `enqueue call → start p${p} at 50/s (ms)`,
      ),
    );
    await producer.close();
    await dropDatabase(contender);
  }
  notes.push(
    `server: ${version}; ${total} no-op jobs; JobEngine concurrency ${CONCURRENCY}, prefetch ${PREFETCH} per process; ${latencyJobs} latency samples at 50/s; ${singles} single enqueues`,
    '@jobs/mysql has no cross-process wake-up (no NOTIFY): the worker finds jobs by adaptive polling (25 ms after work, backing off to pollIntervalMs 1 s); @jobs/postgres uses LISTEN/NOTIFY',
    'ratios: mysql ÷ postgres; for jobs/s higher is better, for ms lower is better',
  );
  return { suite: 'mysql', measures, notes };
}

// ---- worker process -------------------------------------------------------------------------

const isMain =
  process.argv[1] !== undefined && pathToFileURL(process.argv[1]).href === import.meta.url;

if (isMain && process.env.BENCH_WORKER_ARGS !== undefined) {
  serveWorker<WorkerArgs, WorkerResult>(async (args, io) => {
    let count = 0;
    const starts: [number, number][] = [];
    const store = openStore(args.contender);
    const engine = new JobEngine({
      store,
      concurrency: args.concurrency,
      prefetch: args.prefetch,
      leaseMs: 30_000,
      pollIntervalMs: args.pollIntervalMs,
      handlers: {
        [QUEUE]: async (job) => {
          count++;
          const n = (job.payload as { n?: number } | null)?.n;
          if (typeof n === 'number') starts.push([n, Date.now()]);
        },
      },
    });
    await store.now();
    await workUntilStopped(io, {
      start: () => engine.start(),
      stop: () => engine.stop({ timeoutMs: 5_000 }),
      count: () => count,
    });
    const retries =
      store instanceof MysqlJobStore
        ? store.retryStats
        : { deadlockRetries: 0, lockWaitRetries: 0 };
    await store.close();
    return { count, starts, ...retries };
  });
} else if (isMain) {
  const quick = process.argv.includes('--quick');
  runMysqlBench({ quick }).then(
    (report) => printReport(report),
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
