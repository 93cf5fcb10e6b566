/**
 * TypeORM suite: what running jobs through `@jobs/typeorm` (on the app's TypeORM DataSource)
 * costs against the native store of the same database. For each database (SQLite file,
 * PostgreSQL schema, MySQL/MariaDB database — a server that is unreachable is skipped):
 * - bulk enqueue: `jobs` no-op jobs (default 5,000) through `enqueueMany` in batches of 1,000;
 * - throughput: one JobEngine (concurrency 10, prefetch 190) runs them; time from start until
 *   every job completed.
 * Ratios printed are `@jobs/typeorm ÷ native`: 1.00× means no overhead.
 *
 * Run alone: `npx tsx bench/src/typeorm.ts [--quick] [--jobs N]`.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { JobStore } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import { TypeormJobStore } from '@jobs/typeorm';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { DataSource } from 'typeorm';
import {
  type BenchMeasure,
  type BenchOptions,
  type BenchReport,
  drainInProcess,
  dropPostgresSchemas,
  printReport,
} from './harness.js';

const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const CONCURRENCY = 10;
const PREFETCH = 190;
const BULK_BATCH = 1_000;
const POOL = 4;

export interface TypeormBenchOptions extends Partial<BenchOptions> {
  /** No-op jobs per run. Default 5,000 (1,000 with `quick`). */
  jobs?: number;
}

type Database = 'sqlite' | 'postgres' | 'mysql';
type Contender = '@jobs/typeorm' | 'native';

/** A fresh, empty place for one run, and how to open either store on it. */
interface Target {
  open(contender: Contender): Promise<JobStore>;
  drop(): Promise<void>;
}

const suffix = (): string => randomBytes(4).toString('hex');

async function typeormStore(
  options: ConstructorParameters<typeof DataSource>[0],
): Promise<JobStore> {
  const dataSource = new DataSource(options);
  await dataSource.initialize();
  return new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
}

async function target(db: Database): Promise<Target | string> {
  if (db === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'jobs-bench-typeorm-'));
    let n = 0;
    return {
      open: (contender) => {
        const file = join(dir, `${contender === 'native' ? 'native' : 'typeorm'}-${n++}.db`);
        return contender === 'native'
          ? Promise.resolve(new SqliteJobStore({ filename: file }))
          : typeormStore({ type: 'better-sqlite3', database: file, enableWAL: true });
      },
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  if (db === 'postgres') {
    const schemas: string[] = [];
    try {
      const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
      await c.connect();
      await c.end();
    } catch (error) {
      return `PostgreSQL at ${PG_URL} unreachable (${(error as Error).message})`;
    }
    return {
      open: (contender) => {
        const schema = `bench_typeorm_${suffix()}`;
        schemas.push(schema);
        return contender === 'native'
          ? Promise.resolve(new PostgresJobStore({ connectionString: PG_URL, schema, max: POOL }))
          : typeormStore({ type: 'postgres', url: PG_URL, schema, extra: { max: POOL } });
      },
      drop: () => dropPostgresSchemas(PG_URL, schemas),
    };
  }
  let mariadb = false;
  try {
    const c = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 2000 });
    const [rows] = (await c.query('SELECT VERSION() AS v')) as unknown as [{ v: string }[]];
    mariadb = /mariadb/i.test(rows[0]?.v ?? '');
    await c.end();
  } catch (error) {
    return `MySQL at ${MYSQL_URL} unreachable (${(error as Error).message})`;
  }
  const databases: string[] = [];
  return {
    open: async (contender) => {
      const database = `bench_typeorm_${suffix()}`;
      databases.push(database);
      const c = await mysql.createConnection(MYSQL_URL);
      await c.query(`CREATE DATABASE \`${database}\``);
      await c.end();
      const url = new URL(MYSQL_URL);
      url.pathname = `/${database}`;
      return contender === 'native'
        ? new MysqlJobStore({ uri: url.toString(), connectionLimit: POOL })
        : typeormStore({
            type: mariadb ? 'mariadb' : 'mysql',
            url: url.toString(),
            extra: { connectionLimit: POOL },
          });
    },
    drop: async () => {
      const c = await mysql.createConnection(MYSQL_URL);
      for (const database of databases) await c.query(`DROP DATABASE IF EXISTS \`${database}\``);
      await c.end();
    },
  };
}

/** Bulk-enqueues `total` no-op jobs, then one engine runs them all. Rates in jobs/s. */
async function runOnce(store: JobStore, total: number): Promise<{ enqueue: number; run: number }> {
  try {
    const { enqueueMs, runMs } = await drainInProcess(store, total, {
      concurrency: CONCURRENCY,
      prefetch: PREFETCH,
    });
    return { enqueue: (total / enqueueMs) * 1000, run: (total / runMs) * 1000 };
  } finally {
    await store.close();
  }
}

/** Runs the TypeORM suite and returns its report (also printed when run alone). */
export async function runTypeormBench(options: TypeormBenchOptions = {}): Promise<BenchReport> {
  const quick = options.quick ?? false;
  const total = options.jobs ?? (quick ? 1_000 : 5_000);
  const measures: BenchMeasure[] = [];
  const notes: string[] = [
    `${total} no-op jobs enqueued up front in batches of ${BULK_BATCH}, then one engine (concurrency ${CONCURRENCY}, prefetch ${PREFETCH}) runs them; pools of ${POOL} connections; each run on a fresh file/schema/database`,
  ];
  for (const db of ['sqlite', 'postgres', 'mysql'] as const) {
    const t = await target(db);
    if (typeof t === 'string') {
      notes.push(`${db}: skipped — ${t}`);
      continue;
    }
    try {
      // Native first, then TypeORM, so neither profits from a warmer cache alone.
      for (const contender of ['native', '@jobs/typeorm'] as const) {
        process.stderr.write(`typeorm bench: ${db} ${contender}…\n`);
        const rates = await runOnce(await t.open(contender), total);
        const name = contender === 'native' ? `native @jobs/${db}` : contender;
        measures.push(
          {
            metric: `${db}: throughput (jobs/s)`,
            contender: name,
            value: rates.run,
            unit: 'jobs/s',
            higherIsBetter: true,
          },
          {
            metric: `${db}: bulk enqueue (jobs/s)`,
            contender: name,
            value: rates.enqueue,
            unit: 'jobs/s',
            higherIsBetter: true,
          },
        );
      }
    } finally {
      await t.drop();
    }
  }
  // printReport takes the first contender as "ours": put @jobs/typeorm first, and give the
  // native stores one column name so the ratio column reads typeorm ÷ native.
  const ordered = [
    ...measures.filter((m) => m.contender === '@jobs/typeorm'),
    ...measures
      .filter((m) => m.contender !== '@jobs/typeorm')
      .map((m) => ({ ...m, contender: 'native store' })),
  ];
  return {
    suite: 'typeorm (overhead vs the native store of each database)',
    measures: ordered,
    notes,
  };
}

function parseArgs(argv: readonly string[]): TypeormBenchOptions {
  const options: TypeormBenchOptions = { quick: argv.includes('--quick') };
  const at = argv.indexOf('--jobs');
  if (at >= 0) options.jobs = Number(argv[at + 1]);
  return options;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runTypeormBench(parseArgs(process.argv.slice(2)))
    .then((report) => printReport(report))
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
