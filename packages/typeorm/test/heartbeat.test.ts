import { makeNewJob } from '@jobs/conformance';
import { DataSource } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, serverAvailable } from './databases.js';

const postgres = await serverAvailable('postgres');

describe.skipIf(!postgres)('lease renewals on a connection of their own (postgres)', () => {
  it('a renewal does not queue behind a pool whose connections are all busy', async () => {
    const db = await createTestDatabase('postgres');
    // A small pool for the app (renewals have a DataSource of their own).
    const dataSource = new DataSource({
      ...db.options,
      poolSize: 2,
      extra: { max: 2 },
    } as typeof db.options);
    await dataSource.initialize();
    const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
    try {
      await store.migrate();
      await store.enqueue([makeNewJob({ type: 'work' })]);
      const [job] = await store.acquire({
        owner: 'o',
        limit: 1,
        leaseMs: 30_000,
        types: ['work'],
        queues: null,
        tenants: null,
      });
      const ref = { id: job?.id as string, token: job?.lockToken as string };
      // The first renewal opens the heartbeat's connection; the app then fills its pool and
      // queues more work behind it.
      expect(await store.renewLeases('o', 30_000, [ref])).toEqual({ lost: [] });
      const sleeps = [1, 2, 3].map(() => dataSource.query('SELECT pg_sleep(1.5)'));
      // Without a connection of its own, the renewal waits until a sleeping query gives one back.
      const freed = Promise.race(sleeps).then(() => 'a pool connection freed');
      const renewed = store.renewLeases('o', 30_000, [ref]).then(() => 'renewed');
      expect(await Promise.race([renewed, freed])).toBe('renewed');
      await Promise.all(sleeps);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
