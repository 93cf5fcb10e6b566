/**
 * The databases the dashboard is tested on: a temp SQLite file and a PostgreSQL schema of its
 * own per test file (dropped afterwards). Unreachable PostgreSQL: under CI=true a failure,
 * locally the PostgreSQL tests are skipped with one loud line.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobStore } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import pg from 'pg';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface Backend {
  name: 'sqlite' | 'postgres';
  /** A migrated store on fresh tables. */
  open(): Promise<JobStore>;
  /** Drops the tables. */
  drop(): Promise<void>;
  /** Has the database gather the jobs table's statistics (where it keeps row estimates). */
  analyze?(): Promise<void>;
}

export function sqliteBackend(): Backend {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-dashboard-'));
  return {
    name: 'sqlite',
    open: async () => {
      const store = new SqliteJobStore({ filename: join(dir, 'jobs.db') });
      await store.migrate();
      return store;
    },
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function pgQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3_000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A PostgreSQL backend on a schema of its own, or null (skipped) when nothing answers locally. */
export async function postgresBackend(): Promise<Backend | null> {
  try {
    await pgQuery('SELECT 1');
  } catch (error) {
    if (process.env.CI === 'true')
      throw new Error(`PostgreSQL at ${PG_URL} is unreachable and CI=true`, { cause: error });
    console.warn(
      `\n!!! @jobs/dashboard PostgreSQL tests SKIPPED: nothing answers at ${PG_URL} — start it or set JOBS_PG_URL\n`,
    );
    return null;
  }
  const schema = `dash_${randomBytes(5).toString('hex')}`;
  return {
    name: 'postgres',
    open: async () => {
      const store = new PostgresJobStore({ connectionString: PG_URL, schema, max: 6 });
      await store.migrate();
      return store;
    },
    drop: () => pgQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`),
    analyze: () => pgQuery(`ANALYZE "${schema}".jobs`),
  };
}
