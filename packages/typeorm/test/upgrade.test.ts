/**
 * A database made by @jobs/typeorm 0.1 under its default names (`jobs`, `schedules`,
 * `jobs_migrations`, no prefix, on PostgreSQL in the search path's schema) is adopted by
 * `migrate()` with the new defaults: the tables move to the new names, 0002 brings them to the
 * one schema every store shares, and nothing in them is lost.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { makeNewJob } from '@jobs/conformance';
import pg from 'pg';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { typeormV1 } from '../../mysql/test/fixtures/former-schemas.js';
import { typeormV1Statements } from '../../postgres/test/fixtures/former-schemas.js';
import { jobsEntities, TypeormJobStore } from '../src/index.js';
import {
  createTestDatabase,
  type Driver,
  PG_URL,
  serverAvailable,
  type TestDatabase,
} from './databases.js';

const drivers: Driver[] = [];
for (const d of ['better-sqlite3', 'postgres', 'mysql'] as const)
  if (await serverAvailable(d)) drivers.push(d);

/**
 * Creates @jobs/typeorm 0.1's tables under its default names (its inline DDL, version 1
 * recorded) with three jobs. The MySQL and SQLite DDL are those packages' upgrade fixtures.
 */
async function createOldTables(dataSource: DataSource, driver: Driver): Promise<void> {
  const statements =
    driver === 'postgres'
      ? OLD_POSTGRES
      : driver === 'mysql'
        ? typeormV1(String((await dataSource.query('SELECT DATABASE() AS db'))[0].db), '')
        : readFileSync(
            new URL('../../sqlite/test/fixtures/typeorm-v1.sql', import.meta.url),
            'utf8',
          )
            .replaceAll('{{prefix}}', '')
            .split(/;\n/);
  for (const sql of statements) if (sql.trim()) await dataSource.query(sql);
  const now = { postgres: 'now()', mysql: 'UTC_TIMESTAMP(3)', 'better-sqlite3': '0' }[driver];
  const q = driver === 'mysql' ? '`' : '"';
  for (const n of [1, 2, 3]) {
    await dataSource.query(
      `INSERT INTO ${q}jobs${q} (type, payload, state, due_at, retries_left, created_at)
        VALUES ('old', '{"n":${n}}', 'async', ${now}, 3, ${now})`,
    );
  }
}

/** @jobs/typeorm 0.1's PostgreSQL DDL, on the search path. */
const OLD_POSTGRES = typeormV1Statements((name) => `"${name}"`, '');

/**
 * A database without a schema of its own for the DataSource: on PostgreSQL a new database (the
 * old tables go to its `public` schema, the new ones to its `jobs` schema); elsewhere the usual.
 */
async function bareDatabase(driver: Driver): Promise<TestDatabase> {
  if (driver !== 'postgres') return createTestDatabase(driver);
  const name = `jobs_typeorm_up_${randomBytes(5).toString('hex')}`;
  const admin = async (sql: string): Promise<void> => {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(sql);
    await client.end();
  };
  await admin(`CREATE DATABASE "${name}"`);
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  return {
    driver,
    options: { type: 'postgres', url: url.toString(), extra: { max: 4 } },
    drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
  };
}

/** Everything migrate() could change: tables, their definitions and storage, and indexes. */
async function schemaSnapshot(dataSource: DataSource, driver: Driver): Promise<unknown> {
  if (driver === 'better-sqlite3') {
    return dataSource.query('SELECT type, name, sql FROM sqlite_master ORDER BY name');
  }
  if (driver === 'postgres') {
    // relfilenode changes when a table or index is rewritten.
    return dataSource.query(`SELECT n.nspname, c.relname, c.relfilenode, pg_get_indexdef(c.oid)
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname IN ('public', 'jobs') ORDER BY 1, 2`);
  }
  const tables = (await dataSource.query(
    'SELECT TABLE_NAME AS t, CREATE_TIME AS created FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1',
  )) as { t: string }[];
  const definitions = [];
  for (const { t } of tables)
    definitions.push(await dataSource.query(`SHOW CREATE TABLE \`${t}\``));
  return [tables, definitions];
}

async function tableNames(dataSource: DataSource, driver: Driver): Promise<string[]> {
  const sql =
    driver === 'better-sqlite3'
      ? "SELECT name AS t FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
      : driver === 'postgres'
        ? `SELECT table_schema || '.' || table_name AS t FROM information_schema.tables
            WHERE table_schema IN ('public', 'jobs')`
        : 'SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()';
  return ((await dataSource.query(sql)) as { t: string }[]).map((row) => row.t).sort();
}

describe.each(drivers)('upgrade on %s', (driver) => {
  it("migrate() with the default options adopts 0.1's default tables, keeps their jobs, and a second migrate changes nothing", async () => {
    const db = await bareDatabase(driver);
    const options = { ...db.options, entities: jobsEntities(driver) } as DataSourceOptions;
    const dataSource = new DataSource(options);
    await dataSource.initialize();
    const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
    try {
      await createOldTables(dataSource, driver);
      // The last job finished: its id must not be given to a new job.
      await dataSource.query(
        `DELETE FROM ${driver === 'mysql' ? '`jobs`' : '"jobs"'} WHERE id = 3`,
      );

      await store.migrate();

      // The store's tables under the new names only (a newer migration may add more).
      const tables = await tableNames(dataSource, driver);
      const [moved, old] =
        driver === 'postgres'
          ? [['jobs.jobs', 'jobs.jobs_migrations', 'jobs.schedules'], /^public\./]
          : [
              ['jobs_jobs', 'jobs_jobs_migrations', 'jobs_schedules'],
              /^(jobs|schedules|jobs_migrations)$/,
            ];
      expect(tables).toEqual(expect.arrayContaining(moved));
      expect(tables.filter((t) => old.test(t))).toEqual([]);
      const versions = (await dataSource.query(
        `SELECT version AS v FROM ${store.dialect.table('migrations')} ORDER BY version`,
      )) as { v: unknown }[];
      expect(versions.map((row) => Number(row.v))).toEqual(
        store.dialect.migrations.map((m) => m.version),
      );
      const kept = await Promise.all(['1', '2'].map((id) => store.getJob(id)));
      expect(kept.map((job) => [job?.type, job?.payload, job?.state])).toEqual([
        ['old', { n: 1 }, 'async'],
        ['old', { n: 2 }, 'async'],
      ]);
      const [added] = await store.enqueue([makeNewJob({ type: 'new' })]);
      expect(added?.job.id).toBe('4');
      // Exactly the one schema: TypeORM finds nothing to change against jobsEntities().
      const diff = await dataSource.driver.createSchemaBuilder().log();
      expect(diff.upQueries.map((q) => q.query)).toEqual([]);

      const before = await schemaSnapshot(dataSource, driver);
      await store.migrate();
      expect(await schemaSnapshot(dataSource, driver)).toEqual(before);
      expect((await store.getJob('1'))?.payload).toEqual({ n: 1 });
    } finally {
      await store.close();
      await db.drop();
    }
  });

  it("an explicit tablePrefix '' keeps using 0.1's default tables where they are", async () => {
    const db = await bareDatabase(driver);
    const dataSource = new DataSource(db.options);
    await dataSource.initialize();
    const store = new TypeormJobStore({
      dataSource,
      tablePrefix: '',
      destroyDataSourceOnClose: true,
    });
    try {
      await createOldTables(dataSource, driver);
      await store.migrate();
      const tables = await tableNames(dataSource, driver);
      const kept = ['jobs', 'jobs_migrations', 'schedules'];
      expect(tables).toEqual(
        expect.arrayContaining(driver === 'postgres' ? kept.map((t) => `public.${t}`) : kept),
      );
      expect(tables.filter((t) => t.startsWith('jobs.') || t.startsWith('jobs_jobs'))).toEqual([]);
      expect((await store.getJob('3'))?.payload).toEqual({ n: 3 });
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
