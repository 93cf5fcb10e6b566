/**
 * Enqueue from SQL against `engine.enqueue` on the same store: jobs/s of
 * - single: one job per call, one call at a time (`engine.enqueue` ÷ PostgreSQL's
 *   `SELECT <schema>.enqueue(…)`, MySQL's `CALL <prefix>enqueue(…)`, SQLite's
 *   `INSERT INTO <prefix>enqueue …`), each call its own transaction;
 * - bulk: batches of 1,000 (`engine.enqueueMany` ÷ one call of the bulk entry point with a JSON
 *   array of 1,000 payloads: PostgreSQL's `SELECT <schema>.enqueue_many(…)`, MySQL's
 *   `CALL <prefix>enqueue_many(…)`, SQLite's `INSERT INTO <prefix>enqueue_many …`).
 * A fresh schema, database or file per run; the two sides alternate within a round so drift on a
 * shared machine hits both. Prints each median and SQL ÷ engine (the target: ≥ 1.0×).
 *
 * `pnpm bench sql-enqueue [--quick] [sqlite] [postgres] [mysql]` (default: all three, at
 * `JOBS_PG_URL` and `JOBS_MYSQL_URL`).
 */
import { JobEngine, type JobStore, silentLogger } from '@jobs/core';
import type { MysqlJobStore } from '@jobs/mysql';
import type { PostgresJobStore } from '@jobs/postgres';
import type { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { type DrainTarget, drainTargets, median } from './drain-targets.js';

const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const BATCH = 1_000;

/** A raw SQL client on the store's database: one job per call, or a batch per statement. */
interface SqlSide {
  one(i: number): Promise<void>;
  batch(from: number, count: number): Promise<void>;
  close(): Promise<void>;
}

async function sqlSide(name: string, store: JobStore): Promise<SqlSide> {
  if (name === 'postgres') {
    const schema = (store as PostgresJobStore).schema;
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    return {
      one: async (i) => {
        await client.query(`SELECT "${schema}".enqueue('noop', $1::jsonb, '{}'::jsonb)`, [
          JSON.stringify({ i }),
        ]);
      },
      batch: async (from, count) => {
        const payloads = Array.from({ length: count }, (_, k) => ({ i: from + k }));
        await client.query(`SELECT "${schema}".enqueue_many('noop', $1::jsonb, '{}'::jsonb)`, [
          JSON.stringify(payloads),
        ]);
      },
      close: () => client.end(),
    };
  }
  if (name === 'mysql') {
    const database = /^`([^`]+)`/.exec((store as MysqlJobStore).tables.jobs)?.[1];
    const connection = await mysql.createConnection({ uri: MYSQL_URL, database });
    return {
      one: async (i) => {
        await connection.query('CALL jobs_enqueue(?, ?, ?)', ['noop', JSON.stringify({ i }), '{}']);
      },
      batch: async (from, count) => {
        const payloads = Array.from({ length: count }, (_, k) => ({ i: from + k }));
        await connection.query('CALL jobs_enqueue_many(?, ?, ?)', [
          'noop',
          JSON.stringify(payloads),
          '{}',
        ]);
      },
      close: () => connection.end(),
    };
  }
  const db = new Database((store as SqliteJobStore).db.name);
  db.pragma('busy_timeout = 5000');
  const one = db.prepare('INSERT INTO jobs_enqueue (type, payload, options) VALUES (?, ?, ?)');
  const many = db.prepare(
    `INSERT INTO jobs_enqueue_many (type, payloads, options) VALUES ('noop', ?, '{}')`,
  );
  return {
    one: async (i) => {
      one.run('noop', JSON.stringify({ i }), '{}');
    },
    batch: async (from, count) => {
      many.run(JSON.stringify(Array.from({ length: count }, (_, k) => ({ i: from + k }))));
    },
    close: async () => {
      db.close();
    },
  };
}

type Side = 'engine' | 'sql';
type Mode = 'single' | 'bulk';

/** Jobs/s of one side and mode on a fresh store. */
async function rate(target: DrainTarget, side: Side, mode: Mode, jobs: number): Promise<number> {
  const { store, cleanup } = await target.open();
  const engine = new JobEngine({ store, logger: silentLogger });
  const sql = side === 'sql' ? await sqlSide(target.name, store) : null;
  try {
    const started = performance.now();
    if (mode === 'single') {
      for (let i = 0; i < jobs; i++) {
        if (sql) await sql.one(i);
        else await engine.enqueue('noop', { i });
      }
    } else {
      for (let i = 0; i < jobs; i += BATCH) {
        const count = Math.min(BATCH, jobs - i);
        if (sql) await sql.batch(i, count);
        else {
          await engine.enqueueMany(
            Array.from({ length: count }, (_, k) => ({ type: 'noop', payload: { i: i + k } })),
          );
        }
      }
    }
    const ms = performance.now() - started;
    const stored = (await store.listJobs({ limit: 1, offset: jobs - 1 })).length;
    if (stored !== 1) throw new Error(`${target.name} ${side} ${mode}: jobs went missing`);
    return (jobs / ms) * 1000;
  } finally {
    await sql?.close();
    await store.close();
    await cleanup();
  }
}

export async function runSqlEnqueueBench(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const SINGLE = quick ? 1_000 : 3_000;
  const BULK = quick ? 10_000 : 50_000;
  const ROUNDS = quick ? 2 : 3;
  const named = argv.filter((arg) => !arg.startsWith('-'));
  const targets = drainTargets('sqlenq', true).filter(
    (target) => named.length === 0 || named.includes(target.name),
  );
  const rows: string[] = [];
  for (const target of targets) {
    for (const [mode, jobs] of [
      ['single', SINGLE],
      ['bulk', BULK],
    ] as const) {
      const rates: Record<Side, number[]> = { engine: [], sql: [] };
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const order: Side[] = round % 2 === 0 ? ['engine', 'sql'] : ['sql', 'engine'];
          for (const side of order) rates[side].push(await rate(target, side, mode, jobs));
        }
      } catch (error) {
        const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
        console.log(`[bench] sql-enqueue ${target.name}: skipped (${message})`);
        break;
      }
      const engineRate = median(rates.engine);
      const sqlRate = median(rates.sql);
      const line = `${target.name.padEnd(9)} ${mode.padEnd(7)} engine ${engineRate.toFixed(0).padStart(7)} jobs/s   sql ${sqlRate.toFixed(0).padStart(7)} jobs/s   sql ÷ engine ${(sqlRate / engineRate).toFixed(2)}×   (runs: engine ${rates.engine.map((r) => r.toFixed(0)).join(', ')}; sql ${rates.sql.map((r) => r.toFixed(0)).join(', ')})`;
      console.log(line);
      rows.push(line);
    }
  }
  console.log('\n==================== sql-enqueue ====================');
  for (const row of rows) console.log(row);
}
