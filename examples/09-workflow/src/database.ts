/**
 * Where the order workflow keeps its jobs and its own table, chosen by one string (the
 * `DATABASE_URL` of `main.ts`):
 *
 *   postgres://user:password@host:5432/shop   PostgreSQL (@jobs/postgres)
 *   mysql://user:password@host:3306/shop      MySQL or MariaDB (@jobs/mysql)
 *   unset                                     a SQLite file (@jobs/sqlite), `JOBS_DB` or workflow.db
 *
 * Each gives the job store, a way to run the app's own statements, and a way to write through
 * the transaction a fenced step gets (`ctx.step(name, fn, { transaction: true })`): a
 * better-sqlite3 Database, a `pg` PoolClient or a mysql2 connection. SQL here uses `?`
 * placeholders; PostgreSQL's are numbered for it.
 */
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import type { JobStore } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';

export interface OrderDatabase {
  /** What it is, for the first line the example prints. */
  label: string;
  store: JobStore;
  /** Runs one statement of the app's own, outside any job; answers its rows. */
  query(sql: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  /** Runs one write through a fenced step's transaction `tx`. */
  writeIn(tx: unknown, sql: string, params: unknown[]): Promise<void>;
  close(): Promise<void>;
}

/** `?` → `$1`, `$2`, … (PostgreSQL's placeholders). */
const numbered = (sql: string): string => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

interface Queryable {
  query(sql: string, params?: unknown[]): Promise<unknown>;
}

export async function openDatabase(url: string | undefined): Promise<OrderDatabase> {
  if (url && /^postgres(ql)?:\/\//.test(url)) {
    const store = new PostgresJobStore({ connectionString: url, schema: 'order_workflow' });
    return {
      label: 'PostgreSQL (schema order_workflow)',
      store,
      query: async (sql, params = []) => (await store.pool.query(numbered(sql), params)).rows,
      writeIn: async (tx, sql, params) => {
        await (tx as Queryable).query(numbered(sql), params);
      },
      close: () => store.close(),
    };
  }
  if (url && /^(mysql|mariadb):\/\//.test(url)) {
    const pool = mysql.createPool({ uri: url.replace(/^mariadb:/, 'mysql:'), connectionLimit: 8 });
    const store = new MysqlJobStore({ pool, tablePrefix: 'order_workflow_' });
    return {
      label: 'MySQL/MariaDB (tables order_workflow_*)',
      store,
      query: async (sql, params = []) => {
        const [rows] = await pool.query(sql, params);
        return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
      },
      writeIn: async (tx, sql, params) => {
        await (tx as Queryable).query(sql, params);
      },
      close: async () => {
        await store.close();
        await pool.end();
      },
    };
  }
  // SQLite: the jobs and the app's table in one file, made anew on each run.
  const filename = resolve(process.env.JOBS_DB ?? 'workflow.db');
  for (const suffix of ['', '-wal', '-shm']) rmSync(filename + suffix, { force: true });
  const store = new SqliteJobStore({ filename });
  const app = new Database(filename);
  return {
    label: `SQLite (${process.env.JOBS_DB ?? 'workflow.db'})`,
    store,
    query: async (sql, params = []) => {
      const statement = app.prepare(sql);
      if (statement.reader) return statement.all(...params) as Record<string, unknown>[];
      statement.run(...params);
      return [];
    },
    writeIn: async (tx, sql, params) => {
      (tx as Database.Database).prepare(sql).run(...params);
    },
    close: async () => {
      await store.close();
      app.close();
    },
  };
}
