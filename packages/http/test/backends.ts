/**
 * The stores the worker API is tested on: a temp SQLite file, a PostgreSQL schema and a
 * MariaDB/MySQL database of their own per test file (dropped afterwards). Unreachable servers:
 * under CI=true the file fails; locally it is skipped with one loud line.
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

const suffix = (): string => randomBytes(5).toString('hex');

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

export async function postgresStore(): Promise<StoreFactory | null> {
  const ok = await reachable('PostgreSQL', PG_URL, async () => {
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2_000 });
    await client.connect();
    await client.end();
  });
  if (!ok) return null;
  return async () => {
    const schema = `http_${suffix()}`;
    const store = new PostgresJobStore({ connectionString: PG_URL, schema, max: 6 });
    await store.migrate();
    return {
      store,
      drop: async () => {
        const client = new pg.Client({ connectionString: PG_URL });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end());
      },
    };
  };
}

export async function mysqlStore(): Promise<StoreFactory | null> {
  const ok = await reachable('MySQL/MariaDB', MYSQL_URL, async () => {
    const connection = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 2_000 });
    await connection.end();
  });
  if (!ok) return null;
  const run = async (sql: string): Promise<void> => {
    const connection = await mysql.createConnection({ uri: MYSQL_URL });
    await connection.query(sql).finally(() => connection.end());
  };
  return async () => {
    const database = `jobs_http_${suffix()}`;
    await run(`CREATE DATABASE \`${database}\``);
    const url = new URL(MYSQL_URL);
    url.pathname = `/${database}`;
    const store = new MysqlJobStore({ uri: url.toString(), connectionLimit: 6 });
    await store.migrate();
    return { store, drop: () => run(`DROP DATABASE IF EXISTS \`${database}\``) };
  };
}
