/**
 * Deadlines on every store call on MySQL/MariaDB (`@jobs/conformance`'s `runDeadlineChecks`,
 * through a TCP proxy that black-holes and delays), and the options that set them.
 */
import { runDeadlineChecks } from '@jobs/conformance';
import { ValidationError } from '@jobs/core';
import mysql, { type Pool, type PoolConnection } from 'mysql2/promise';
import { expect, it } from 'vitest';
import { MysqlJobStore } from '../src/index.js';
import { createDatabase, dropDatabase, MYSQL_URL, reachable } from './helpers.js';

it('rejects a timeout that is not a whole number of milliseconds, naming the option', () => {
  const make = () => new MysqlJobStore({ uri: MYSQL_URL, connectTimeoutMs: 1.5 });
  expect(make).toThrow(ValidationError);
  expect(make).toThrow(/^connectTimeoutMs: \[@jobs\/mysql\] must be a whole number/);
});

runDeadlineChecks<MysqlJobStore>({
  name: 'mysql',
  databaseUrl: MYSQL_URL,
  skip: reachable ? null : 'no MySQL/MariaDB',
  setup: async () => {
    const database = await createDatabase();
    const stores: MysqlJobStore[] = [];
    // A pool shared with the app (MySQL's own pool is the store's alone): the heartbeat
    // connection must come from the store, with this pool's settings.
    const shared = new Map<MysqlJobStore, Pool>();
    return {
      open: (url, { sharedPool, ...timeouts }) => {
        const size = { connectionLimit: 2 };
        const pool = sharedPool ? mysql.createPool({ uri: url, database, ...size }) : null;
        const store = pool
          ? new MysqlJobStore({ pool, database, ...timeouts })
          : new MysqlJobStore({ uri: url, database, ...size, ...timeouts });
        if (pool) shared.set(store, pool);
        stores.push(store);
        return store;
      },
      exhaustPool: async (store) => {
        const pool = shared.get(store) as Pool;
        const held: PoolConnection[] = [await pool.getConnection(), await pool.getConnection()];
        return async () => {
          for (const connection of held) connection.release();
        };
      },
      teardown: async () => {
        await Promise.all(stores.map((s) => s.close()));
        await Promise.all([...shared.values()].map((p) => p.end()));
        await dropDatabase(database);
      },
    };
  },
});
