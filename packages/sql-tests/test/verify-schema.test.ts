/**
 * `verifySchema()` — what `engine.start()` runs first — on every SQL database: a database never
 * migrated says to run the migrations, a migrated one passes, and a server the store cannot reach
 * fails as the connection error it is, never as a missing migration (it used to read every error
 * as "no @jobs tables yet": a worker started on a slow network was told to migrate).
 */
import { JobsError, StoreError } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import { PostgresJobStore } from '@jobs/postgres';
import { describe, expect, it } from 'vitest';
import { DATABASES } from './databases.js';

describe.each(DATABASES)('$name: verifySchema', (db) => {
  it.skipIf(db.missing)(
    'a database never migrated says to run the migrations; once migrated it passes',
    async () => {
      const place = await db.create();
      const store = place.open();
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
        await place.drop();
      }
    },
  );
});

/** A port nothing listens on: the connection is refused at once. */
const REFUSED = {
  postgres: () =>
    new PostgresJobStore({ connectionString: 'postgres://postgres@127.0.0.1:1/test', max: 1 }),
  mysql: () => new MysqlJobStore({ uri: 'mysql://root@127.0.0.1:1/test', connectionLimit: 1 }),
};

describe.each(DATABASES.filter((d) => d.name !== 'sqlite'))('$name: verifySchema', (db) => {
  it('a server that refuses the connection fails as a StoreError, not as a missing migration', async () => {
    const store = REFUSED[db.name as keyof typeof REFUSED]();
    try {
      const error = await store.verifySchema().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(StoreError);
      expect((error as Error).message).toMatch(/ECONNREFUSED/);
      expect((error as Error).message).not.toMatch(/no @jobs tables/);
    } finally {
      await store.close();
    }
  });
});
