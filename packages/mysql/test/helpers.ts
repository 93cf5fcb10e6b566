/**
 * Test helpers: the server URL, a random database per test file (dropped afterwards), and the one
 * loud line when MariaDB/MySQL is not running.
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll } from 'vitest';
import { MysqlJobStore, type MysqlJobStoreOptions } from '../src/index.js';

export const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/**
 * How long the helpers' own connections (creating, emptying and dropping test databases) wait
 * for the server's greeting. On a loaded 2-core CI machine MariaDB has taken over mysql2's default
 * 10 s to greet one (`connect ETIMEDOUT` in a file's teardown, every test of it passed); the
 * stores under test keep their own, shorter deadlines.
 */
export const HELPER_CONNECT_TIMEOUT_MS = 60_000;

/** True when the server answers. Under CI=true an unreachable server fails the run. */
export async function mysqlReachable(): Promise<boolean> {
  try {
    const connection = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 10_000 });
    await connection.end();
    return true;
  } catch (error) {
    if (process.env.CI === 'true') {
      throw new Error(`MySQL/MariaDB at ${MYSQL_URL} is unreachable and CI=true`, { cause: error });
    }
    console.warn(
      `\n!!! @jobs/mysql tests SKIPPED: no MySQL/MariaDB at ${MYSQL_URL} — start one (\`service mariadb start\` or \`.ci/run\`) or set JOBS_MYSQL_URL\n`,
    );
    return false;
  }
}

export const reachable = await mysqlReachable();

export function randomName(prefix = 'jobs_test'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

/** Runs statements on a short-lived connection. */
export async function sql(
  text: string,
  values: unknown[] = [],
): Promise<Record<string, unknown>[]> {
  const connection = await mysql.createConnection({
    uri: MYSQL_URL,
    dateStrings: true,
    connectTimeout: HELPER_CONNECT_TIMEOUT_MS,
  });
  try {
    const [rows] = await connection.query(text, values);
    return rows as Record<string, unknown>[];
  } finally {
    await connection.end();
  }
}

/** Creates an empty database with a random name. */
export async function createDatabase(): Promise<string> {
  const name = randomName();
  await sql(`CREATE DATABASE \`${name}\``);
  return name;
}

export async function dropDatabase(name: string): Promise<void> {
  await sql(`DROP DATABASE IF EXISTS \`${name}\``);
}

/** A store on `database` with its own small pool (not migrated). */
export function openStore(
  database: string,
  options: Partial<MysqlJobStoreOptions> = {},
): MysqlJobStore {
  return new MysqlJobStore({ uri: MYSQL_URL, database, connectionLimit: 4, ...options });
}

/** The store's tables under each reused prefix, read once: they stay while its version does. */
const prefixTables = new Map<string, string[]>();

/**
 * Empties the tables under `tablePrefix` in `database` (a closed store's; a test's `effects`
 * beside them is dropped) for another test, the version table kept. False, with nothing changed,
 * when they are not at `version` (a test left them elsewhere): then they are no use to the next
 * test. DELETE, not TRUNCATE: a dozen small tables empty in ~2 ms instead of ~20.
 */
export async function emptyTables(
  database: string,
  tablePrefix: string,
  version: number,
): Promise<boolean> {
  const connection = await mysql.createConnection({
    uri: MYSQL_URL,
    database,
    connectTimeout: HELPER_CONNECT_TIMEOUT_MS,
  });
  try {
    const migrations = `${tablePrefix}jobs_migrations`;
    const found = await connection.query(`SELECT MAX(version) AS v FROM \`${migrations}\``).then(
      ([rows]) => Number((rows as { v: unknown }[])[0]?.v),
      () => null,
    );
    if (found !== version) return false;
    let tables = prefixTables.get(`${database}.${tablePrefix}`);
    if (tables === undefined) {
      const [rows] = (await connection.query(
        `SELECT table_name AS name FROM information_schema.tables
         WHERE table_schema = ? AND table_type = 'BASE TABLE' AND LEFT(table_name, CHAR_LENGTH(?)) = ?`,
        [database, tablePrefix, tablePrefix],
      )) as [{ name: string }[], unknown];
      tables = rows
        .map((row) => row.name)
        .filter((name) => name !== migrations && name !== `${tablePrefix}effects`);
      prefixTables.set(`${database}.${tablePrefix}`, tables);
    }
    await connection.query(`DROP TABLE IF EXISTS \`${tablePrefix}effects\``);
    for (const name of tables) await connection.query(`DELETE FROM \`${name}\``);
    return true;
  } finally {
    await connection.end();
  }
}

/** The raw row of job `id`, read around the store. */
export async function readRaw(
  store: MysqlJobStore,
  id: string,
): Promise<Record<string, unknown> | null> {
  const rows = await sql(`SELECT * FROM ${store.tables.jobs} WHERE id = ?`, [id]);
  return rows[0] ?? null;
}

/**
 * A test file's own database: `register()` (in its `describe`) creates it before the tests and,
 * after them, closes every store opened through `store()` or handed to `keep()`, then drops it.
 */
export class TestDatabase {
  /** The database's name, once created. */
  name = '';
  private readonly closing: { close(): Promise<unknown> }[] = [];

  register(): void {
    beforeAll(async () => {
      this.name = await createDatabase();
    });
    afterAll(async () => {
      await Promise.allSettled(this.closing.map((s) => s.close()));
      if (this.name) await dropDatabase(this.name);
    });
  }

  /** A store on this database (not migrated), closed after the tests. */
  store(options: Partial<MysqlJobStoreOptions> = {}): MysqlJobStore {
    return this.keep(openStore(this.name, options));
  }

  /** Closes `store` after the tests. */
  keep<S extends { close(): Promise<unknown> }>(store: S): S {
    this.closing.push(store);
    return store;
  }
}
