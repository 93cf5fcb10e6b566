/**
 * History pruning (issue 27): what retention costs when a day's records go at once. On
 * PostgreSQL and MySQL/MariaDB history is kept in partitions by UTC day (schema version 18), so
 * a day past the retention is dropped whole; records that share a partition with days still kept
 * (PostgreSQL's DEFAULT partition of records from before the upgrade, or a day without a
 * partition of its own; on MySQL the partition of the days before the upgrade) are deleted row
 * by row, 1,000 per statement, as every record was before version 18 — and as SQLite still does.
 * Both are timed here in one run, through the store's own `history.prune` loop as the engine
 * calls it (retention 5 days): `N` records finished 10 days ago in their own day's partition,
 * then `N` finished 6 days ago beside kept ones. On PostgreSQL the write-ahead log each wrote too.
 *
 * `pnpm bench prune [--quick] [--records N] [postgres] [mysql] [sqlite]` (default 200,000
 * records; `--quick` 20,000).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobStore } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import mysql from 'mysql2/promise';
import { PG_URL } from './drain-targets.js';
import { printTable, startTimer } from './harness.js';

const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const DAY = 86_400_000;
const RETENTION = 5 * DAY;
const BATCH = 1_000;

interface Target {
  name: string;
  store: JobStore;
  /** Writes `n` raw records finished `daysAgo` days ago (UTC date today − daysAgo). */
  load(n: number, daysAgo: number): Promise<void>;
  /** Gives the UTC day `daysAgo` days ago a partition of its own; false without partitions. */
  partitionDay(daysAgo: number): Promise<boolean>;
  /** Bytes of write-ahead log so far, where the database says. */
  wal(): Promise<number | null>;
  cleanup(): Promise<void>;
}

const COLUMNS =
  'id, type, payload, priority, due_at, retries_left, attempts, exclusive, queue, created_at, outcome, finished_at';

async function postgres(): Promise<Target> {
  const schema = `bench_prune_${process.pid}_${Date.now()}`;
  const store = new PostgresJobStore({ connectionString: PG_URL, schema, max: 4 });
  await store.migrate();
  const history = `"${schema}".jobs_history`;
  let next = 1;
  return {
    name: 'postgres',
    store,
    async load(n, daysAgo) {
      const first = next;
      next += n;
      await store.pool.query(
        `INSERT INTO ${history} (${COLUMNS})
         SELECT g, 'old', '{"i":1}', 0, now() - $2 * interval '1 day', 0, 1, false, 'default',
                now() - $2 * interval '1 day', 'completed', now() - $2 * interval '1 day'
           FROM generate_series($1::bigint, $1::bigint + $3 - 1) g`,
        [first, daysAgo, n],
      );
    },
    async partitionDay(daysAgo) {
      await store.pool.query(
        `SELECT "${schema}".jobs_history_maintain('-infinity', (now() AT TIME ZONE 'UTC')::date - $1::int)`,
        [daysAgo],
      );
      return true;
    },
    async wal() {
      const { rows } = await store.pool.query(
        `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8 AS bytes`,
      );
      return Number(rows[0]?.bytes);
    },
    async cleanup() {
      await store.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await store.close();
    },
  };
}

async function mysqlTarget(): Promise<Target> {
  const database = `bench_prune_${process.pid}_${Date.now()}`;
  const admin = await mysql.createConnection({ uri: MYSQL_URL, multipleStatements: false });
  await admin.query(`CREATE DATABASE \`${database}\``);
  const store = new MysqlJobStore({ uri: MYSQL_URL, database, connectionLimit: 4 });
  await store.migrate();
  const history = `\`${database}\`.\`jobs_jobs_history\``;
  // A recursive CTE numbers the rows: MySQL's and MariaDB's bounds on its depth, raised.
  await admin.query('SET SESSION cte_max_recursion_depth = 100000000').catch(() => {});
  await admin.query('SET SESSION max_recursive_iterations = 100000000').catch(() => {});
  let next = 1;
  const utcDay = async (daysAgo: number): Promise<string> => {
    const [rows] = await admin.query(
      `SELECT CAST(UTC_DATE() - INTERVAL ? DAY AS CHAR) AS d, CAST(UTC_DATE() AS CHAR) AS t`,
      [daysAgo],
    );
    return String((rows as { d: string }[])[0]?.d);
  };
  return {
    name: 'mysql',
    store,
    async load(n, daysAgo) {
      for (let done = 0; done < n; done += 50_000) {
        const first = next;
        const count = Math.min(50_000, n - done);
        next += count;
        await admin.query(
          `INSERT INTO ${history} (${COLUMNS})
           WITH RECURSIVE g (i) AS (SELECT ? UNION ALL SELECT i + 1 FROM g WHERE i < ?)
           SELECT i, 'old', '{"i":1}', 0, UTC_TIMESTAMP(3) - INTERVAL ? DAY, 0, 1, 0, 'default',
                  UTC_TIMESTAMP(3) - INTERVAL ? DAY, 'completed', UTC_TIMESTAMP(3) - INTERVAL ? DAY
             FROM g`,
          [first, first + count - 1, daysAgo, daysAgo, daysAgo],
        );
      }
    },
    async partitionDay(daysAgo) {
      // The partition of the days before the upgrade ends today; split off the day's end.
      const [today, before] = [await utcDay(0), await utcDay(daysAgo - 1)];
      const name = (d: string) => `p${d.replace(/-/g, '')}`;
      await admin.query(
        `ALTER TABLE ${history} REORGANIZE PARTITION \`${name(today)}\` INTO (
           PARTITION \`${name(before)}\` VALUES LESS THAN ('${before}'),
           PARTITION \`${name(today)}\` VALUES LESS THAN ('${today}'))`,
      );
      return true;
    },
    wal: async () => null,
    async cleanup() {
      await store.close();
      await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
      await admin.end();
    },
  };
}

async function sqlite(): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-prune-bench-'));
  const store = new SqliteJobStore({ filename: join(dir, 'jobs.db') });
  await store.migrate();
  const db = store.db;
  let next = 1;
  return {
    name: 'sqlite',
    store,
    async load(n, daysAgo) {
      const at = Date.now() - daysAgo * DAY;
      const insert = db.prepare(
        `INSERT INTO jobs_jobs_history (${COLUMNS}) VALUES (?, 'old', '{"i":1}', 0, ?, 0, 1, 0, 'default', ?, 'completed', ?)`,
      );
      db.transaction(() => {
        for (let i = 0; i < n; i++) insert.run(next++, at, at, at);
      })();
    },
    partitionDay: async () => false,
    wal: async () => null,
    async cleanup() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The engine's pruning loop until a call comes back short: records, calls and ms. */
async function pruneAll(store: JobStore): Promise<{ records: number; calls: number; ms: number }> {
  const timer = startTimer();
  let records = 0;
  let calls = 0;
  for (;;) {
    const n = (await store.history?.prune(RETENTION, BATCH)) ?? 0;
    calls++;
    records += n;
    if (n < BATCH) break;
  }
  return { records, calls, ms: timer.ms() };
}

export async function runPruneBench(argv: readonly string[]): Promise<void> {
  const at = argv.indexOf('--records');
  const n = at >= 0 ? Number(argv[at + 1]) : argv.includes('--quick') ? 20_000 : 200_000;
  const wanted = argv.filter((a) => ['postgres', 'mysql', 'sqlite'].includes(a));
  const makers = { postgres, mysql: mysqlTarget, sqlite };
  const names = (wanted.length > 0 ? wanted : Object.keys(makers)) as (keyof typeof makers)[];
  const rows: (string | number)[][] = [];
  for (const name of names) {
    let target: Target;
    try {
      target = await makers[name]();
    } catch (error) {
      console.log(`${name}: skipped (${(error as Error).message})`);
      continue;
    }
    try {
      target.store.history?.configure({ keep: 'all', retentionMs: RETENTION });
      const phases: [string, number, boolean][] = [];
      if (await target.partitionDay(10)) phases.push(['a day in its own partition', 10, true]);
      phases.push(['row by row (beside kept days)', 6, false]);
      for (const [how, daysAgo] of phases) {
        await target.load(n, daysAgo);
        const walBefore = await target.wal();
        const result = await pruneAll(target.store);
        const walAfter = await target.wal();
        if (result.records !== n) {
          throw new Error(`${how}: pruned ${result.records} of ${n} records`);
        }
        rows.push([
          name,
          how,
          result.records,
          String(result.calls),
          String(Math.round(result.ms)),
          Math.round((result.records / result.ms) * 1000),
          walBefore === null || walAfter === null
            ? '—'
            : ((walAfter - walBefore) / 1_048_576).toFixed(1),
        ]);
      }
    } finally {
      await target.cleanup();
    }
  }
  printTable(
    `History pruning, ${n.toLocaleString('en')} records past a 5-day retention, the engine's loop (1,000 a call)`,
    ['store', 'how', 'records', 'prune calls', 'ms', 'records/s', 'WAL MiB'],
    rows,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await runPruneBench(process.argv.slice(2));
