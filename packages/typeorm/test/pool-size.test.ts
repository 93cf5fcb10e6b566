/**
 * The DataSource's pool is the app's to size: an engine whose concurrency needs more than it
 * holds logs one warning naming both numbers and the option to raise; a pool that fits, or
 * SQLite's one connection, draws none.
 */
import { JobEngine, type Logger } from '@jobs/core';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, serverAvailable } from './databases.js';

/** Starts and stops an engine of concurrency 20 on `options`; returns its warnings. */
async function warningsOf(driver: Driver, pool: Partial<DataSourceOptions>): Promise<string[]> {
  const db = await createTestDatabase(driver);
  const dataSource = new DataSource({ ...db.options, ...pool } as DataSourceOptions);
  const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
  const warnings: string[] = [];
  const logger: Logger = {
    debug() {},
    info() {},
    warn: (message) => void warnings.push(message),
    error() {},
  };
  try {
    await store.migrate();
    const engine = new JobEngine({
      store,
      concurrency: 20,
      logger,
      handlers: { w: async () => {} },
    });
    await engine.start();
    await engine.stop();
    return warnings;
  } finally {
    await store.close();
    await db.drop();
  }
}

const cases = [
  { driver: 'postgres' as const, extra: 'max', needed: 26 },
  // The same on MySQL/MariaDB: its waits have a connection of their own, as LISTEN has.
  { driver: 'mysql' as const, extra: 'connectionLimit', needed: 26 },
];

for (const { driver, extra, needed } of cases) {
  const available = await serverAvailable(driver);
  describe.skipIf(!available)(`the DataSource's pool against an engine's needs (${driver})`, () => {
    it('a pool smaller than concurrency + the engine’s own calls gets one warning naming both numbers', async () => {
      const warnings = await warningsOf(driver, { poolSize: 8, extra: {} });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(`pool holds 8 connections, fewer than the ${needed}`);
      expect(warnings[0]).toContain(`\`extra.${extra}\`) to at least ${needed}`);
    });

    it('a pool that fits draws no warning', async () => {
      expect(await warningsOf(driver, { poolSize: needed, extra: {} })).toEqual([]);
    });
  });
}

it('SQLite’s one connection draws no warning', async () => {
  expect(await warningsOf('better-sqlite3', {})).toEqual([]);
});
