import { makeNewJob } from '@jobs/conformance';
/**
 * Exclusive scopes when the head of a scope changes while acquirers race: a higher-priority
 * exclusive job lands while peers (separate DataSources) acquire. Acquirers deciding on
 * different snapshots must still never hold two exclusive jobs of one scope at once.
 */
import type { JobStore, NewJob } from '@jobs/core';
import { DataSource } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, serverAvailable } from './databases.js';

const drivers: Driver[] = [];
for (const d of ['postgres', 'mysql', 'better-sqlite3'] as const)
  if (await serverAvailable(d)) drivers.push(d);

const job = (scope: string, priority: number): NewJob =>
  makeNewJob({ type: 'x', payload: null, priority, scope, exclusive: true });

describe.each(drivers)('exclusive scope races on %s', (driver) => {
  it('a higher-priority exclusive job landing mid-race never gives a scope two live holders', async () => {
    const db = await createTestDatabase(driver);
    const stores: TypeormJobStore[] = [];
    const open = async (): Promise<TypeormJobStore> => {
      const dataSource = new DataSource(db.options);
      await dataSource.initialize();
      const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
      stores.push(store);
      return store;
    };
    try {
      const main = await open();
      await main.migrate();
      const peers: JobStore[] = [await open(), await open(), await open(), await open()];
      const rounds = driver === 'better-sqlite3' ? 10 : 40;
      let twoHolders = 0;
      for (let round = 0; round < rounds; round++) {
        const scope = `s${round}`;
        await main.enqueue([job(scope, 0)]);
        const acquiring = peers.map(async (peer, i) => {
          for (let k = 0; k < 3; k++) {
            await peer.acquire({
              owner: `p${i}`,
              limit: 5,
              leaseMs: 30_000,
              types: ['x'],
              queues: null,
              tenants: null,
            });
          }
        });
        const inserting = (async () => {
          await new Promise((r) => setTimeout(r, round % 4));
          await main.enqueue([job(scope, 10)]);
        })();
        await Promise.all([...acquiring, inserting]);
        const running = await main.listJobs({ scope, state: 'running', limit: 10, offset: 0 });
        if (running.length > 1) twoHolders++;
        expect(
          running.length,
          `round ${round}: running exclusive jobs of ${scope}`,
        ).toBeLessThanOrEqual(1);
      }
      expect(twoHolders).toBe(0);
    } finally {
      for (const store of stores) await store.close();
      await db.drop();
    }
  });
});
