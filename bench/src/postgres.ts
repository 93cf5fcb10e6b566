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
  type BenchMeasure,
  type BenchOptions,
  type BenchReport,
  paced,
  sleep,
  spawnWorkers,
  startTimer,
  summarize,
  type WorkerHandle,
  waitUntil,
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
  const client = new pg.Client({ connectionString: URL_ });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${SCHEMAS[contender]}" CASCADE`);
  } finally {
    await client.end();
  }
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
  const workers = spawnWorkers(processes, WORKER, () => workerArgs(contender));
  try {
    await Promise.all(workers.map((w) => w.waitFor('ready')));
    const counts = workers.map(() => 0);
    workers.forEach((w, i) => {
      const track = async (): Promise<void> => {
        for (;;) {
          counts[i] = await w.waitFor<number>('progress');
        }
      };
      void track();
    });
    const timer = startTimer();
    for (const w of workers) w.send('go');
    await waitUntil(
      () => counts.reduce((a, b) => a + b, 0) >= total,
      120_000,
      `${contender} ran ${total} jobs`,
      5,
    );
    const handlersMs = timer.ms();
    // Done means done in the database: wait (workers still running) until no job is left
    // waiting, running or uncompleted, and count that time.
    let left = await producer.remaining();
    const settleBy = Date.now() + 30_000;
    while (left > 0 && Date.now() < settleBy) {
      await sleep(20);
      left = await producer.remaining();
    }
    const ms = left === 0 ? timer.ms() : handlersMs;
    for (const w of workers) w.send('stop');
    const results = (await Promise.all(workers.map((w) => w.result))) as PgWorkerResult[];
    const ran = results.reduce((a, r) => a + r.count, 0);
    const queries = results.reduce((a, r) => a + r.queries, 0);
    return { rate: (total / ms) * 1000, ran, roundTripsPerJob: queries / total, left };
  } finally {
    for (const w of workers) w.kill();
  }
}

/**
 * Pickup latency of all contenders at once: one worker process each, and every tick enqueues
 * one job to each contender (in rotating order), so all see the same machine and disk noise.
 */
async function latencies(
  producers: Map<Contender, Producer>,
  count: number,
): Promise<Map<Contender, { fromCall: number[]; fromCommit: number[] }>> {
  const workers = new Map(
    CONTENDERS.map((c) => [c, spawnWorkers(1, WORKER, () => workerArgs(c))[0] as WorkerHandle]),
  );
  try {
    await Promise.all([...workers.values()].map((w) => w.waitFor('ready')));
    for (const w of workers.values()) w.send('go');
    // Let the workers reach their steady state (listening, first poll done).
    await sleep(1_000);
    // Per contender and job n: when the enqueue call started and when it resolved (committed).
    const calls = new Map(CONTENDERS.map((c) => [c, new Map<number, [number, number]>()]));
    await paced(count, 50, async (n) => {
      const order = CONTENDERS.map((_, k) => CONTENDERS[(n + k) % CONTENDERS.length] as Contender);
      await Promise.all(
        order.map(async (c) => {
          const called = Date.now();
          await (producers.get(c) as Producer).single({ n });
          calls.get(c)?.set(n, [called, Date.now()]);
        }),
      );
    });
    const out = new Map<Contender, { fromCall: number[]; fromCommit: number[] }>();
    for (const [contender, worker] of workers) {
      let seen = 0;
      await waitUntil(
        async () => {
          seen = await worker.waitFor<number>('progress');
          return seen >= count;
        },
        30_000,
        `${contender} latency jobs ran`,
        0,
      );
      worker.send('stop');
      const { starts } = (await worker.result) as PgWorkerResult;
      const fromCall: number[] = [];
      const fromCommit: number[] = [];
      for (const [n, started] of starts) {
        const call = calls.get(contender)?.get(n);
        if (!call) continue;
        fromCall.push(started - call[0]);
        // Can be negative: a worker may start the job before the enqueuer hears "committed".
        fromCommit.push(Math.max(0, started - call[1]));
      }
      out.set(contender, { fromCall, fromCommit });
    }
    return out;
  } finally {
    for (const w of workers.values()) w.kill();
  }
}

/** Runs the PostgreSQL suite; see the file header. */
export async function runPostgresBench(options: BenchOptions): Promise<BenchReport> {
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
  ) =>
    measures.push({
      metric,
      contender: contender === 'ours' ? '@jobs/postgres' : contender,
      value,
      unit,
      higherIsBetter,
    });

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
    const singleMs = new Map<Contender, number>(CONTENDERS.map((c) => [c, 0]));
    const rounds = 5;
    for (let r = 0; r < rounds; r++) {
      for (const contender of CONTENDERS) {
        const producer = producers.get(contender) as Producer;
        const t = startTimer();
        for (let i = 0; i < singles / rounds; i++) await producer.single({ i });
        singleMs.set(contender, (singleMs.get(contender) ?? 0) + t.ms());
      }
    }
    for (const contender of CONTENDERS) {
      add(
        'enqueue single (jobs/s)',
        contender,
        (singles / (singleMs.get(contender) ?? 1)) * 1000,
        'jobs/s',
        true,
      );
    }

    // Throughput: the machine belongs to one contender at a time.
    for (const contender of CONTENDERS) {
      for (const processes of [1, 2]) {
        console.log(`[bench] postgres: ${contender} throughput, ${processes} process(es) ...`);
        const producer = await reopen(contender);
        const t = startTimer();
        for (let i = 0; i < total; i += 1_000) {
          await producer.bulk(
            Array.from({ length: Math.min(1_000, total - i) }, (_, k) => ({ i: i + k })),
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
    const samples = await latencies(producers, latencyJobs);
    for (const contender of CONTENDERS) {
      const s = summarize(samples.get(contender)?.fromCall ?? []);
      add('enqueue call → start p50 at 50/s (ms)', contender, s.p50, 'ms', false);
      add('enqueue call → start p95 at 50/s (ms)', contender, s.p95, 'ms', false);
      add('enqueue call → start p99 at 50/s (ms)', contender, s.p99, 'ms', false);
      const c = summarize(samples.get(contender)?.fromCommit ?? []);
      add('commit ack → start p50 at 50/s (ms)', contender, c.p50, 'ms', false);
      add('commit ack → start p99 at 50/s (ms)', contender, c.p99, 'ms', false);
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
