/**
 * How long the dashboard's pages take (HTTP request → full HTML) at 10k and 1M live jobs, on
 * PostgreSQL and SQLite. Rows are loaded with one INSERT … SELECT (generate_series / a recursive
 * CTE): 91% timers due later, 5% due async, 4% dead-letter, over 10 types and 3 queues. Each
 * page: the first request, then the median and p95 of 15 after 3 warm-ups (the overview reuses
 * its grouped counts for a while when they are slow to count: for the "every job counted" row,
 * the first request is the real cost and the median the cached one).
 *
 *   pnpm --filter @jobs/dashboard bench                 # 10k and 1M, both databases
 *   pnpm --filter @jobs/dashboard bench -- 10000        # only 10k
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobStore } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createDashboard } from '../src/index.js';

const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SIZES = process.argv
  .slice(2)
  .map(Number)
  .filter((n) => n > 0);
const ROUNDS = 15;

interface Loaded {
  store: JobStore;
  /** An id near the end of the table: a deep keyset page. */
  deepId: string;
  cleanup(): Promise<void>;
}

async function loadPostgres(rows: number): Promise<Loaded> {
  const schema = `dash_bench_${process.pid}`;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  const store = new PostgresJobStore({ connectionString: PG_URL, schema, max: 4 });
  await store.migrate();
  await client.query(`
    INSERT INTO "${schema}".jobs (type, payload, state, due_at, retries_left, attempts, queue, last_error_message, last_error_stack)
    SELECT 'type-' || (g % 10),
      jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'),
      CASE WHEN g % 100 < 4 THEN 'deadletter' WHEN g % 100 < 9 THEN 'async' ELSE 'timer' END,
      CASE WHEN g % 100 < 9 THEN now() - interval '1 minute' ELSE now() + interval '1 day' END,
      3, CASE WHEN g % 100 < 4 THEN 4 ELSE 0 END,
      (ARRAY['default', 'mail', 'reports'])[1 + g % 3],
      CASE WHEN g % 100 < 4 THEN 'error ' || (g % 7) END,
      CASE WHEN g % 100 < 4 THEN 'Error: error ' || (g % 7) || E'\\n    at handler (app.js:1:1)' END
    FROM generate_series(1, ${rows}) g`);
  await client.query(`ANALYZE "${schema}".jobs`);
  const deep = await client.query(
    `SELECT id FROM "${schema}".jobs ORDER BY id DESC OFFSET 200 LIMIT 1`,
  );
  return {
    store,
    deepId: String(deep.rows[0].id),
    cleanup: async () => {
      await store.close();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    },
  };
}

async function loadSqlite(rows: number): Promise<Loaded> {
  const dir = mkdtempSync(join(tmpdir(), 'dash-bench-'));
  const filename = join(dir, 'jobs.db');
  const store = new SqliteJobStore({ filename });
  await store.migrate();
  const db = new Database(filename);
  const now = Date.now();
  db.exec(`
    INSERT INTO jobs_jobs (type, payload, state, priority, due_at, retries_left, attempts, exclusive, queue, created_at, last_error_message, last_error_stack)
    WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${rows})
    SELECT 'type-' || (n % 10),
      json_object('n', n, 'to', 'user' || n || '@example.com'),
      CASE WHEN n % 100 < 4 THEN 'deadletter' WHEN n % 100 < 9 THEN 'async' ELSE 'timer' END,
      0,
      CASE WHEN n % 100 < 9 THEN ${now - 60_000} ELSE ${now + 86_400_000} END,
      3, CASE WHEN n % 100 < 4 THEN 4 ELSE 0 END, 0,
      CASE n % 3 WHEN 0 THEN 'default' WHEN 1 THEN 'mail' ELSE 'reports' END,
      ${now},
      CASE WHEN n % 100 < 4 THEN 'error ' || (n % 7) END,
      CASE WHEN n % 100 < 4 THEN 'Error: error ' || (n % 7) || char(10) || '    at handler (app.js:1:1)' END
    FROM g`);
  db.exec('ANALYZE');
  const deep = db.prepare('SELECT id FROM jobs_jobs ORDER BY id DESC LIMIT 1 OFFSET 200').get() as {
    id: number;
  };
  db.close();
  return {
    store,
    deepId: String(deep.id),
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function measure(
  url: string,
): Promise<{ first: number; median: number; p95: number; bytes: number }> {
  const times: number[] = [];
  let first = 0;
  let bytes = 0;
  for (let i = 0; i < ROUNDS + 3; i++) {
    const start = performance.now();
    const response = await fetch(url);
    const body = await response.text();
    const ms = performance.now() - start;
    if (response.status !== 200) throw new Error(`${url}: HTTP ${response.status}`);
    bytes = body.length;
    if (i === 0) first = ms;
    if (i >= 3) times.push(ms);
  }
  times.sort((a, b) => a - b);
  return {
    first,
    median: times[Math.floor(times.length / 2)] ?? 0,
    p95: times[Math.min(times.length - 1, Math.ceil(times.length * 0.95) - 1)] ?? 0,
    bytes,
  };
}

async function run(
  database: string,
  rows: number,
  load: (rows: number) => Promise<Loaded>,
): Promise<void> {
  const started = performance.now();
  const loaded = await load(rows);
  const loadMs = performance.now() - started;
  const dashboard = createDashboard({ store: loaded.store });
  // The same overview counting every live job (`queueStats` over the whole table), for
  // comparison: its first request is the real cost; later ones reuse the slow count.
  const exact = createDashboard({
    store: loaded.store,
    countLimit: 100_000_000,
    basePath: '/exact',
  });
  const server = createServer((req, res) =>
    (req.url?.startsWith('/exact') ? exact : dashboard).handler(req, res),
  ).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const pages: [string, string][] = [
    ['jobs, first page', '/jobs'],
    ['jobs, deep page (keyset)', `/jobs?after=${loaded.deepId}&offset=${rows - 200}`],
    ['jobs, state=deadletter', '/jobs?state=deadletter'],
    ['jobs, type+state', '/jobs?type=type-5&state=async'],
    ['jobs, key (no match)', '/jobs?key=nope'],
    ['overview', '/'],
    ['overview, every job counted', '/exact/'],
    ['dead letter (groups 5k)', '/deadletter'],
  ];
  console.log(
    `\n${database}, ${rows.toLocaleString('en-US')} live jobs (loaded in ${(loadMs / 1000).toFixed(1)} s)`,
  );
  for (const [label, path] of pages) {
    const m = await measure(`${base}${path}`);
    console.log(
      `  ${label.padEnd(28)} first ${m.first.toFixed(1).padStart(7)} ms   median ${m.median.toFixed(1).padStart(7)} ms   p95 ${m.p95.toFixed(1).padStart(7)} ms   ${(m.bytes / 1024).toFixed(0)} KiB`,
    );
  }
  server.close();
  await loaded.cleanup();
}

for (const rows of SIZES.length > 0 ? SIZES : [10_000, 1_000_000]) {
  await run('PostgreSQL', rows, loadPostgres);
  await run('SQLite', rows, loadSqlite);
}
