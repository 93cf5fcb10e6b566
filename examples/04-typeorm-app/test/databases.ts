/**
 * A fresh, empty database for each test on each kind of server: a SQLite file in a temp folder,
 * or a new database named `example_typeorm_<random>` on the PostgreSQL / MySQL / MariaDB server of
 * `JOBS_PG_URL` / `JOBS_MYSQL_URL`, dropped afterwards — so runs never collide with each other.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import 'reflect-metadata';
import { DataSource } from 'typeorm';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

export type Server = 'sqlite' | 'postgres' | 'mysql';

export interface TestDatabase {
  /** What the shop is opened on: a SQLite file, or a URL such as `DATABASE_URL` takes. */
  database: string;
  drop(): Promise<void>;
}

/** Runs `sql` on the server's admin database (the one in the env URL). */
async function onServer<T>(server: 'postgres' | 'mysql', sql: string): Promise<T> {
  const admin = new DataSource(
    server === 'postgres'
      ? { type: 'postgres', url: PG_URL, connectTimeoutMS: 2_000 }
      : { type: 'mysql', url: MYSQL_URL, connectTimeout: 2_000 },
  );
  await admin.initialize();
  try {
    return (await admin.query(sql)) as T;
  } finally {
    await admin.destroy();
  }
}

export async function createTestDatabase(server: Server): Promise<TestDatabase> {
  if (server === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'jobs-typeorm-app-test-'));
    return {
      database: join(dir, 'shop.db'),
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const name = `example_typeorm_${randomBytes(5).toString('hex')}`;
  if (server === 'postgres') {
    await onServer('postgres', `CREATE DATABASE "${name}"`);
    const url = new URL(PG_URL);
    url.pathname = `/${name}`;
    return {
      database: url.toString(),
      drop: () => onServer('postgres', `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
    };
  }
  await onServer('mysql', `CREATE DATABASE \`${name}\``);
  const [{ version }] = await onServer<[{ version: string }]>(
    'mysql',
    'SELECT VERSION() AS version',
  );
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  // The shop picks the driver from the scheme: mariadb:// for MariaDB, mysql:// for MySQL.
  if (/mariadb/i.test(version)) url.protocol = 'mariadb:';
  return {
    database: url.toString(),
    drop: () => onServer('mysql', `DROP DATABASE IF EXISTS \`${name}\``),
  };
}

/**
 * Whether the server answers. Locally an absent server skips its tests with one loud line;
 * under `CI=true` it fails them.
 */
export async function serverAvailable(server: Server): Promise<boolean> {
  if (server === 'sqlite' || process.env.CI === 'true') return true;
  try {
    await onServer(server, 'SELECT 1');
    return true;
  } catch (error) {
    const url = server === 'postgres' ? PG_URL : MYSQL_URL;
    console.warn(
      `\n!!! example-typeorm-app: SKIPPING ${server} tests — ${url} is unreachable (${String(error)}); set JOBS_PG_URL / JOBS_MYSQL_URL\n`,
    );
    return false;
  }
}
