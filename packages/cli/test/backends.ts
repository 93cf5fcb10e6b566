/**
 * The databases the binary is tested on: a temp SQLite file, a PostgreSQL schema and a MariaDB /
 * MySQL database of their own per test file (dropped afterwards). Unreachable servers: under
 * CI=true the test file fails; locally it is skipped with one loud line.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobStore } from '@jobs/core';
import mysql from 'mysql2/promise';
import pg from 'pg';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

export interface Backend {
  name: 'sqlite' | 'postgres' | 'mysql';
  /** Creates the empty database (schema, file directory). */
  create(): Promise<void>;
  /** Drops it. */
  drop(): Promise<void>;
  /** `--db …` (and table options) naming it. */
  args(): string[];
  /** The same tables, opened in the test process (for setting up jobs and running engines). */
  openStore(): Promise<JobStore>;
  /** `--db …` naming a server nobody listens on (SQLite: none). */
  unreachableArgs: string[] | null;
}

const suffix = (): string => randomBytes(5).toString('hex');

/** True when the server answers; false (with one loud line) or a failure under CI=true. */
async function reachable(what: string, url: string, probe: () => Promise<void>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch (error) {
    if (process.env.CI === 'true') {
      throw new Error(`${what} at ${url} is unreachable and CI=true`, { cause: error });
    }
    console.warn(
      `\n!!! @jobs/cli ${what} tests SKIPPED: nothing answers at ${url} — start it (\`.ci/run\`, \`service postgresql start\`, \`service mariadb start\`) or set JOBS_PG_URL / JOBS_MYSQL_URL\n`,
    );
    return false;
  }
}

export function sqliteBackend(): Backend {
  let dir = '';
  return {
    name: 'sqlite',
    create: async () => {
      dir = mkdtempSync(join(tmpdir(), 'jobs-cli-'));
    },
    drop: async () => {
      rmSync(dir, { recursive: true, force: true });
    },
    args: () => ['--db', join(dir, 'jobs.db')],
    openStore: async () => {
      const { SqliteJobStore } = await import('@jobs/sqlite');
      return new SqliteJobStore({ filename: join(dir, 'jobs.db') });
    },
    unreachableArgs: null,
  };
}

export async function postgresBackend(): Promise<Backend | null> {
  const ok = await reachable('PostgreSQL', PG_URL, async () => {
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
    await client.connect();
    await client.end();
  });
  if (!ok) return null;
  const schema = `cli_${suffix()}`;
  const run = async (sql: string): Promise<void> => {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  return {
    name: 'postgres',
    create: async () => {},
    drop: () => run(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`),
    args: () => ['--db', PG_URL, '--schema', schema],
    openStore: async () => {
      const { PostgresJobStore } = await import('@jobs/postgres');
      return new PostgresJobStore({ connectionString: PG_URL, schema, max: 4 });
    },
    unreachableArgs: ['--db', 'postgres://postgres@127.0.0.1:1/test'],
  };
}

export async function mysqlBackend(): Promise<Backend | null> {
  const ok = await reachable('MySQL/MariaDB', MYSQL_URL, async () => {
    const connection = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 10_000 });
    await connection.end();
  });
  if (!ok) return null;
  const database = `jobs_cli_${suffix()}`;
  const url = new URL(MYSQL_URL);
  url.pathname = `/${database}`;
  const run = async (sql: string): Promise<void> => {
    const connection = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      await connection.query(sql);
    } finally {
      await connection.end();
    }
  };
  return {
    name: 'mysql',
    create: () => run(`CREATE DATABASE \`${database}\``),
    drop: () => run(`DROP DATABASE IF EXISTS \`${database}\``),
    args: () => ['--db', url.toString()],
    openStore: async () => {
      const { MysqlJobStore } = await import('@jobs/mysql');
      return new MysqlJobStore({ uri: url.toString(), connectionLimit: 4 });
    },
    unreachableArgs: ['--db', 'mysql://root@127.0.0.1:1/test'],
  };
}
