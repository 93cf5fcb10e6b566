/**
 * `pnpm bench plans [postgres|mysql|sqlite ...] [--rows N] [--analysed]`: the query plans of the
 * hot-path statements, measured, on a table just bulk-loaded with 1M rows (default) that was
 * never analysed — the case where a planner has no statistics to go by — or, with
 * `--analysed`, right after `ANALYZE` (what autovacuum does soon after a bulk load).
 *
 * The rows are a mix an acquiring engine must wade through: three types (the engine runs two),
 * two queues, three priorities, 5% timers due in an hour, 0.1% running with live leases, 1% dead
 * letters, and exclusive scopes (4% of rows, 1,000 scopes, some held by a running job).
 *
 * Each store operation runs through the store's own dialect on an explaining executor: every
 * statement is first explained with execution (PostgreSQL `EXPLAIN (ANALYZE, BUFFERS)`, for the
 * plan the statement gets with its parameters and for the generic plan a prepared statement
 * gets after five runs; MariaDB `ANALYZE`, MySQL `EXPLAIN ANALYZE`; SQLite `EXPLAIN QUERY
 * PLAN` and the statement's time), undone, and then run for real, so the next operation sees
 * what this one did (the batch acquired is then completed, renewed, …).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  type AcquireRequest,
  JobEngine,
  type JobRef,
  type JobStore,
  refOf,
  silentLogger,
} from '@jobs/core';
import {
  type Dialect,
  driveAsync,
  type Executor,
  type Operation,
  outcome,
  type Query,
  type QueryOutcome,
  SqlJobStore,
  type SqlRow,
} from '@jobs/core/sql';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import mysql from 'mysql2/promise';
import pg from 'pg';

const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const PG_SCHEMA = 'bench_plans';
const MYSQL_DATABASE = 'jobs_bench_plans';
const BATCH = 500;
const REQUEST: AcquireRequest = {
  owner: 'plans',
  limit: BATCH,
  leaseMs: 30_000,
  types: ['noop', 'email'],
  queues: null,
  tenants: null,
};

type Database = 'postgres' | 'mysql' | 'sqlite';
const DATABASES: Database[] = ['postgres', 'mysql', 'sqlite'];

/** How one statement is explained and run on one connection, inside an open transaction. */
interface Explainer extends Transactions {
  /** The plan of `query`, with its side effects undone. */
  explain(query: Query): Promise<string>;
  run(query: Query): Promise<QueryOutcome>;
  close(): Promise<void>;
}

interface Transactions {
  begin(): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

/** BEGIN / COMMIT / ROLLBACK through `exec`. */
function transactions(exec: (sql: string) => unknown, begin = 'BEGIN'): Transactions {
  return {
    begin: async () => {
      await exec(begin);
    },
    commit: async () => {
      await exec('COMMIT');
    },
    rollback: async () => {
      await exec('ROLLBACK');
    },
  };
}

/**
 * Runs each operation in one transaction on one connection: every statement is explained
 * (and undone), then run; the operation's label and the plans are printed.
 */
class ExplainingExecutor implements Executor {
  label = '';
  constructor(private readonly explainer: Explainer) {}

  async run<T>(op: Operation<T>, _options: unknown): Promise<T> {
    const { explainer } = this;
    console.log(`\n### ${this.label}`);
    let n = 0;
    let open = true;
    await explainer.begin();
    try {
      const result = await driveAsync(op, async (query) => {
        if (query.sql === 'COMMIT') {
          open = false;
          return explainer.run(query);
        }
        n += 1;
        const firstLine = query.sql.trim().split('\n')[0]?.slice(0, 100) ?? '';
        console.log(`\n-- statement ${n}: ${firstLine}${firstLine.length >= 100 ? ' …' : ''}`);
        console.log(await explainer.explain(query));
        return explainer.run(query);
      });
      if (open) await explainer.commit();
      return result;
    } catch (error) {
      if (open) await explainer.rollback();
      throw error;
    }
  }

  async close(): Promise<void> {
    await this.explainer.close();
  }
}

/** A store over the explaining executor, and how to drop what was loaded. */
interface Loaded {
  store: JobStore;
  explaining: ExplainingExecutor;
  close(): Promise<void>;
}

/**
 * A store over `explainer` with the real store's dialect and capabilities; `drop` removes what
 * was loaded once the explaining connection is closed.
 */
function explainingStore(
  real: SqlJobStore,
  explainer: Explainer,
  drop: () => Promise<void> = async () => {},
): Loaded {
  const explaining = new ExplainingExecutor(explainer);
  const store = new SqlJobStore({
    label: 'plans',
    name: real.name,
    dialect: real.dialect,
    executor: explaining,
    capabilities: real.capabilities,
  });
  return {
    store,
    explaining,
    close: async () => {
      await explaining.close();
      await drop();
    },
  };
}

// ---- PostgreSQL ------------------------------------------------------------------------------

/** A PostgreSQL literal for a parameter value (for `EXECUTE name(…)`). */
function pgLiteral(client: pg.Client, value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) {
    const items = value.map((v) =>
      v === null ? 'NULL' : `"${String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`,
    );
    return client.escapeLiteral(`{${items.join(',')}}`);
  }
  return client.escapeLiteral(String(value));
}

function postgresExplainer(client: pg.Client, dialect: Dialect): Explainer {
  let prepared = 0;
  const planText = (rows: { 'QUERY PLAN': string }[]): string =>
    rows.map((r) => `   ${r['QUERY PLAN']}`).join('\n');
  return {
    ...transactions((sql) => client.query(sql)),
    async explain(query) {
      const text = dialect.placeholders(query.sql);
      const params = [...query.params];
      await client.query('SAVEPOINT plan');
      const custom = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, params);
      await client.query('ROLLBACK TO SAVEPOINT plan');
      let generic = '';
      if (params.length > 0) {
        // What a prepared statement runs after five executions: a plan for any parameters.
        const name = `plan_${++prepared}`;
        await client.query(`PREPARE ${name} AS ${text}`);
        await client.query("SET LOCAL plan_cache_mode = 'force_generic_plan'");
        const args = params.map((p) => pgLiteral(client, p)).join(', ');
        const rows = await client.query(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE ${name}(${args})`);
        await client.query('ROLLBACK TO SAVEPOINT plan');
        await client.query(`DEALLOCATE ${name}`);
        generic = `\n   generic plan (a prepared statement after five runs):\n${planText(rows.rows)}`;
      }
      await client.query('RELEASE SAVEPOINT plan');
      return `   plan with its parameters:\n${planText(custom.rows)}${generic}`;
    },
    async run(query) {
      const result = await client.query(dialect.placeholders(query.sql), [...query.params]);
      return outcome(result.rows as SqlRow[], result.rowCount ?? result.rows.length);
    },
    close: () => client.end(),
  };
}

/** Deterministic pseudo-random 0..999 per row `g` and salt `p` (a prime): no pattern by g mod n. */
const mix = (g: string, p: number): string => `((${g} * ${p}) % 1000003) % 1000`;

/**
 * The mixed rows as SQL expressions of `g` (1..N), shared by the three loaders. `now`, `plus`
 * and `text` write the dialect's time and string operations.
 */
function mixedRow(
  g: string,
  time: { past: string; future: string },
  concat: (a: string, b: string) => string,
): Record<string, string> {
  const [a, b, c, e, q] = [7919, 104729, 1299709, 15485863, 32452843].map((p) => mix(g, p));
  const state = `CASE WHEN ${b} < 50 THEN 'timer' WHEN ${b} < 51 THEN 'running'
    WHEN ${b} < 61 THEN 'deadletter' ELSE 'async' END`;
  return {
    type: `CASE WHEN ${a} < 600 THEN 'noop' WHEN ${a} < 800 THEN 'email' ELSE 'report' END`,
    state,
    priority: `CASE WHEN ${c} < 20 THEN 10 WHEN ${c} < 120 THEN 5 ELSE 0 END`,
    due_at: `CASE WHEN ${b} < 50 THEN ${time.future} ELSE ${time.past} END`,
    scope: `CASE WHEN ${e} < 50 THEN ${concat("'scope-'", `${g} % 1000`)} END`,
    exclusive: `CASE WHEN ${e} < 40 THEN 1 ELSE 0 END`,
    queue: `CASE WHEN ${q} < 300 THEN 'critical' ELSE 'default' END`,
    lock_owner: `CASE WHEN ${b} = 50 THEN 'other' END`,
    lock_token: `CASE WHEN ${b} = 50 THEN 'token' END`,
    lock_expires_at: `CASE WHEN ${b} = 50 THEN ${time.future} END`,
  };
}

function insertMixed(
  jobs: string,
  source: string,
  g: string,
  time: { past: string; future: string; now: string },
  concat: (a: string, b: string) => string,
  bool: (e: string) => string,
  json: (g: string) => string,
): string {
  const row = mixedRow(g, time, concat);
  return `INSERT INTO ${jobs} (type, payload, state, priority, due_at, retries_left, attempts,
      scope, exclusive, queue, created_at, lock_owner, lock_token, lock_expires_at)
    SELECT ${row.type}, ${json(g)}, ${row.state}, ${row.priority}, ${row.due_at}, 3, 0,
      ${row.scope}, ${bool(row.exclusive as string)}, ${row.queue}, ${time.now},
      ${row.lock_owner}, ${row.lock_token}, ${row.lock_expires_at}
    FROM ${source}`;
}

async function loadPostgres(rows: number, analysed: boolean): Promise<Loaded> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${PG_SCHEMA}" CASCADE`);
  const real = new PostgresJobStore({ connectionString: PG_URL, schema: PG_SCHEMA, max: 2 });
  await real.migrate();
  await real.close();
  const jobs = `"${PG_SCHEMA}".jobs`;
  // Nothing may analyse the table behind our back while it loads and is explained.
  await admin.query(
    `ALTER TABLE ${jobs} SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)`,
  );
  const step = 100_000;
  for (let from = 1; from <= rows; from += step) {
    const to = Math.min(rows, from + step - 1);
    await admin.query(
      insertMixed(
        jobs,
        `generate_series(${from}::bigint, ${to}::bigint) AS s(g)`,
        's.g',
        {
          past: `now() - interval '10 minutes' + s.g * interval '100 microseconds'`,
          future: `now() + interval '1 hour'`,
          now: 'now()',
        },
        (a, b) => `${a} || (${b})`,
        (e) => `(${e}) = 1`,
        (g) => `jsonb_build_object('i', ${g})`,
      ),
    );
  }
  if (analysed) await admin.query(`ANALYZE ${jobs}`);
  const stats = await admin.query(
    `SELECT s.last_analyze, s.last_autoanalyze, c.reltuples,
       (SELECT count(*) FROM pg_stats WHERE schemaname = $1 AND tablename = 'jobs')::int AS columns_with_stats
     FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
     WHERE s.schemaname = $1 AND s.relname = 'jobs'`,
    [PG_SCHEMA],
  );
  const s = stats.rows[0];
  console.log(
    `\n${rows.toLocaleString('en-US')} rows loaded into ${jobs}; ${analysed ? 'analysed' : 'never analysed'}: last_analyze ${s?.last_analyze ?? 'never'}, last_autoanalyze ${s?.last_autoanalyze ?? 'never'}, columns with statistics ${s?.columns_with_stats}, reltuples ${s?.reltuples} (autovacuum off for this table)`,
  );
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  // As on the store's own sessions (@jobs/postgres `sessionSettings`): nothing JIT-compiled.
  await client.query('SET jit = off');
  return explainingStore(real, postgresExplainer(client, real.dialect), async () => {
    await admin.query(`DROP SCHEMA IF EXISTS "${PG_SCHEMA}" CASCADE`);
    await admin.end();
  });
}

// ---- MySQL / MariaDB -------------------------------------------------------------------------

function mysqlExplainer(connection: mysql.Connection, mariadb: boolean): Explainer {
  const run = async (query: Query): Promise<QueryOutcome> => {
    const [result] = await connection.query({ sql: query.sql, values: [...query.params] });
    if (Array.isArray(result)) return outcome(result as SqlRow[], result.length);
    const header = result as mysql.ResultSetHeader;
    return outcome([], header.affectedRows, header.insertId);
  };
  return {
    ...transactions((sql) => connection.query(sql), 'START TRANSACTION'),
    async explain(query) {
      if (
        !/^\s*(SELECT|UPDATE|DELETE|INSERT|WITH)\b/i.test(query.sql) ||
        !/\bFROM\b|\bINTO\b|\bUPDATE\b/i.test(query.sql)
      ) {
        return '   (no table read)';
      }
      await connection.query('SAVEPOINT plan');
      const started = performance.now();
      const [rows] = await connection.query({
        sql: `${mariadb ? 'ANALYZE' : 'EXPLAIN ANALYZE'} ${query.sql}`,
        values: [...query.params],
      });
      const ms = performance.now() - started;
      await connection.query('ROLLBACK TO SAVEPOINT plan');
      const list = rows as Record<string, unknown>[];
      if (!mariadb) {
        return list
          .map((r) => `   ${String(Object.values(r)[0]).split('\n').join('\n   ')}`)
          .join('\n');
      }
      const columns = ['table', 'type', 'key', 'rows', 'r_rows', 'filtered', 'r_filtered', 'Extra'];
      const cells = [columns, ...list.map((r) => columns.map((c) => String(r[c] ?? '')))];
      const widths = columns.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
      return `${cells
        .map((r) => `   ${r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ')}`)
        .join('\n')}\n   (${ms.toFixed(2)} ms)`;
    },
    run,
    close: () => connection.end(),
  };
}

async function loadMysql(rows: number, analysed: boolean): Promise<Loaded> {
  const admin = await mysql.createConnection({ uri: MYSQL_URL });
  await admin.query(`DROP DATABASE IF EXISTS \`${MYSQL_DATABASE}\``);
  await admin.query(`CREATE DATABASE \`${MYSQL_DATABASE}\``);
  const real = new MysqlJobStore({ uri: MYSQL_URL, database: MYSQL_DATABASE, connectionLimit: 2 });
  await real.migrate();
  const version = await real.serverVersion();
  await real.close();
  const jobs = `\`${MYSQL_DATABASE}\`.\`jobs_jobs\``;
  const digits = (name: string): string =>
    `(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) ${name}`;
  const step = 100_000;
  for (let from = 1; from <= rows; from += step) {
    const count = Math.min(step, rows - from + 1);
    const g = `(${from} + d0.d + 10 * d1.d + 100 * d2.d + 1000 * d3.d + 10000 * d4.d)`;
    await admin.query(
      insertMixed(
        jobs,
        `${['d0', 'd1', 'd2', 'd3', 'd4'].map(digits).join(', ')}
         WHERE d0.d + 10 * d1.d + 100 * d2.d + 1000 * d3.d + 10000 * d4.d < ${count}`,
        g,
        {
          past: `UTC_TIMESTAMP(3) - INTERVAL 10 MINUTE + INTERVAL ${g} * 100 MICROSECOND`,
          future: 'UTC_TIMESTAMP(3) + INTERVAL 1 HOUR',
          now: 'UTC_TIMESTAMP(3)',
        },
        (a, b) => `CONCAT(${a}, ${b})`,
        (e) => e,
        (x) => `CONCAT('{"i":', ${x}, '}')`,
      ),
    );
  }
  if (analysed) await admin.query(`ANALYZE TABLE ${jobs}`);
  console.log(
    `\n${rows.toLocaleString('en-US')} rows loaded into ${jobs} (${version.raw})${analysed ? ', ANALYZE TABLE run' : ''}; InnoDB samples index statistics by itself, so the statements name their index rather than trust them`,
  );
  const connection = await mysql.createConnection({
    uri: MYSQL_URL,
    database: MYSQL_DATABASE,
    dateStrings: true,
    supportBigNumbers: true,
    timezone: 'Z',
  });
  await connection.query("SET SESSION time_zone = '+00:00'");
  await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  return explainingStore(
    real,
    mysqlExplainer(connection, version.flavor === 'mariadb'),
    async () => {
      await admin.query(`DROP DATABASE IF EXISTS \`${MYSQL_DATABASE}\``);
      await admin.end();
    },
  );
}

// ---- SQLite ----------------------------------------------------------------------------------

async function loadSqlite(rows: number, analysed: boolean): Promise<Loaded> {
  const folder = mkdtempSync(join(tmpdir(), 'jobs-plans-'));
  const real = new SqliteJobStore({ filename: join(folder, 'plans.db') });
  await real.migrate();
  const db = real.db;
  const now = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`;
  db.exec(
    insertMixed(
      'jobs_jobs',
      `(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ${rows}) SELECT g FROM s)`,
      'g',
      { past: `${now} - 600000 + g / 10`, future: `${now} + 3600000`, now },
      (a, b) => `${a} || (${b})`,
      (e) => e,
      (g) => `json_object('i', ${g})`,
    ),
  );
  if (analysed) db.exec('ANALYZE');
  const stat = db
    .prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'sqlite_stat1'")
    .get() as { n: number };
  console.log(
    `\n${rows.toLocaleString('en-US')} rows loaded into jobs_jobs; ${analysed ? 'analysed' : 'never analysed'}: sqlite_stat1 ${stat.n ? 'exists' : 'absent'}`,
  );
  const explainer: Explainer = {
    ...transactions((sql) => db.exec(sql), 'BEGIN IMMEDIATE'),
    async explain(query) {
      const plan = db.prepare(`EXPLAIN QUERY PLAN ${query.sql}`).all(...query.params) as {
        id: number;
        parent: number;
        detail: string;
      }[];
      const depth = new Map<number, number>([[0, 0]]);
      const lines = plan.map((row) => {
        const d = (depth.get(row.parent) ?? 0) + 1;
        depth.set(row.id, d);
        return `   ${'  '.repeat(d - 1)}${row.detail}`;
      });
      db.exec('SAVEPOINT plan');
      const statement = db.prepare(query.sql);
      const started = performance.now();
      if (statement.reader) statement.all(...query.params);
      else statement.run(...query.params);
      const ms = performance.now() - started;
      db.exec('ROLLBACK TO SAVEPOINT plan');
      db.exec('RELEASE SAVEPOINT plan');
      return `${lines.join('\n')}\n   (${ms.toFixed(2)} ms)`;
    },
    async run(query) {
      const statement = db.prepare(query.sql);
      if (statement.reader) {
        const found = statement.all(...query.params) as SqlRow[];
        return outcome(found, found.length);
      }
      const info = statement.run(...query.params);
      return outcome([], info.changes, info.lastInsertRowid);
    },
    close: async () => {
      await real.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
  return explainingStore(real, explainer);
}

// ---- the hot statements ----------------------------------------------------------------------

async function explainHotPath(
  database: Database,
  store: JobStore,
  executor: ExplainingExecutor,
): Promise<void> {
  const say = (label: string): void => {
    executor.label = `${database}: ${label}`;
  };
  const refs = (jobs: { id: string; lockToken: string | null }[]): JobRef[] =>
    jobs.map((job) => ({ id: job.id, token: job.lockToken ?? '' }));
  say(`acquire a batch of ${BATCH} (types noop, email)`);
  const first = await store.acquire(REQUEST);
  console.log(`\n=> acquired ${first.length}`);
  say(`completeAndAcquire: complete those ${first.length}, acquire the next ${BATCH}`);
  const second = store.completeAndAcquire
    ? (await store.completeAndAcquire(refs(first), REQUEST)).jobs
    : [];
  console.log(`\n=> acquired ${second.length}`);
  say(`renewLeases of ${second.length}`);
  await store.renewLeases(REQUEST.owner, REQUEST.leaseMs, refs(second));
  say(`complete ${second.length}`);
  await store.complete(refs(second));
  say('nextDueAt (an idle engine: when is the next job due?)');
  await store.nextDueAt({ types: REQUEST.types, queues: null, tenants: null });
  say('recoverExpiredLeases (100)');
  await store.recoverExpiredLeases(100);
  const client = new JobEngine({ store, logger: silentLogger });
  say('enqueue one job');
  await client.enqueue('noop', { i: 0 });
  say(`enqueue ${BATCH} jobs`);
  await client.enqueueMany(
    Array.from({ length: BATCH }, (_, i) => ({ type: 'noop', payload: { i } })),
  );
  await explainBlockedSet(store, client, say);
}

/**
 * The blocked set (`operations/blocked-set.ts`) on the loaded table: a scope whose two slots are
 * taken gets a backlog of 20,000 (all but a short queue are blocked), one of its running jobs
 * completes (the settle lets the next one in), and a sweep runs with the next recovery pass.
 */
async function explainBlockedSet(
  store: JobStore,
  client: JobEngine,
  say: (label: string) => void,
): Promise<void> {
  const request: AcquireRequest = { ...REQUEST, types: ['limited'], limit: 10 };
  const limited = { scope: 'full-scope', scopeLimit: 2 };
  say('enqueue 2 jobs into an empty scope (limit 2)');
  await client.enqueueMany(
    [0, 1].map((i) => ({ type: 'limited', payload: { i }, options: limited })),
  );
  say('acquire them (the scope is full)');
  const running = await store.acquire(request);
  console.log(`\n=> acquired ${running.length}`);
  say('enqueue 20,000 jobs into the full scope (one INSERT batch, then the scope rebalanced)');
  await client.enqueueMany(
    Array.from({ length: 20_000 }, (_, i) => ({
      type: 'limited',
      payload: { i },
      options: limited,
    })),
  );
  say('acquire behind the full scope (types noop, email: the blocked rows are not walked)');
  await store.acquire({ ...REQUEST, limit: 10 });
  say('complete one running job of the full scope (then its scope rebalanced: one let in)');
  const [first] = running;
  if (first) await store.complete([refOf(first)]);
  say('recoverExpiredLeases (100), then a sweep of the blocked sets');
  await store.recoverExpiredLeases(100);
}

export async function runPlans(argv: readonly string[]): Promise<void> {
  const analysed = argv.includes('--analysed');
  const at = argv.indexOf('--rows');
  const rows = at >= 0 ? Number(argv[at + 1]) : argv.includes('--quick') ? 100_000 : 1_000_000;
  const chosen = DATABASES.filter((d) => argv.includes(d));
  for (const database of chosen.length ? chosen : DATABASES) {
    console.log(`\n==================== plans: ${database} ====================`);
    let loaded: Loaded;
    try {
      loaded =
        database === 'postgres'
          ? await loadPostgres(rows, analysed)
          : database === 'mysql'
            ? await loadMysql(rows, analysed)
            : await loadSqlite(rows, analysed);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (/ECONNREFUSED|connect/i.test(message)) {
        console.log(`[bench] plans: ${database} skipped (database unreachable: ${message})`);
        continue;
      }
      throw error;
    }
    try {
      await explainHotPath(database, loaded.store, loaded.explaining);
    } finally {
      await loaded.close();
    }
  }
}
