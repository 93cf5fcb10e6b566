/**
 * One worker process of `pnpm bench processes` (`../processes.ts`): an engine in its default
 * configuration (concurrency 10) on a store of its own — PostgreSQL straight or through a
 * transaction-mode PgBouncer (`pooler: 'transaction'`, LISTEN straight to the server), or
 * MySQL/MariaDB — running no-op jobs of type `noop`. Counts the statements it sends (every
 * `pg` `Client#query`; on MySQL, mysql2's `query` and `execute`).
 *
 * Protocol (harness `measuredWork`): start → `ready`; `go` → runs, `progress` every 20 ms;
 * `stop` → its `WorkerStats`.
 */
import { JobEngine, silentLogger } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import mysqlCore from 'mysql2';
import {
  countPgQueries,
  jobRecorder,
  measuredWork,
  serveWorker,
  type WorkerStats,
} from '../harness.js';

export interface DrainWorkerArgs {
  store: 'postgres' | 'mysql';
  /** The URL the store's pool connects to (PgBouncer's when `listenUrl` is given). */
  url: string;
  /** PostgreSQL: the schema; MySQL: the table prefix. */
  namespace: string;
  /** PostgreSQL through a transaction pooler: the server's own URL, for LISTEN. */
  listenUrl?: string;
  concurrency: number;
}

const pgQueries = countPgQueries();
let mysqlQueries = 0;
const mysqlConnection = (mysqlCore as unknown as { Connection: { prototype: object } }).Connection
  .prototype as Record<string, unknown>;
for (const method of ['query', 'execute']) {
  const original = mysqlConnection[method] as (...args: unknown[]) => unknown;
  mysqlConnection[method] = function counted(this: unknown, ...args: unknown[]) {
    mysqlQueries++;
    return original.apply(this, args);
  };
}
const queries = () => pgQueries() + mysqlQueries;

serveWorker<DrainWorkerArgs, WorkerStats>(async (args, io) => {
  const store =
    args.store === 'postgres'
      ? new PostgresJobStore({
          connectionString: args.url,
          schema: args.namespace,
          ...(args.listenUrl
            ? { pooler: 'transaction' as const, listenConnectionString: args.listenUrl }
            : {}),
        })
      : new MysqlJobStore({ uri: args.url, tablePrefix: args.namespace });
  const recorder = jobRecorder();
  const engine = new JobEngine({
    store,
    concurrency: args.concurrency,
    logger: silentLogger,
    handlers: { noop: async (job) => recorder.onJob(job.payload) },
  });
  await store.now();
  return measuredWork(
    io,
    {
      start: () => engine.start(),
      stop: async () => {
        await engine.stop({ timeoutMs: 5_000 });
        await store.close();
      },
    },
    recorder,
    queries,
  );
});
