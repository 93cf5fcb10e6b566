import { ValidationError } from '@jobs/core';
import { DataSource } from 'typeorm';
import { expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';

const sqlite = (): DataSource => new DataSource({ type: 'better-sqlite3', database: ':memory:' });

it('rejects a missing DataSource, unknown options, bad prefixes and unsupported drivers with ValidationError', () => {
  expect(() => new TypeormJobStore({} as never)).toThrow(ValidationError);
  expect(() => new TypeormJobStore({ dataSource: sqlite(), tablPrefix: 'x' } as never)).toThrow(
    /tablPrefix: \[@jobs\/typeorm\] unknown option/,
  );
  expect(() => new TypeormJobStore({ dataSource: sqlite(), tablePrefix: 'bad-prefix' })).toThrow(
    /tablePrefix/,
  );
  expect(() => new TypeormJobStore({ dataSource: sqlite(), tablePrefix: 'x;drop' })).toThrow(
    ValidationError,
  );
  expect(() => new TypeormJobStore({ dataSource: sqlite(), sqliteNotifyIntervalMs: 0 })).toThrow(
    /sqliteNotifyIntervalMs: \[@jobs\/typeorm\] must be a positive integer/,
  );
  expect(() => new TypeormJobStore({ dataSource: sqlite(), sqliteTransactionWaitMs: 1.5 })).toThrow(
    /sqliteTransactionWaitMs/,
  );
  // Shaped like a DataSource of a driver the store does not speak (sql.js is not installed).
  const sqljs = { createQueryRunner: () => null, options: { type: 'sqljs' } } as never;
  expect(() => new TypeormJobStore({ dataSource: sqljs })).toThrow(/"sqljs" is not supported/);
});

it('initializes the DataSource on first use and works on an in-memory SQLite database', async () => {
  const dataSource = sqlite();
  const store = new TypeormJobStore({
    dataSource,
    tablePrefix: 'app_',
    destroyDataSourceOnClose: true,
  });
  await store.migrate();
  expect(dataSource.isInitialized).toBe(true);
  expect(await store.stats()).toEqual([]);
  await store.close();
  expect(dataSource.isInitialized).toBe(false);
});
