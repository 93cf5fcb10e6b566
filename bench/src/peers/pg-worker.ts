/**
 * One worker process of the PostgreSQL bench: runs no-op jobs with one contender (ours,
 * graphile-worker or pg-boss) at a given concurrency and reports how many it ran and, for
 * latency runs, when each numbered job (payload `n`) started (`Date.now()`; the enqueuer runs on
 * the same machine, same clock).
 *
 * Protocol (see harness `serveWorker`): set up → `ready`; wait `go` → start working, send
 * `progress` (count) every 20 ms; wait `stop` → shut down, return `{ count, starts }`.
 */
import { JobEngine } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { Logger as GraphileLogger, run as runGraphile } from 'graphile-worker';
import pg from 'pg';
import PgBoss from 'pg-boss';
import { serveWorker, workUntilStopped } from '../harness.js';

export type Contender = 'ours' | 'graphile-worker' | 'pg-boss';

export interface PgWorkerArgs {
  contender: Contender;
  url: string;
  schema: string;
  concurrency: number;
  /** Extra prefetch for our engine (jobs leased beyond concurrency, in memory). */
  prefetch: number;
  /** pg-boss fetch batch size per worker. */
  pgBossBatchSize: number;
  queue: string;
}

export interface PgWorkerResult {
  count: number;
  /** Statements sent to PostgreSQL (round trips) between `go` and `stop`, all connections. */
  queries: number;
  /** `[n, Date.now() at handler start]` for jobs whose payload carries a sequence number `n`. */
  starts: [number, number][];
}

/**
 * Counts round trips: every statement of every connection goes through `Client#query` (pools
 * too). graphile-worker and pg-boss use the same `pg` copy, so all three are counted alike.
 */
let queries = 0;
const clientQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
  queries++;
  return (clientQuery as (...a: unknown[]) => unknown).apply(this, args);
} as typeof clientQuery;

serveWorker<PgWorkerArgs, PgWorkerResult>(async (args, io) => {
  let count = 0;
  const starts: [number, number][] = [];
  const onJob = (payload: unknown): void => {
    count++;
    const n = (payload as { n?: number } | null)?.n;
    if (typeof n === 'number') starts.push([n, Date.now()]);
  };

  let start: () => Promise<void>;
  let stop: () => Promise<void>;

  if (args.contender === 'ours') {
    const store = new PostgresJobStore({
      connectionString: args.url,
      schema: args.schema,
      max: 4,
    });
    const engine = new JobEngine({
      store,
      concurrency: args.concurrency,
      prefetch: args.prefetch,
      leaseMs: 30_000,
      handlers: { [args.queue]: async (job) => onJob(job.payload) },
    });
    await store.now();
    start = () => engine.start();
    stop = async () => {
      await engine.stop({ timeoutMs: 5_000 });
      await store.close();
    };
  } else if (args.contender === 'graphile-worker') {
    let runner: Awaited<ReturnType<typeof runGraphile>> | null = null;
    start = async () => {
      runner = await runGraphile({
        connectionString: args.url,
        schema: args.schema,
        concurrency: args.concurrency,
        maxPoolSize: args.concurrency + 1,
        noHandleSignals: true,
        pollInterval: 2_000,
        // Prepared statements are graphile-worker's default; stated for the record.
        noPreparedStatements: false,
        logger: quietGraphileLogger(),
        taskList: {
          [args.queue]: async (payload) => {
            onJob(payload);
          },
        },
      });
    };
    stop = async () => {
      await runner?.stop();
    };
  } else {
    const boss = new PgBoss({
      connectionString: args.url,
      schema: args.schema,
      max: args.concurrency + 1,
      supervise: false,
      schedule: false,
      migrate: false,
    });
    boss.on('error', () => {});
    await boss.start();
    start = async () => {
      // pg-boss v10 runs one batch per work() registration at a time, and waits its polling
      // interval (min 0.5 s) between fetches; `concurrency` registrations = that many jobs at
      // once, each fetching `pgBossBatchSize` jobs per poll.
      for (let i = 0; i < args.concurrency; i++) {
        await boss.work(
          args.queue,
          { batchSize: args.pgBossBatchSize, pollingIntervalSeconds: 0.5 },
          async (jobs) => {
            for (const job of jobs) onJob(job.data);
          },
        );
      }
    };
    stop = async () => {
      await boss.stop({ graceful: true, wait: true, timeout: 5_000 });
    };
  }

  let sent = 0;
  await workUntilStopped(io, {
    start: async () => {
      queries = 0;
      await start();
    },
    stop: async () => {
      sent = queries;
      await stop();
    },
    count: () => count,
  });
  return { count, queries: sent, starts };
});

function quietGraphileLogger(): GraphileLogger {
  return new GraphileLogger(() => () => {});
}
