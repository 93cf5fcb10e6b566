/**
 * PostgreSQL suite: @jobs/postgres vs graphile-worker (0.16.6) and pg-boss (10.4.2) on the same
 * database, each in its own schema, same concurrency, one run:
 * - throughput: 20,000 no-op jobs enqueued up front (bulk), then 1 and 2 worker processes at
 *   concurrency 10 run them; time from "go" until every job ran and is marked done in the
 *   database;
 * - pickup latency: one worker process, jobs enqueued one by one at 50/s from another process;
 *   enqueue-call start → handler start, p50/p95/p99;
 * - single enqueue rate (sequential awaited calls) and bulk enqueue rate (batches of 1,000).
 */
import { fileURLToPath } from 'node:url';
import { JobEngine } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { makeWorkerUtils, runMigrations } from 'graphile-worker';
import pg from 'pg';
import PgBoss from 'pg-boss';
import {
  type BenchOptions,
  type BenchReport,
  dropPostgresSchemas,
  enqueueInBatches,
  latencyMeasures,
  pickupLatency,
  reportParts,
  serverSuiteSizes,
  singleEnqueueRates,
  sleep,
  timedWorkerRun,
} from './harness.js';
import type { Contender, PgWorkerArgs, PgWorkerResult } from './peers/pg-worker.js';

const URL_ = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const WORKER = fileURLToPath(new URL('./peers/pg-worker.ts', import.meta.url));
const CONCURRENCY = 10;
const QUEUE = 'noop';
const SCHEMAS: Record<Contender, string> = {
  ours: 'bench_jobs',
  'graphile-worker': 'bench_graphile',
  'pg-boss': 'bench_pgboss',
};
const ALL_CONTENDERS: Contender[] = ['ours', 'graphile-worker', 'pg-boss'];
/** `BENCH_PG_CONTENDERS=ours,pg-boss` runs a subset (default: all three). */
const CONTENDERS: Contender[] = process.env.BENCH_PG_CONTENDERS
  ? ALL_CONTENDERS.filter((c) => process.env.BENCH_PG_CONTENDERS?.split(',').includes(c))
  : ALL_CONTENDERS;
/** Our engine's in-memory prefetch beyond `concurrency`: batches of up to 500 (the batch size lever, see DESIGN.md). */
const OURS_PREFETCH = 490;
/** pg-boss jobs fetched per poll by each of its `concurrency` workers. */
const PGBOSS_BATCH = 500;

/** Enqueue-side client of one contender, in this (parent) process. */
interface Producer {
  single(payload: object): Promise<void>;
  bulk(payloads: object[]): Promise<void>;
  /** Jobs not finished yet (waiting or running). */
  remaining(): Promise<number>;
  close(): Promise<void>;
}

async function resetSchema(contender: Contender): Promise<void> {
  await dropPostgresSchemas(URL_, [SCHEMAS[contender]]);
}

async function openProducer(contender: Contender): Promise<Producer> {
  const schema = SCHEMAS[contender];
  if (contender === 'ours') {
    const store = new PostgresJobStore({ connectionString: URL_, schema, max: 4 });
    await store.migrate();
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
      // graphile-worker's bulk API (0.16) is the `add_jobs` SQL function.
      bulk: async (payloads) => {
        await pool.query(
          `SELECT "${schema}".add_jobs(array(
             SELECT json_populate_recordset(null::"${schema}".job_spec, $1::json)))`,
          [JSON.stringify(payloads.map((payload) => ({ identifier: QUEUE, payload })))],
        );
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
  await boss.createQueue(QUEUE);
  const pool = new pg.Pool({ connectionString: URL_, max: 1 });
  return {
    single: async (payload) => {
      await boss.send(QUEUE, payload);
    },
    bulk: async (payloads) => {
      await boss.insert(payloads.map((data) => ({ name: QUEUE, data })));
    },
    remaining: async () => {
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM "${schema}".job WHERE state IN ('created', 'retry', 'active')`,
      );
      return rows[0].n as number;
    },
    close: async () => {
      await boss.stop({ graceful: false, wait: true });
      await pool.end();
    },
  };
}

/** The contender's column in the report. */
function nameOf(contender: Contender): string {
  return contender === 'ours' ? '@jobs/postgres' : contender;
}

function workerArgs(contender: Contender): PgWorkerArgs {
  return {
    contender,
    url: URL_,
    schema: SCHEMAS[contender],
    concurrency: CONCURRENCY,
    prefetch: OURS_PREFETCH,
    pgBossBatchSize: PGBOSS_BATCH,
    queue: QUEUE,
  };
}

/** Runs `total` pre-enqueued jobs with `processes` workers; returns jobs/s. */
async function throughput(
  contender: Contender,
  producer: Producer,
  total: number,
  processes: number,
): Promise<{ rate: number; ran: number; roundTripsPerJob: number; left: number }> {
  let left = 0;
  const { ms, results } = await timedWorkerRun<PgWorkerResult>({
    module: WORKER,
    processes,
    args: () => workerArgs(contender),
    finished: (ran) => ran >= total,
    timeoutMs: 120_000,
    what: `${contender} ran ${total} jobs`,
    // Done means done in the database: wait (workers still running) until no job is left
    // waiting, running or uncompleted, and count that time.
    settle: async (handlersMs, elapsed) => {
      left = await producer.remaining();
      const settleBy = Date.now() + 30_000;
      while (left > 0 && Date.now() < settleBy) {
        await sleep(20);
        left = await producer.remaining();
      }
      return left === 0 ? elapsed.ms() : handlersMs;
    },
  });
  const ran = results.reduce((a, r) => a + r.count, 0);
  const queries = results.reduce((a, r) => a + r.queries, 0);
  return { rate: (total / ms) * 1000, ran, roundTripsPerJob: queries / total, left };
}

/** Runs the PostgreSQL suite; see the file header. */
export async function runPostgresBench(options: BenchOptions): Promise<BenchReport> {
  const { total, latencyJobs, singles } = serverSuiteSizes(options);
  const { measures, notes, add } = reportParts(nameOf);

  // Reachability first, with a clear message.
  const probe = new pg.Client({ connectionString: URL_, connectionTimeoutMillis: 2_000 });
  await probe.connect();
  await probe.end();

  const producers = new Map<Contender, Producer>();
  const reopen = async (contender: Contender): Promise<Producer> => {
    await producers.get(contender)?.close();
    await resetSchema(contender);
    const producer = await openProducer(contender);
    producers.set(contender, producer);
    return producer;
  };
  try {
    for (const contender of CONTENDERS) await reopen(contender);

    // Single enqueue: sequential awaited calls (as an app enqueues one job per request),
    // interleaved in rounds so every contender sees the same disk (fsync) conditions.
    console.log('[bench] postgres: single enqueue ...');
    const singleRates = await singleEnqueueRates(CONTENDERS, singles, (contender, i) =>
      (producers.get(contender) as Producer).single({ i }),
    );
    for (const [contender, rate] of singleRates) {
      add('enqueue single (jobs/s)', contender, rate, 'jobs/s', true);
    }

    // Throughput: the machine belongs to one contender at a time.
    for (const contender of CONTENDERS) {
      for (const processes of [1, 2]) {
        console.log(`[bench] postgres: ${contender} throughput, ${processes} process(es) ...`);
        const producer = await reopen(contender);
        const bulkMs = await enqueueInBatches(total, (payloads) => producer.bulk(payloads));
        if (processes === 1) {
          add(
            'enqueue bulk, batches of 1,000 (jobs/s)',
            contender,
            (total / bulkMs) * 1000,
            'jobs/s',
            true,
          );
        }
        const { rate, ran, roundTripsPerJob, left } = await throughput(
          contender,
          producer,
          total,
          processes,
        );
        if (processes === 1) {
          add('worker round trips per job (1 proc)', contender, roundTripsPerJob, 'rt', false);
        }
        if (left > 0) {
          notes.push(
            `${contender}: ${processes} proc: ${left} job(s) still not marked done 30 s after all handlers ran (rate counts handler runs only)`,
          );
        }
        add(
          `throughput ${processes} proc × ${CONCURRENCY} (jobs/s)`,
          contender,
          rate,
          'jobs/s',
          true,
        );
        if (ran !== total) {
          notes.push(`${contender}: ${processes} proc ran ${ran} handler calls for ${total} jobs`);
        }
      }
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
          nameOf(contender),
          fromCall,
          (p) => `enqueue call → start p${p} at 50/s (ms)`,
        ),
        ...latencyMeasures(
          nameOf(contender),
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
    `same database, own schema each; concurrency ${CONCURRENCY} per worker process; ${total} no-op jobs; ${latencyJobs} latency samples; ${singles} single enqueues`,
    `@jobs/postgres: JobEngine concurrency ${CONCURRENCY}, prefetch ${OURS_PREFETCH}, completeAndAcquire batching, LISTEN/NOTIFY`,
    'graphile-worker 0.16.6: concurrency 10, preparedStatements, LISTEN/NOTIFY (localQueue and batched completion only exist from 0.17)',
    `pg-boss 10.4.2: ${CONCURRENCY} work() registrations × batchSize ${PGBOSS_BATCH}, pollingIntervalSeconds 0.5 (its minimum; no cross-process notify)`,
    'ratios: for jobs/s higher is better, for ms lower is better',
  );
  return { suite: 'postgres', measures, notes };
}
