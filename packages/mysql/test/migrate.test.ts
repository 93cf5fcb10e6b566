/**
 * Upgrades to the one schema of @jobs/mysql and @jobs/typeorm: a database made by @jobs/mysql
 * 0.1 is adopted (its version table renamed, its tables left as they were), one made by the
 * TypeORM store's former DDL ends at exactly the schema a fresh `migrate()` creates, with its
 * jobs kept, and `migrationSql()` run by hand creates that same schema.
 */

import { mysqlDialect } from '@jobs/core/sql';
import mysql from 'mysql2/promise';
import { beforeAll, describe, expect, it } from 'vitest';
import { nativeV1, typeormV1 } from './fixtures/former-schemas.js';
import { MYSQL_URL, randomName, reachable, sql, TestDatabase } from './helpers.js';

/** Every schema version this release knows, oldest first. */
const ALL_VERSIONS = mysqlDialect({ tablePrefix: 'jobs_' }).migrations.map((m) => m.version);

const db = new TestDatabase();

/** Columns, indexes and table options of the three tables under `prefix`, prefix removed. */
async function schemaOf(prefix: string): Promise<Record<string, unknown[]>> {
  const names = ['jobs', 'schedules', 'jobs_migrations'].map((name) => `${prefix}${name}`);
  const where = 'WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?, ?)';
  const strip = (rows: Record<string, unknown>[]) =>
    rows.map((row) => ({ ...row, TABLE_NAME: String(row.TABLE_NAME).slice(prefix.length) }));
  return {
    columns: strip(
      await sql(
        `SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT,
           EXTRA, GENERATION_EXPRESSION, COLLATION_NAME
         FROM information_schema.COLUMNS ${where} ORDER BY TABLE_NAME, ORDINAL_POSITION`,
        [db.name, ...names],
      ),
    ),
    indexes: strip(
      await sql(
        `SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE
         FROM information_schema.STATISTICS ${where} ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`,
        [db.name, ...names],
      ),
    ),
    tables: strip(
      await sql(
        `SELECT TABLE_NAME, ENGINE, TABLE_COLLATION FROM information_schema.TABLES ${where}
           AND TABLE_NAME NOT LIKE '%jobs\\_migrations' ORDER BY TABLE_NAME`,
        [db.name, ...names],
      ),
    ),
  };
}

async function tableExists(name: string): Promise<boolean> {
  const rows = await sql(
    'SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
    [db.name, name],
  );
  return rows.length > 0;
}

async function versions(prefix: string): Promise<number[]> {
  const rows = await sql(
    `SELECT version FROM \`${db.name}\`.\`${prefix}jobs_migrations\` ORDER BY version`,
  );
  return rows.map((row) => Number(row.version));
}

/** A waiting job written straight into the table, as an earlier release would have. */
async function insertRawJob(prefix: string, type: string): Promise<void> {
  await sql(
    `INSERT INTO \`${db.name}\`.\`${prefix}jobs\` (type, payload, state, priority, due_at,
       retries_left, attempts, exclusive, queue, created_at)
     VALUES (?, '{"kept":true}', 'async', 0, UTC_TIMESTAMP(3), 3, 0, 0, 'default', UTC_TIMESTAMP(3))`,
    [type],
  );
}

const request = (type: string) => ({
  owner: 'o',
  limit: 10,
  leaseMs: 60_000,
  types: [type],
  queues: null,
  tenants: null,
});

describe.skipIf(!reachable)('@jobs/mysql schema upgrades', () => {
  let fresh: Record<string, unknown[]> = {};

  db.register();
  beforeAll(async () => {
    const prefix = `${randomName('f')}_`;
    await db.store({ tablePrefix: prefix }).migrate();
    fresh = await schemaOf(prefix);
  });

  it('a fresh database gets versions 1 and 2, the acquisition index and the generated columns', async () => {
    const indexes = (fresh.indexes as { TABLE_NAME: string; INDEX_NAME: string }[])
      .filter((row) => row.TABLE_NAME === 'jobs')
      .map((row) => row.INDEX_NAME);
    expect(new Set(indexes)).toEqual(
      new Set([
        'PRIMARY',
        'uq_jobs_key',
        'ix_jobs_acquire',
        'ix_jobs_due',
        'ix_jobs_scope',
        'ix_jobs_lease',
        'ix_jobs_schedule',
        'ix_jobs_scope_blocked',
      ]),
    );
    const columns = (fresh.columns as { TABLE_NAME: string; COLUMN_NAME: string }[])
      .filter((row) => row.TABLE_NAME === 'jobs_migrations')
      .map((row) => row.COLUMN_NAME);
    expect(columns).toEqual(['version', 'applied_at']);
  });

  it('a database made by @jobs/mysql 0.1 is adopted: versions move to <prefix>jobs_migrations, its tables stay as they were', async () => {
    const prefix = `${randomName('n')}_`;
    for (const statement of nativeV1(db.name, prefix)) await sql(statement);
    await insertRawJob(prefix, 'old');
    const before = await schemaOf(prefix);
    const store = db.store({ tablePrefix: prefix });
    await store.migrate();
    expect(await tableExists(`${prefix}migrations`)).toBe(false);
    expect(await versions(prefix)).toEqual(ALL_VERSIONS);
    const after = await schemaOf(prefix);
    // Engines as they were; every table's collation is the fresh one's (0010: NO PAD).
    expect(after.tables).toEqual(fresh.tables);
    const engines = (tables: unknown[] = []) => tables.map((t) => (t as { ENGINE: string }).ENGINE);
    expect(engines(after.tables)).toEqual(engines(before.tables));
    expect(after.indexes).toEqual(fresh.indexes);
    expect(after.columns).toEqual(fresh.columns);
    const [job] = await store.acquire(request('old'));
    expect(job).toMatchObject({ type: 'old', payload: { kept: true }, state: 'running' });
    // Again: nothing left to adopt or apply.
    await db.store({ tablePrefix: prefix }).migrate();
    expect(await versions(prefix)).toEqual(ALL_VERSIONS);
  });

  it("a database made by the TypeORM store's former DDL ends at exactly a fresh migrate()'s schema, its jobs kept", async () => {
    const prefix = `${randomName('t')}_`;
    for (const statement of typeormV1(db.name, prefix)) await sql(statement);
    await insertRawJob(prefix, 'old');
    const store = db.store({ tablePrefix: prefix });
    await store.migrate();
    expect(await versions(prefix)).toEqual(ALL_VERSIONS);
    expect(await schemaOf(prefix)).toEqual(fresh);
    const [job] = await store.acquire(request('old'));
    expect(job).toMatchObject({ type: 'old', payload: { kept: true }, state: 'running' });
    // 0002 run once more (its version record lost) finds nothing to change.
    await sql(`DELETE FROM \`${db.name}\`.\`${prefix}jobs_migrations\` WHERE version = 2`);
    await db.store({ tablePrefix: prefix }).migrate();
    expect(await versions(prefix)).toEqual(ALL_VERSIONS);
    expect(await schemaOf(prefix)).toEqual(fresh);
  });

  it("an app's own `migrations` table (TypeORM's: id, timestamp, name) is never taken for a version table", async () => {
    await sql(
      `CREATE TABLE \`${db.name}\`.migrations (id INT PRIMARY KEY, timestamp BIGINT NOT NULL, name VARCHAR(255) NOT NULL)`,
    );
    await sql(`INSERT INTO \`${db.name}\`.migrations VALUES (1, 1700000000000, 'CreateOrders')`);
    await db.store({ tablePrefix: '' }).migrate();
    expect(await sql(`SELECT * FROM \`${db.name}\`.migrations`)).toHaveLength(1);
    expect(await versions('')).toEqual(ALL_VERSIONS);
  });

  it('migrationSql() run by hand creates the schema migrate() creates, versions recorded', async () => {
    const prefix = `${randomName('h')}_`;
    const script = db.store({ tablePrefix: prefix }).migrationSql();
    const connection = await mysql.createConnection({ uri: MYSQL_URL, multipleStatements: true });
    try {
      await connection.query(script);
    } finally {
      await connection.end();
    }
    expect(await versions(prefix)).toEqual(ALL_VERSIONS);
    expect(await schemaOf(prefix)).toEqual(fresh);
    await db.store({ tablePrefix: prefix }).migrate();
    expect(await versions(prefix)).toEqual(ALL_VERSIONS);
  });
});
