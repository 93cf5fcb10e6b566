/**
 * One worker process of the PostgreSQL bench: runs no-op jobs with one contender (ours in its
 * default or tuned configuration, graphile-worker or pg-boss) at a given concurrency and reports
 * how many it ran, the statements it sent, its peak RSS and, for latency runs, when each
 * numbered job (payload `n`) started (`Date.now()`; the enqueuer runs on the same machine).
 *
 * Protocol (see harness `serveWorker`): set up → `ready`; wait `go` → start working, send
 * `progress` (count) every 20 ms; wait `stop` → shut down, return the result.
 */
import { JobEngine, silentLogger } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { Logger as GraphileLogger, run as runGraphile } from 'graphile-worker';
import { PgBoss } from 'pg-boss';
import {
  countPgQueries,
  jobRecorder,
  measuredWork,
  serveWorker,
  TUNED_HISTORY,
  type WorkerStats,
} from '../harness.js';

export type Contender = 'ours' | 'ours-tuned' | 'graphile-worker' | 'pg-boss';

export interface PgWorkerArgs {
  contender: Contender;
  url: string;
  schema: string;
  concurrency: number;
  /** Our engine's fixed prefetch; null: the default (adaptive). */
  prefetch: number | null;
  /** graphile-worker's `localQueue.size`. */
  graphileLocalQueue: number;
  /** pg-boss fetch batch size per worker. */
  pgBossBatchSize: number;
  queue: string;
}

/** `commands`: statements sent to PostgreSQL (round trips), all connections. */
export type PgWorkerResult = WorkerStats;

/**
 * Counts round trips: every statement of every connection goes through `Client#query` (pools
 * too). graphile-worker and pg-boss use the same `pg` copy, so all are counted alike.
 */
const queries = countPgQueries();

serveWorker<PgWorkerArgs, PgWorkerResult>(async (args, io) => {
  const recorder = jobRecorder();
  const onJob = recorder.onJob;

  let start: () => Promise<void>;
  let stop: () => Promise<void>;

  if (args.contender === 'ours' || args.contender === 'ours-tuned') {
    // The default configuration takes the store's default pool (10); tuned, a pool of 4
    // (measured alike: the pool is not the limit).
    const store = new PostgresJobStore({
      connectionString: args.url,
      schema: args.schema,
      ...(args.contender === 'ours-tuned' ? { max: 4 } : {}),
    });
    const engine = new JobEngine({
      store,
      concurrency: args.concurrency,
      // Default configuration: no prefetch option (adaptive batches), history of every job.
      ...(args.prefetch === null ? {} : { prefetch: args.prefetch, history: TUNED_HISTORY }),
      logger: silentLogger,
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
        maxPoolSize: args.concurrency + 2,
        noHandleSignals: true,
        logger: quietGraphileLogger(),
        // Prepared statements are graphile-worker's default; stated for the record.
        noPreparedStatements: false,
        // Its documentation's Performance page (worker.graphile.org/docs/performance):
        // batched fetching into a local queue, batched completion and failure.
        preset: {
          worker: {
            localQueue: { size: args.graphileLocalQueue },
            completeJobBatchDelay: 0,
            failJobBatchDelay: 0,
          },
        },
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
      max: args.concurrency + 2,
      supervise: false,
      schedule: false,
      migrate: false,
      // Wake-ups by LISTEN/NOTIFY for queues created with `notify: true` (pg-boss 12).
      useListenNotify: true,
    });
    boss.on('error', () => {});
    await boss.start();
    start = async () => {
      // `localConcurrency` pollers, each fetching `batchSize` jobs at a time and fetching again
      // at once while batches come back full (`burstWhenBatchFull`).
      await boss.work(
        args.queue,
        {
          batchSize: args.pgBossBatchSize,
          localConcurrency: args.concurrency,
          pollingIntervalSeconds: 0.5,
          notifyPollingIntervalSeconds: 0.5,
          burstWhenBatchFull: true,
        },
        async (jobs) => {
          for (const job of jobs) onJob(job.data);
        },
      );
    };
    stop = async () => {
      await boss.stop({ graceful: true, timeout: 5_000 });
    };
  }

  return measuredWork(io, { start, stop }, recorder, queries);
});

function quietGraphileLogger(): GraphileLogger {
  return new GraphileLogger(() => () => {});
}
