import { fileURLToPath } from 'node:url';
import { runJobStoreConformance } from '@jobs/conformance';
import type { PoolConnection } from 'mysql2/promise';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import {
  createDatabase,
  dropDatabase,
  MYSQL_URL,
  openStore,
  randomName,
  reachable,
  readRaw,
} from './helpers.js';

const peerModule = fileURLToPath(new URL('./fixtures/peer-store.ts', import.meta.url));

// One database per file; every test gets fresh tables under its own prefix.
let database = '';
let txPool: mysql.Pool | null = null;
const prefixes = new Map<MysqlJobStore, string>();

describe.skipIf(!reachable)('@jobs/mysql', () => {
  beforeAll(async () => {
    database = await createDatabase();
    txPool = mysql.createPool({ uri: MYSQL_URL, database, connectionLimit: 4 });
  });
  afterAll(async () => {
    await txPool?.end();
    if (database) await dropDatabase(database);
  });

  runJobStoreConformance<MysqlJobStore, PoolConnection>({
    name: 'mysql',
    createStore: async () => {
      const tablePrefix = `${randomName('t')}_`;
      const store = openStore(database, { tablePrefix });
      prefixes.set(store, tablePrefix);
      return store;
    },
    connectPeer: async (store) => openStore(database, { tablePrefix: prefixes.get(store) }),
    processPeer: (store) => ({
      module: peerModule,
      args: { uri: MYSQL_URL, database, tablePrefix: prefixes.get(store) },
      nodeArgs: ['--import', 'tsx'],
    }),
    readRaw,
    transaction: {
      begin: async () => {
        if (!txPool) throw new Error('no pool');
        const connection = await txPool.getConnection();
        await connection.beginTransaction();
        return connection;
      },
      commit: async (connection) => {
        await connection.commit();
        connection.release();
      },
      rollback: async (connection) => {
        await connection.rollback();
        connection.release();
      },
    },
  });
});
