/**
 * The three SQL databases every test of this package runs against, in one table
 * (`describe.each(DATABASES)`): how to reach each, make a fresh place for one test file (a
 * PostgreSQL schema, a MySQL/MariaDB database, a SQLite file), open stores on it and read rows
 * around them. A server that is down fails the run under `CI=true`; locally its tests are
 * skipped with one loud line, as in the driver packages.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** A store of any of the three drivers: the shared SQL store with `migrate` and `close`. */
export type SqlStore = PostgresJobStore | MysqlJobStore | SqliteJobStore;

/** One test file's own place in a database; `drop()` removes it (close its stores first). */
export interface Place {
  /** A new store on this place with its own small pool (not migrated). */
  open(options?: { connections?: number }): SqlStore;
  /** One statement around the stores; its rows. `?` placeholders on MySQL and SQLite, `$1` on PostgreSQL. */
  sql(text: string, values?: unknown[]): Promise<Record<string, unknown>[]>;
  /** The jobs table, qualified and quoted for `sql`. */
  jobs: string;
  /** A table of this place named `name`, qualified and quoted for `sql`. */
  table(name: string): string;
  /** Where this place is, for a child process to open its own store there (`fixtures/open.ts`). */
  target: Target;
  drop(): Promise<void>;
}

/** A place as a child process is told it (JSON). */
export type Target =
  | { name: 'postgres'; url: string; schema: string }
  | { name: 'mysql'; url: string; database: string }
  | { name: 'sqlite'; filename: string };

export interface TestDatabase {
  name: 'postgres' | 'mysql' | 'sqlite';
  /** Why this database's tests cannot run here (its server is down, locally); null: they run. */
  missing: string | null;
  /** A fresh, empty place for one test file. */
  create(): Promise<Place>;
}

const randomName = (prefix: string): string => `${prefix}_${randomBytes(5).toString('hex')}`;

/** Null when `ping` answers; else the reason, loudly, or (under `CI=true`) an error. */
async function reach(
  label: string,
  url: string,
  ping: () => Promise<void>,
): Promise<string | null> {
  try {
    await ping();
    return null;
  } catch (error) {
    if (process.env.CI === 'true') {
      throw new Error(`${label} at ${url} is unreachable and CI=true`, { cause: error });
    }
    const reason = `no ${label} at ${url}`;
    console.warn(`\n!!! @jobs/sql-tests: ${label} tests SKIPPED: ${reason}\n`);
    return reason;
  }
}

async function pgSql(text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

async function mysqlSql(text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
  const connection = await mysql.createConnection({
    uri: MYSQL_URL,
    dateStrings: true,
    connectTimeout: 10_000,
  });
  try {
    const [rows] = await connection.query(text, values);
    return rows as Record<string, unknown>[];
  } finally {
    await connection.end();
  }
}

const postgres: TestDatabase = {
  name: 'postgres',
  missing: await reach('PostgreSQL', PG_URL, async () => {
    await pgSql('SELECT 1');
  }),
  async create() {
    const schema = randomName('sqlt');
    return {
      open: ({ connections = 4 } = {}) =>
        new PostgresJobStore({ connectionString: PG_URL, schema, max: connections }),
      sql: pgSql,
      jobs: `"${schema}".jobs`,
      table: (name) => `"${schema}"."${name}"`,
      target: { name: 'postgres', url: PG_URL, schema },
      drop: async () => {
        await pgSql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      },
    };
  },
};

const mysqlDatabase: TestDatabase = {
  name: 'mysql',
  missing: await reach('MySQL/MariaDB', MYSQL_URL, async () => {
    await mysqlSql('SELECT 1');
  }),
  async create() {
    const database = randomName('sqlt');
    await mysqlSql(`CREATE DATABASE \`${database}\``);
    return {
      open: ({ connections = 4 } = {}) =>
        new MysqlJobStore({ uri: MYSQL_URL, database, connectionLimit: connections }),
      sql: mysqlSql,
      jobs: `\`${database}\`.jobs_jobs`,
      table: (name) => `\`${database}\`.\`${name}\``,
      target: { name: 'mysql', url: MYSQL_URL, database },
      drop: async () => {
        await mysqlSql(`DROP DATABASE IF EXISTS \`${database}\``);
      },
    };
  },
};

const sqlite: TestDatabase = {
  name: 'sqlite',
  missing: null,
  async create() {
    const folder = mkdtempSync(join(tmpdir(), 'jobs-sql-tests-'));
    const filename = join(folder, 'jobs.db');
    return {
      open: () => new SqliteJobStore({ filename }),
      sql: async (text, values = []) => {
        const db = new Database(filename);
        try {
          const statement = db.prepare(text);
          if (statement.reader) return statement.all(...values) as Record<string, unknown>[];
          statement.run(...values);
          return [];
        } finally {
          db.close();
        }
      },
      jobs: 'jobs_jobs',
      table: (name) => `"${name}"`,
      target: { name: 'sqlite', filename },
      drop: async () => rmSync(folder, { recursive: true, force: true }),
    };
  },
};

/** Every SQL database, for `describe.each`. */
export const DATABASES: readonly TestDatabase[] = [postgres, mysqlDatabase, sqlite];

/** The databases of `names`, in that order (a test of what only some of them have). */
export function databases(...names: TestDatabase['name'][]): TestDatabase[] {
  return names.map((name) => DATABASES.find((db) => db.name === name) as TestDatabase);
}
