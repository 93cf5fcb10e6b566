/**
 * PostgreSQL suite: @jobs/postgres in its default configuration (no prefetch option: adaptive
 * batches) and tuned (a fixed prefetch), against graphile-worker 0.18 and pg-boss 12 each in
 * the fastest configuration its documentation gives, on the same database, each in its own
 * schema, every worker process at concurrency 10:
 * - throughput: no-op jobs enqueued up front (bulk), then 1 and 2 worker processes run them;
 *   time from "go" until every job ran and is done in the database; round trips per job and
 *   the worker's peak RSS;
 * - pickup latency: one worker process per contender, all at once, jobs enqueued one by one at
 *   50/s from this process; enqueue-call start → handler start, p50/p95/p99;
 * - single and bulk enqueue;
 * - backlog series (ours, default configuration): 10k, 100k and 1M jobs enqueued up front on a
 *   fresh table that is never analysed (autovacuum off for it), drained by one worker process.
 */
import { fileURLToPath } from 'node:url';
import { JobEngine } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { makeWorkerUtils, runMigrations } from 'graphile-worker';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { dueTimeLateness, dueTimeMeasures } from './due-time.js';
import {
  type BenchOptions,
  type BenchReport,
  backlogSeries,
  type DrainResult,
  drainWithWorkers,
  dropPostgresSchemas,
  latencyMeasures,
  type Producer,
  pickupLatency,
  reportParts,
  serverSuiteSizes,
  singleEnqueueRates,
  throughputRuns,
} from './harness.js';
import type { Contender, PgWorkerArgs, PgWorkerResult } from './peers/pg-worker.js';

const URL_ = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const WORKER = fileURLToPath(new URL('./peers/pg-worker.ts', import.meta.url));
const CONCURRENCY = 10;
const QUEUE = 'noop';
const SCHEMAS: Record<Contender, string> = {
  ours: 'bench_jobs',
  'ours-tuned': 'bench_jobs_tuned',
  'graphile-worker': 'bench_graphile',
  'pg-boss': 'bench_pgboss',
};
const NAMES: Record<Contender, string> = {
  ours: '@jobs/postgres',
  'ours-tuned': '@jobs/postgres tuned',
  'graphile-worker': 'graphile-worker',
  'pg-boss': 'pg-boss',
};
const ALL_CONTENDERS: Contender[] = ['ours', 'ours-tuned', 'graphile-worker', 'pg-boss'];
/** `BENCH_PG_CONTENDERS=ours,pg-boss` runs a subset (default: all). */
const CONTENDERS: Contender[] = process.env.BENCH_PG_CONTENDERS
  ? ALL_CONTENDERS.filter((c) => process.env.BENCH_PG_CONTENDERS?.split(',').includes(c))
  : ALL_CONTENDERS;
/** Our tuned configuration: a fixed prefetch, batches of up to 1,000 from the first one. */
const TUNED_PREFETCH = 990;
/** graphile-worker's `localQueue.size`, as on its Performance page. */
const GRAPHILE_LOCAL_QUEUE = 500;
/** pg-boss jobs fetched per poll by each of its `localConcurrency` pollers. */
const PGBOSS_BATCH = 50;

async function resetSchema(contender: Contender): Promise<void> {
  await dropPostgresSchemas(URL_, [SCHEMAS[contender]]);
}

async function openProducer(contender: Contender): Promise<Producer> {
  const schema = SCHEMAS[contender];
  if (contender === 'ours' || contender === 'ours-tuned') {
    const store = new PostgresJobStore({ connectionString: URL_, schema, max: 4 });
    await store.migrate();
    // The table is never analysed while the bench uses it (see the backlog series).
    await store.pool.query(`ALTER TABLE "${schema}".jobs SET (autovacuum_enabled = false)`);
    const client = new JobEngine({ store });
    return {
      single: async (payload) => {
        await client.enqueue(QUEUE, payload);
      },
      bulk: async (payloads) => {
        await client.enqueueMany(payloads.map((payload) => ({ type: QUEUE, payload })));
      },
      remaining: async () => {
        const { rows } = await store.pool.query(`SELECT count(*)::int AS n FROM "${schema}".jobs`);
        return rows[0].n as number;
      },
      close: () => store.close(),
    };
  }
  if (contender === 'graphile-worker') {
    await runMigrations({ connectionString: URL_, schema });
    const utils = await makeWorkerUtils({ connectionString: URL_, schema });
    const pool = new pg.Pool({ connectionString: URL_, max: 2 });
    return {
      single: async (payload) => {
        await utils.addJob(QUEUE, payload);
      },
      bulk: async (payloads) => {
        await utils.addJobs(payloads.map((payload) => ({ identifier: QUEUE, payload })));
      },
      remaining: async () => {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM "${schema}"._private_jobs`,
        );
        return rows[0].n as number;
      },
      close: async () => {
        await utils.release();
        await pool.end();
      },
    };
  }
  const boss = new PgBoss({
    connectionString: URL_,
    schema,
    max: 4,
    supervise: false,
    schedule: false,
  });
  boss.on('error', () => {});
  await boss.start();
  await boss.createQueue(QUEUE, { notify: true });
  const pool = new pg.Pool({ connectionString: URL_, max: 1 });
  return {
    single: async (payload) => {
      await boss.send(QUEUE, payload);
    },
    bulk: async (payloads) => {
      await boss.insert(
        QUEUE,
        payloads.map((data) => ({ data })),
      );
    },
    remaining: async () => {
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM "${schema}".job WHERE state IN ('created', 'retry', 'active')`,
      );
      return rows[0].n as number;
    },
    close: async () => {
      await boss.stop({ graceful: false });
      await pool.end();
    },
  };
}

function workerArgs(contender: Contender): PgWorkerArgs {
  return {
    contender,
    url: URL_,
    schema: SCHEMAS[contender],
    concurrency: CONCURRENCY,
    prefetch: contender === 'ours-tuned' ? TUNED_PREFETCH : null,
    graphileLocalQueue: GRAPHILE_LOCAL_QUEUE,
    pgBossBatchSize: PGBOSS_BATCH,
    queue: QUEUE,
  };
}

/** Runs `total` pre-enqueued jobs with `processes` workers. */
function throughput(
  contender: Contender,
  producer: Producer,
  total: number,
  processes: number,
): Promise<DrainResult> {
  return drainWithWorkers<PgWorkerResult>({
    module: WORKER,
    processes,
    args: () => workerArgs(contender),
    total,
    remaining: () => producer.remaining(),
    what: `${NAMES[contender]}: ${processes} process(es) ran ${total} jobs`,
  });
}

/** When the table was last analysed (by hand or autovacuum), or `never`. */
async function lastAnalysed(schema: string): Promise<string> {
  const client = new pg.Client({ connectionString: URL_ });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT greatest(last_analyze, last_autoanalyze) AS at FROM pg_stat_user_tables
       WHERE schemaname = $1 AND relname = 'jobs'`,
      [schema],
    );
    return rows[0]?.at ? String(rows[0].at) : 'never';
  } finally {
    await client.end();
  }
}

/** Runs the PostgreSQL suite; see the file header. */
export async function runPostgresBench(options: BenchOptions): Promise<BenchReport[]> {
  const { total, latencyJobs, singles } = serverSuiteSizes(options);
  const parts = reportParts((c: Contender) => NAMES[c]);
  const { measures, notes, add } = parts;

  // Reachability first, with a clear message.
  const probe = new pg.Client({ connectionString: URL_, connectionTimeoutMillis: 2_000 });
  await probe.connect();
  const version = (await probe.query('SHOW server_version')).rows[0]?.server_version as string;
  await probe.end();

  const producers = new Map<Contender, Producer>();
  const reopen = async (contender: Contender): Promise<Producer> => {
    await producers.get(contender)?.close();
    producers.delete(contender);
    await resetSchema(contender);
    const producer = await openProducer(contender);
    producers.set(contender, producer);
    return producer;
  };
  try {
    for (const contender of CONTENDERS) await reopen(contender);

    console.log('[bench] postgres: single enqueue ...');
    const singleRates = await singleEnqueueRates(CONTENDERS, singles, (contender, i) =>
      (producers.get(contender) as Producer).single({ i }),
    );
    for (const [contender, rate] of singleRates) {
      add('enqueue single (jobs/s)', contender, rate, 'jobs/s', true);
    }

    for (const contender of CONTENDERS) {
      await producers.get(contender)?.close();
      producers.delete(contender);
    }

    await throughputRuns({
      suite: 'postgres',
      contenders: CONTENDERS,
      name: (contender) => NAMES[contender],
      jobs: () => total,
      open: async (contender) => {
        await resetSchema(contender);
        return openProducer(contender);
      },
      drain: throughput,
      commands: () => ['worker round trips per job (1 proc)', 'rt'],
      rounds: options.quick ? 1 : undefined,
      parts,
    });

    if (CONTENDERS.includes('ours')) {
      console.log('[bench] postgres: due-time lateness ...');
      measures.push(
        ...dueTimeMeasures(NAMES.ours, await dueTimeLateness('postgres', options.quick)),
      );
    }

    console.log('[bench] postgres: pickup latency (all contenders at once) ...');
    for (const contender of CONTENDERS) await reopen(contender);
    const samples = await pickupLatency({
      contenders: CONTENDERS,
      module: WORKER,
      args: workerArgs,
      enqueue: (contender, payload) => (producers.get(contender) as Producer).single(payload),
      count: latencyJobs,
    });
    for (const [contender, { fromCall, fromCommit }] of samples) {
      measures.push(
        ...latencyMeasures(
          NAMES[contender],
          fromCall,
          (p) => `enqueue call → start p${p} at 50/s (ms)`,
        ),
        ...latencyMeasures(
          NAMES[contender],
          fromCommit,
          (p) => `commit ack → start p${p} at 50/s (ms)`,
          [50, 99],
        ),
      );
    }
  } finally {
    for (const contender of CONTENDERS) {
      await producers.get(contender)?.close();
      await resetSchema(contender);
    }
  }
  notes.push(
    `PostgreSQL ${version}; same database, own schema each; concurrency ${CONCURRENCY} per worker process; ${total} no-op jobs; ${latencyJobs} latency samples; ${singles} single enqueues`,
    '@jobs/postgres: new PostgresJobStore({ connectionString, schema }) and JobEngine({ concurrency: 10 }), nothing else (pool of 10): adaptive batches (up to 1,000), completions written beside acquisitions on a second pooled connection, LISTEN/NOTIFY',
    `@jobs/postgres tuned: the same with prefetch: ${TUNED_PREFETCH} (batches of up to ${TUNED_PREFETCH + CONCURRENCY} from the first acquisition) and history: { keep: 'failed' } (completed jobs leave no history record), pool max: 4`,
    `graphile-worker 0.18.0: concurrency 10, maxPoolSize 12, prepared statements, localQueue { size: ${GRAPHILE_LOCAL_QUEUE} }, completeJobBatchDelay 0, failJobBatchDelay 0 (its Performance page); bulk enqueue with addJobs`,
    `pg-boss 12.38.0: useListenNotify + queue notify: true, work() with localConcurrency 10 × batchSize ${PGBOSS_BATCH}, burstWhenBatchFull, polling 0.5 s (its minimum); bulk enqueue with insert()`,
    'round trips: statements the worker process sent on every connection (counted at pg.Client#query) ÷ jobs',
    'ratios: for jobs/s higher is better, for ms, rt and MiB lower is better',
  );
  const backlog = CONTENDERS.includes('ours')
    ? [
        await backlogSeries({
          suite: 'postgres',
          sizes: options.quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000],
          open: async () => {
            await resetSchema('ours');
            return openProducer('ours');
          },
          drain: (producer, jobs) => throughput('ours', producer, jobs, 1),
          commands: ['worker round trips per job', 'rt'],
          describe: async () => `table analysed: ${await lastAnalysed(SCHEMAS.ours)}`,
          notes: [
            `one worker process, @jobs/postgres default configuration (adaptive prefetch), concurrency ${CONCURRENCY}; each size on a fresh table with autovacuum off, so it is never analysed (nor vacuumed) while it drains`,
          ],
        }),
      ]
    : [];
  await resetSchema('ours');
  return [
    {
      suite: 'postgres',
      measures,
      notes,
      ours: [NAMES.ours, NAMES['ours-tuned']],
    },
    ...backlog,
  ];
}
