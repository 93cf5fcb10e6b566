/**
 * What the single-engine drain scenarios share (`history.ts`, `flow-limits.ts`): a fresh SQLite
 * file or PostgreSQL schema per run, and the jobs/s of one engine (concurrency 50, default
 * adaptive prefetch) draining `jobs` no-op jobs enqueued beforehand.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type EngineOptions,
  type EnqueueJobOptions,
  JobEngine,
  type JobStore,
  silentLogger,
} from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import mysql from 'mysql2/promise';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

export interface DrainTarget {
  name: string;
  open(): Promise<{ store: JobStore; cleanup(): Promise<void> }>;
}

/** SQLite and PostgreSQL (at `JOBS_PG_URL`), each run on fresh tables named after `scenario`. */
export function drainTargets(scenario: string, withMysql = false): DrainTarget[] {
  const mysqlTarget: DrainTarget = {
    name: 'mysql',
    async open() {
      const database = `bench_${scenario}_${process.pid}_${Date.now()}`;
      const admin = await mysql.createConnection({ uri: MYSQL_URL });
      await admin.query(`CREATE DATABASE \`${database}\``).finally(() => admin.end());
      const store = new MysqlJobStore({ uri: MYSQL_URL, database, connectionLimit: 4 });
      await store.migrate();
      return {
        store,
        cleanup: async () => {
          const drop = await mysql.createConnection({ uri: MYSQL_URL });
          await drop.query(`DROP DATABASE IF EXISTS \`${database}\``).finally(() => drop.end());
        },
      };
    },
  };
  return [
    {
      name: 'sqlite',
      async open() {
        const dir = mkdtempSync(join(tmpdir(), `jobs-${scenario}-bench-`));
        const store = new SqliteJobStore({ filename: join(dir, 'jobs.db') });
        await store.migrate();
        return { store, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
      },
    },
    {
      name: 'postgres',
      async open() {
        const schema = `bench_${scenario}_${process.pid}_${Date.now()}`;
        const store = new PostgresJobStore({ connectionString: PG_URL, schema, max: 4 });
        await store.migrate();
        return {
          store,
          cleanup: async () => {
            const drop = new PostgresJobStore({ connectionString: PG_URL, schema: 'public' });
            await drop.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
            await drop.close();
          },
        };
      },
    },
    ...(withMysql ? [mysqlTarget] : []),
  ];
}

/**
 * Jobs per second for one engine draining `jobs` jobs of type `noop` (payload `{ i }`, enqueue
 * options `options(i)`), with `engine`'s options (its `handlers` must run `noop`); `check`
 * looks at the store afterwards.
 */
export async function drainRate(
  target: DrainTarget,
  jobs: number,
  setup: {
    options?: (i: number) => EnqueueJobOptions;
    /** Enqueues what the measured jobs find waiting before them (not counted). */
    before?: (client: JobEngine) => Promise<void>;
    engine: Pick<EngineOptions, 'handlers'> & Partial<EngineOptions>;
    check?: (store: JobStore) => Promise<void>;
    /** `engine.stop({ timeoutMs })` once the measured jobs are done (default: its default). */
    stopTimeoutMs?: number;
  },
): Promise<number> {
  const { store, cleanup } = await target.open();
  try {
    const client = new JobEngine({ store, logger: silentLogger });
    await setup.before?.(client);
    for (let i = 0; i < jobs; i += 1000) {
      await client.enqueueMany(
        Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({
          type: 'noop',
          payload: { i: i + k },
          options: setup.options?.(i + k) ?? {},
        })),
      );
    }
    let done = 0;
    let finished: () => void = () => {};
    const all = new Promise<void>((resolve) => {
      finished = resolve;
    });
    const engine = new JobEngine({ store, logger: silentLogger, concurrency: 50, ...setup.engine });
    engine.on('completed', () => {
      done += 1;
      if (done === jobs) finished();
    });
    const started = performance.now();
    await engine.start();
    await all;
    const ms = performance.now() - started;
    await engine.stop(
      setup.stopTimeoutMs === undefined ? undefined : { timeoutMs: setup.stopTimeoutMs },
    );
    await setup.check?.(store);
    return (jobs / ms) * 1000;
  } finally {
    await store.close();
    await cleanup();
  }
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};
