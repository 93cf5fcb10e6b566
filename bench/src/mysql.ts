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
  type BenchMeasure,
  type BenchOptions,
  type BenchReport,
  paced,
  printReport,
  serveWorker,
  sleep,
  spawnWorkers,
  startTimer,
  summarize,
  waitUntil,
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
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${PG_SCHEMA}" CASCADE`);
  } finally {
    await client.end();
  }
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

async function throughput(
  contender: Contender,
  total: number,
  processes: number,
): Promise<{ rate: number; worker: WorkerResult[] }> {
  const workers = spawnWorkers(
    processes,
    SELF,
    (): WorkerArgs => ({
      contender,
      concurrency: CONCURRENCY,
      prefetch: PREFETCH,
      pollIntervalMs: 1_000,
    }),
  );
  try {
    await Promise.all(workers.map((w) => w.waitFor('ready')));
    const counts = workers.map(() => 0);
    workers.forEach((w, i) => {
      void (async () => {
        for (;;) counts[i] = await w.waitFor<number>('progress');
      })();
    });
    const timer = startTimer();
    for (const w of workers) w.send('go');
    await waitUntil(
      () => counts.reduce((a, b) => a + b, 0) >= total,
      180_000,
      `${contender} ran ${total} jobs`,
      5,
    );
    const ms = timer.ms();
    for (const w of workers) w.send('stop');
    const results = (await Promise.all(workers.map((w) => w.result))) as WorkerResult[];
    return { rate: (total / ms) * 1000, worker: results };
  } finally {
    for (const w of workers) w.kill();
  }
}

async function latency(
  contender: Contender,
  producer: Producer,
  count: number,
  pollIntervalMs: number,
): Promise<number[]> {
  const [worker] = spawnWorkers(
    1,
    SELF,
    (): WorkerArgs => ({
      contender,
      concurrency: CONCURRENCY,
      prefetch: PREFETCH,
      pollIntervalMs,
    }),
  );
  if (!worker) throw new Error('no worker');
  try {
    await worker.waitFor('ready');
    worker.send('go');
    await sleep(1_000);
    const called = new Map<number, number>();
    await paced(count, 50, async (n) => {
      called.set(n, Date.now());
      await producer.client.enqueue(QUEUE, { n });
    });
    await waitUntil(
      async () => (await worker.waitFor<number>('progress')) >= count,
      30_000,
      `${contender} latency jobs ran`,
      0,
    );
    worker.send('stop');
    const { starts } = (await worker.result) as WorkerResult;
    return starts.map(([n, started]) => started - (called.get(n) ?? started));
  } finally {
    worker.kill();
  }
}

/** Runs the MySQL suite; see the file header. */
export async function runMysqlBench(
  options: BenchOptions = { quick: false },
): Promise<BenchReport> {
  const total = options.quick ? 5_000 : 20_000;
  const latencyJobs = options.quick ? 100 : 300;
  const singles = options.quick ? 500 : 2_000;
  const measures: BenchMeasure[] = [];
  const notes: string[] = [];
  const add = (
    metric: string,
    contender: Contender,
    value: number,
    unit: string,
    higherIsBetter: boolean,
  ): void => {
    measures.push({ metric, contender: NAMES[contender], value, unit, higherIsBetter });
  };

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
  const singleMs = new Map<Contender, number>(contenders.map((c) => [c, 0]));
  const rounds = 5;
  for (let r = 0; r < rounds; r++) {
    for (const contender of contenders) {
      const producer = producers.get(contender) as Producer;
      const t = startTimer();
      for (let i = 0; i < singles / rounds; i++) await producer.client.enqueue(QUEUE, { i });
      singleMs.set(contender, (singleMs.get(contender) ?? 0) + t.ms());
    }
  }
  for (const contender of contenders) {
    add(
      'enqueue single (jobs/s)',
      contender,
      (singles / (singleMs.get(contender) ?? 1)) * 1000,
      'jobs/s',
      true,
    );
    await producers.get(contender)?.close();
  }

  for (const processes of [1, 2]) {
    for (const contender of contenders) {
      console.log(
        `[bench] mysql suite: ${NAMES[contender]} throughput, ${processes} process(es) ...`,
      );
      const producer = await openProducer(contender);
      const t = startTimer();
      for (let i = 0; i < total; i += 1_000) {
        await producer.client.enqueueMany(
          Array.from({ length: Math.min(1_000, total - i) }, (_, k) => ({
            type: QUEUE,
            payload: { i: i + k },
          })),
        );
      }
      if (processes === 1) {
        add(
          'enqueue bulk, batches of 1,000 (jobs/s)',
          contender,
          (total / t.ms()) * 1000,
          'jobs/s',
          true,
        );
      }
      const { rate, worker } = await throughput(contender, total, processes);
      add(
        `throughput ${processes} proc × ${CONCURRENCY} (jobs/s)`,
        contender,
        rate,
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
    const samples = await latency(contender, producer, latencyJobs, 1_000);
    const s = summarize(samples);
    add('enqueue call → start p50 at 50/s (ms)', contender, s.p50, 'ms', false);
    add('enqueue call → start p95 at 50/s (ms)', contender, s.p95, 'ms', false);
    add('enqueue call → start p99 at 50/s (ms)', contender, s.p99, 'ms', false);
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
    io.send('ready');
    await io.waitFor('go');
    await engine.start();
    const progress = setInterval(() => io.send('progress', count), 20);
    await io.waitFor('stop');
    clearInterval(progress);
    await engine.stop({ timeoutMs: 5_000 });
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
