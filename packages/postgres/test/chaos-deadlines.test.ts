/**
 * Deadlines on every store call on PostgreSQL (`@jobs/conformance`'s `runDeadlineChecks`,
 * through a TCP proxy that black-holes and delays), and the options that set them.
 */
import { runDeadlineChecks } from '@jobs/conformance';
import { ValidationError } from '@jobs/core';
import type pg from 'pg';
import { expect, it } from 'vitest';
import { PostgresJobStore } from '../src/index.js';
import { dropSchema, PG_URL, randomSchema, reachable } from './helpers.js';

it('rejects a timeout that is not a whole number of milliseconds, naming the option', () => {
  const make = () => new PostgresJobStore({ connectionString: PG_URL, queryTimeoutMs: 0 });
  expect(make).toThrow(ValidationError);
  expect(make).toThrow(/^queryTimeoutMs: \[@jobs\/postgres\] must be a whole number/);
});

runDeadlineChecks<PostgresJobStore>({
  name: 'postgres',
  databaseUrl: PG_URL,
  skip: reachable ? null : 'no PostgreSQL',
  setup: async () => {
    const schema = randomSchema('deadline');
    const stores: PostgresJobStore[] = [];
    return {
      open: (url, { sharedPool: _, ...timeouts }) => {
        // The store's own pool is public: handlers (and the check) can share it.
        const store = new PostgresJobStore({ connectionString: url, schema, max: 2, ...timeouts });
        stores.push(store);
        return store;
      },
      exhaustPool: async (store) => {
        const held: pg.PoolClient[] = [await store.pool.connect(), await store.pool.connect()];
        return async () => {
          for (const client of held) client.release();
        };
      },
      teardown: async () => {
        await Promise.all(stores.map((s) => s.close()));
        await dropSchema(schema);
      },
    };
  },
});
