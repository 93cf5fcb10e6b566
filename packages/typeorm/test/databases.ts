/**
 * DataSources for tests: a fresh SQLite file, a fresh PostgreSQL schema, a fresh MariaDB/MySQL
 * database — each with a random suffix and dropped afterwards, so parallel files never collide.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { DataSource, type DataSourceOptions } from 'typeorm';

export const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

export type Driver = 'better-sqlite3' | 'postgres' | 'mysql';

/** One test database: options for as many DataSources as a test wants, and a cleanup. */
export interface TestDatabase {
  driver: Driver;
  options: DataSourceOptions;
  drop(): Promise<void>;
}

const suffix = (): string => randomBytes(5).toString('hex');

export async function createTestDatabase(
  driver: Driver,
  entities: DataSourceOptions['entities'] = [],
): Promise<TestDatabase> {
  if (driver === 'better-sqlite3') {
    const dir = mkdtempSync(join(tmpdir(), 'jobs-typeorm-'));
    return {
      driver,
      options: {
        type: 'better-sqlite3',
        database: join(dir, 'jobs.db'),
        enableWAL: true,
        entities,
      },
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  if (driver === 'postgres') {
    const schema = `jobs_typeorm_${suffix()}`;
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`CREATE SCHEMA "${schema}"`);
    await client.end();
    return {
      driver,
      options: { type: 'postgres', url: PG_URL, schema, entities, extra: { max: 4 } },
      drop: async () => {
        const c = new pg.Client({ connectionString: PG_URL });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await c.end();
      },
    };
  }
  const database = `jobs_typeorm_${suffix()}`;
  const conn = await mysql.createConnection(MYSQL_URL);
  await conn.query(`CREATE DATABASE \`${database}\``);
  const [version] = (await conn.query('SELECT VERSION() AS v')) as unknown as [{ v: string }[]];
  await conn.end();
  // TypeORM reads MariaDB's catalog right only with type 'mariadb'.
  const type = /mariadb/i.test(version[0]?.v ?? '') ? 'mariadb' : 'mysql';
  const url = new URL(MYSQL_URL);
  url.pathname = `/${database}`;
  return {
    driver,
    options: {
      type,
      url: url.toString(),
      timezone: 'Z',
      entities,
      extra: { connectionLimit: 4 },
    },
    drop: async () => {
      const c = await mysql.createConnection(MYSQL_URL);
      await c.query(`DROP DATABASE IF EXISTS \`${database}\``);
      await c.end();
    },
  };
}

export async function openDataSource(db: TestDatabase): Promise<DataSource> {
  const ds = new DataSource(db.options);
  await ds.initialize();
  return ds;
}

/** Whether the driver's server answers; locally an absent server skips the file with one loud line. */
export async function serverAvailable(driver: Driver): Promise<boolean> {
  if (driver === 'better-sqlite3') return true;
  try {
    if (driver === 'postgres') {
      const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
      await c.connect();
      await c.end();
    } else {
      const c = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 10_000 });
      await c.end();
    }
    return true;
  } catch (error) {
    if (process.env.CI === 'true') throw error;
    const how =
      driver === 'postgres'
        ? `PostgreSQL at ${PG_URL} is unreachable (start it: service postgresql start, or set JOBS_PG_URL)`
        : `MySQL/MariaDB at ${MYSQL_URL} is unreachable (start it: service mariadb start, or set JOBS_MYSQL_URL)`;
    console.warn(`\n!!! @jobs/typeorm: SKIPPING ${driver} tests — ${how}\n`);
    return false;
  }
}
