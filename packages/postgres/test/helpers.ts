/**
 * Test helpers: the database URL, a random schema per test file (dropped afterwards), and the
 * one loud line when PostgreSQL is not running.
 */
import { randomBytes } from 'node:crypto';
import { makeNewJob } from '@jobs/conformance';
import type { NewJob } from '@jobs/core';
import { postgresDialect, SqlJobStore } from '@jobs/core/sql';
import pg from 'pg';
import { PostgresJobStore, type PostgresJobStoreOptions } from '../src/index.js';
import { PgExecutor } from '../src/postgres-store.js';

export { sleep } from '@jobs/conformance';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** True when the server answers. Under CI=true an unreachable server fails the run. */
export async function pgReachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch (error) {
    if (process.env.CI === 'true') {
      throw new Error(`PostgreSQL at ${PG_URL} is unreachable and CI=true`, { cause: error });
    }
    console.warn(
      `\n!!! @jobs/postgres tests SKIPPED: no PostgreSQL at ${PG_URL} — start one (e.g. \`.ci/run\` or \`service postgresql start\`) or set JOBS_PG_URL\n`,
    );
    return false;
  }
}

export const reachable = await pgReachable();

export function randomSchema(prefix = 't'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

/** A store on `schema` with its own pool (not migrated). */
export function openStore(
  schema: string,
  options: Partial<PostgresJobStoreOptions> = {},
): PostgresJobStore {
  return new PostgresJobStore({ connectionString: PG_URL, schema, max: 5, ...options });
}

/** Runs one statement on a short-lived connection. */
export async function sql<R extends pg.QueryResultRow = Record<string, unknown>>(
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

export async function dropSchema(schema: string): Promise<void> {
  await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

/** The tables of each reused schema, read once: they stay the same while its version does. */
const schemaTables = new Map<string, string[]>();

/** Rows a test may leave before its schema is vacuumed for the next one (no autovacuum here). */
const VACUUM_AFTER_ROWS = 1_000;

/**
 * Empties the closed `store`'s schema for another test: tables other than the store's own
 * (a test's `effects`) dropped, the store's tables emptied, the version table kept. False, with
 * nothing changed, when the schema is not at the store's newest version (a test left it
 * elsewhere): then it is no use to the next test.
 *
 * DELETE, not TRUNCATE: TRUNCATE gives every table and index a new file and catalog row (~34 ms
 * a call, ~22 ms of it server CPU, where the few rows of a test delete in under a millisecond),
 * and on a server without autovacuum every test's new catalog rows stay behind as dead ones that
 * each later catalog lookup reads past. Ids go on from where they were (nothing of a test can
 * then be taken for the next test's). A test that wrote thousands of rows gets them vacuumed.
 */
export async function emptySchema(store: PostgresJobStore): Promise<boolean> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const version = await client
      .query(`SELECT max(version)::int AS v FROM "${store.schema}".jobs_migrations`)
      .then(
        (r) => r.rows[0]?.v as number | null,
        () => null,
      );
    if (version !== store.schemaVersion()) return false;
    await client.query(`DROP TABLE IF EXISTS "${store.schema}".effects`);
    let tables = schemaTables.get(store.schema);
    if (tables === undefined) {
      const { rows } = await client.query<{ name: string }>(
        `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS name
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
           AND c.relname <> 'jobs_migrations'`,
        [store.schema],
      );
      tables = rows.map((r) => r.name);
      schemaTables.set(store.schema, tables);
    }
    if (tables.length > 0) {
      // One round trip; the simple protocol answers each statement.
      const answers = (await client.query(
        tables.map((table) => `DELETE FROM ${table}`).join('; '),
      )) as unknown as pg.QueryResult | pg.QueryResult[];
      const deleted = (Array.isArray(answers) ? answers : [answers]).reduce(
        (sum, answer) => sum + (answer.rowCount ?? 0),
        0,
      );
      if (deleted > VACUUM_AFTER_ROWS) await client.query(`VACUUM ${tables.join(', ')}`);
    }
    return true;
  } finally {
    await client.end();
  }
}

/** A NewJob of `type` with the conformance suite's neutral defaults. */
export function newJob(type: string, over: Partial<NewJob> = {}): NewJob {
  return makeNewJob({ type, ...over });
}

/** A store on `schema` with a table prefix (the TypeORM store's layout), on the pg executor
 * (not migrated). */
export function prefixedStore(schema: string, prefix: string): SqlJobStore {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
  const dialect = postgresDialect({ tablePrefix: prefix, schema });
  return new SqlJobStore({
    label: 'test',
    name: 'postgres',
    dialect,
    executor: new PgExecutor(pool, { connectionString: PG_URL }, true, dialect),
    capabilities: {
      notifications: false,
      transactionalEnqueue: false,
      multiProcess: true,
    },
  });
}

/** A statement a `pg` client sent: its text and parameters. */
export interface SentStatement {
  text: string;
  values: unknown[];
}

/**
 * Records the statements every `pg` client sends (a store's pool, its heartbeat and listen
 * connections alike) into `sent`, until `restore()`.
 */
export function recordStatements(): { sent: SentStatement[]; restore: () => void } {
  const sent: SentStatement[] = [];
  const originalQuery = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const config = args[0] as { text?: string; values?: unknown[] } | string;
    if (typeof config === 'object' && config?.text) {
      sent.push({ text: config.text, values: config.values ?? [] });
    }
    return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof pg.Client.prototype.query;
  return {
    sent,
    restore: () => {
      pg.Client.prototype.query = originalQuery;
    },
  };
}
