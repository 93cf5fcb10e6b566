/**
 * `verifySchema()` — what `engine.start()` runs first — through TypeORM on each driver: a
 * database never migrated says to run the migrations (TypeORM's `QueryFailedError` carries the
 * driver's "no such table" code), and once migrated it passes.
 */
import { JobsError } from '@jobs/core';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, openDataSource, serverAvailable } from './databases.js';

const drivers: Driver[] = [];
for (const d of ['better-sqlite3', 'postgres', 'mysql'] as const)
  if (await serverAvailable(d)) drivers.push(d);

describe.each(drivers)('@jobs/typeorm on %s: verifySchema', (driver) => {
  it('a database never migrated says to run the migrations; once migrated it passes', async () => {
    const db = await createTestDatabase(driver);
    const dataSource = await openDataSource(db);
    const store = new TypeormJobStore({ dataSource });
    try {
      const error = await store.verifySchema().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(JobsError);
      expect(error).toMatchObject({ code: 'SCHEMA' });
      expect((error as Error).message).toMatch(/has no @jobs tables yet: run migrations first/);
      await store.migrate();
      await expect(store.verifySchema()).resolves.toBeUndefined();
    } finally {
      await store.close();
      await dataSource.destroy();
      await db.drop();
    }
  });
});
