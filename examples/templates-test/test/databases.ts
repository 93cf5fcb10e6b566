/**
 * The servers examples 02 and 04 run on: a fresh database (or schema name) per run, named
 * `example_*_<random>`, dropped afterwards, so runs never collide with each other or other tests.
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

export const uniqueName = (prefix: string): string => `${prefix}_${randomBytes(5).toString('hex')}`;

export async function onPostgres(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2_000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function onMysql<T>(sql: string): Promise<T> {
  const connection = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 2_000 });
  try {
    const [rows] = await connection.query(sql);
    return rows as T;
  } finally {
    await connection.end();
  }
}

export interface ServerDatabase {
  /** The URL of the new database, with the scheme example 04 expects for this server. */
  url: string;
  drop(): Promise<void>;
}

/** A new, empty PostgreSQL database. */
export async function createPostgresDatabase(): Promise<ServerDatabase> {
  const name = uniqueName('example_typeorm');
  await onPostgres(`CREATE DATABASE "${name}"`);
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => onPostgres(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
  };
}

/** A new, empty MySQL/MariaDB database; its URL says `mariadb://` on MariaDB. */
export async function createMysqlDatabase(): Promise<ServerDatabase> {
  const name = uniqueName('example_typeorm');
  await onMysql(`CREATE DATABASE \`${name}\``);
  const [{ version }] = await onMysql<[{ version: string }]>('SELECT VERSION() AS version');
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  if (/mariadb/i.test(version)) url.protocol = 'mariadb:';
  return {
    url: url.toString(),
    drop: async () => {
      await onMysql(`DROP DATABASE IF EXISTS \`${name}\``);
    },
  };
}

/**
 * Whether the server answers. Locally an absent server skips what needs it with one loud line;
 * under `CI=true` the runs go ahead and fail.
 */
export async function serverAvailable(server: 'postgres' | 'mysql'): Promise<boolean> {
  if (process.env.CI === 'true') return true;
  try {
    if (server === 'postgres') await onPostgres('SELECT 1');
    else await onMysql('SELECT 1');
    return true;
  } catch (error) {
    const url = server === 'postgres' ? PG_URL : MYSQL_URL;
    console.warn(
      `\n!!! examples-templates-test: SKIPPING the ${server} runs — ${url} is unreachable (${String(error)}); set JOBS_PG_URL / JOBS_MYSQL_URL\n`,
    );
    return false;
  }
}
