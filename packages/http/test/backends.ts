/**
 * The stores the worker API is tested on: a temp SQLite file, a PostgreSQL schema and a
 * MariaDB/MySQL database of their own per test file (dropped afterwards), and the helpers the
 * TypeORM file builds its DataSources with. Unreachable servers: under CI=true the file fails;
 * locally it is skipped with one loud line.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { StoreFactory } from './harness.js';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** A name no other test file uses, for its schema or database: `prefix` and random hex. */
export const uniqueName = (prefix: string): string => `${prefix}_${randomBytes(5).toString('hex')}`;

async function reachable(what: string, url: string, probe: () => Promise<void>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch (error) {
    if (process.env.CI === 'true') {
      throw new Error(`${what} at ${url} is unreachable and CI=true`, { cause: error });
    }
    console.warn(
      `\n!!! @jobs/http ${what} tests SKIPPED: nothing answers at ${url} — start it or set JOBS_PG_URL / JOBS_MYSQL_URL\n`,
    );
    return false;
  }
}

/** A migrated SQLite store in a temp directory; `file` is its path (for child processes). */
export function sqliteStore(): { file: string; factory: StoreFactory } {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-http-'));
  const file = join(dir, 'jobs.db');
  return {
    file,
    factory: async () => {
      const store = new SqliteJobStore({ filename: file });
      await store.migrate();
      return { store, drop: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  };
}

/** Whether PostgreSQL answers at `PG_URL` (see the file's header for when it does not). */
export function postgresReachable(): Promise<boolean> {
  return reachable('PostgreSQL', PG_URL, async () => {
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
    await client.connect();
    await client.end();
  });
}

/** Runs `sql` on PostgreSQL at `PG_URL`. */
export async function postgresQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  await client.query(sql).finally(() => client.end());
}

/** Whether MariaDB/MySQL answers at `MYSQL_URL` (see the file's header for when it does not). */
export function mysqlReachable(): Promise<boolean> {
  return reachable('MySQL/MariaDB', MYSQL_URL, async () => {
    const connection = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 10_000 });
    await connection.end();
  });
}

/** Runs `sql` on MariaDB/MySQL at `MYSQL_URL`; answers its rows. */
export async function mysqlQuery(sql: string): Promise<unknown> {
  const connection = await mysql.createConnection({ uri: MYSQL_URL });
  try {
    const [rows] = await connection.query(sql);
    return rows;
  } finally {
    await connection.end();
  }
}

export async function postgresStore(): Promise<StoreFactory | null> {
  if (!(await postgresReachable())) return null;
  return async () => {
    const schema = uniqueName('http');
    const store = new PostgresJobStore({ connectionString: PG_URL, schema, max: 6 });
    await store.migrate();
    return {
      store,
      drop: () => postgresQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`),
    };
  };
}

export async function mysqlStore(): Promise<StoreFactory | null> {
  if (!(await mysqlReachable())) return null;
  return async () => {
    const database = uniqueName('jobs_http');
    await mysqlQuery(`CREATE DATABASE \`${database}\``);
    const url = new URL(MYSQL_URL);
    url.pathname = `/${database}`;
    const store = new MysqlJobStore({ uri: url.toString(), connectionLimit: 6 });
    await store.migrate();
    return {
      store,
      drop: async () => {
        await mysqlQuery(`DROP DATABASE IF EXISTS \`${database}\``);
      },
    };
  };
}
