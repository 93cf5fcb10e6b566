import { makeNewJob } from '@jobs/conformance';
import { DataSource } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { jobsEntities, jobsMigration, TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, serverAvailable } from './databases.js';

const drivers: Driver[] = [];
for (const d of ['better-sqlite3', 'postgres', 'mysql'] as const)
  if (await serverAvailable(d)) drivers.push(d);

describe.each(drivers)('jobsEntities on %s', (driver) => {
  it("mirror migrate()'s tables: TypeORM's schema diff after migrate() is empty", async () => {
    const db = await createTestDatabase(driver, jobsEntities(driver, 'app_'));
    const dataSource = new DataSource(db.options);
    await dataSource.initialize();
    const store = new TypeormJobStore({
      dataSource,
      tablePrefix: 'app_',
      destroyDataSourceOnClose: true,
    });
    try {
      await store.migrate();
      const diff = await dataSource.driver.createSchemaBuilder().log();
      expect(diff.upQueries.map((q) => q.query)).toEqual([]);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});

describe.each(drivers)('jobsMigration on %s', (driver) => {
  it('creates the tables through dataSource.runMigrations(), store.migrate() after it is a no-op, and down drops them', async () => {
    const db = await createTestDatabase(driver);
    const dataSource = new DataSource({ ...db.options, migrations: [jobsMigration('m_')] });
    await dataSource.initialize();
    const store = new TypeormJobStore({
      dataSource,
      tablePrefix: 'm_',
      destroyDataSourceOnClose: true,
    });
    try {
      const ran = await dataSource.runMigrations();
      expect(ran.map((m) => m.name)).toEqual(['JobsTables_m_1763769600000']);
      await store.migrate();
      const [result] = await store.enqueue([makeNewJob({ type: 't', payload: 1, retries: 0 })]);
      expect(result?.created).toBe(true);
      const versions = (await dataSource.query(
        `SELECT ${driver === 'mysql' ? '`version`' : '"version"'} AS v FROM ${tableName(driver, db, 'm_jobs_migrations')}`,
      )) as { v: number }[];
      expect(versions.map((r) => Number(r.v))).toEqual(
        store.dialect.migrations.map((m) => m.version),
      );
      await dataSource.undoLastMigration();
      await expect(store.getJob(result!.job.id)).rejects.toThrow(/m_jobs/);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});

function tableName(driver: Driver, db: { options: object }, name: string): string {
  if (driver === 'mysql') return `\`${name}\``;
  const schema = (db.options as { schema?: string }).schema;
  return schema ? `"${schema}"."${name}"` : `"${name}"`;
}
