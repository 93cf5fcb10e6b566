/**
 * `migrate()` on a really fresh database, raced by several DataSources at once (the conformance
 * suite reuses emptied databases between its tests on PostgreSQL and MySQL).
 */
import { DataSource } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, serverAvailable } from './databases.js';

const drivers: Driver[] = [];
for (const d of ['better-sqlite3', 'postgres', 'mysql'] as const)
  if (await serverAvailable(d)) drivers.push(d);

describe.each(drivers)('migrate on %s', (driver) => {
  it('four DataSources migrating one fresh database at once all succeed, and version 1 is recorded once', async () => {
    const db = await createTestDatabase(driver);
    const stores: TypeormJobStore[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const dataSource = new DataSource(db.options);
        await dataSource.initialize();
        stores.push(new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true }));
      }
      await Promise.all(stores.map((s) => s.migrate()));
      const [first] = stores;
      const q = driver === 'mysql' ? '`' : '"';
      const schema = (db.options as { schema?: string }).schema;
      const table = `${schema ? `"${schema}".` : ''}${q}jobs_migrations${q}`;
      const rows = (await first!.dataSource.query(`SELECT ${q}version${q} AS v FROM ${table}`)) as {
        v: unknown;
      }[];
      expect(rows.map((r) => Number(r.v))).toEqual([1]);
      expect(await first!.stats()).toEqual([]);
    } finally {
      for (const s of stores) await s.close();
      await db.drop();
    }
  });
});
