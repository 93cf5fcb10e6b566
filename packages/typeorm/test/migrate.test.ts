/**
 * `migrate()` on a really fresh database, raced by several DataSources at once (the conformance
 * suite reuses emptied databases between its tests on PostgreSQL and MySQL).
 */
import type { MysqlDialect } from '@jobs/core/sql';
import { DataSource } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, serverAvailable } from './databases.js';

const drivers: Driver[] = [];
for (const d of ['better-sqlite3', 'postgres', 'mysql'] as const)
  if (await serverAvailable(d)) drivers.push(d);

describe.each(drivers)('migrate on %s', (driver) => {
  it('four DataSources migrating one fresh database at once all succeed, and each version is recorded once', async () => {
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
      // The default names: the DataSource's schema on PostgreSQL, the prefix `jobs_` elsewhere.
      const schema = (db.options as { schema?: string }).schema;
      const table =
        driver === 'postgres' ? `"${schema}"."jobs_migrations"` : `${q}jobs_jobs_migrations${q}`;
      const rows = (await first!.dataSource.query(`SELECT ${q}version${q} AS v FROM ${table}`)) as {
        v: unknown;
      }[];
      expect(rows.map((r) => Number(r.v))).toEqual(first!.dialect.migrations.map((m) => m.version));
      expect(await first!.stats()).toEqual([]);
    } finally {
      for (const s of stores) await s.close();
      await db.drop();
    }
  });

  it.runIf(driver === 'mysql')(
    'on MariaDB the dialect takes the server version TypeORM read, before any acquisition asks',
    async () => {
      const db = await createTestDatabase(driver);
      const dataSource = new DataSource(db.options);
      const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
      try {
        await store.migrate();
        const server = (store.dialect as MysqlDialect).server;
        // The test database names its type after the server (databases.ts).
        expect(server?.flavor ?? null).toBe(db.options.type === 'mariadb' ? 'mariadb' : null);
      } finally {
        await store.close();
        await db.drop();
      }
    },
  );
});
