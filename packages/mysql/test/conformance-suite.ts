/**
 * Shared set-up of the MySQL conformance test files (`conformance*.test.ts`).
 */
import { fileURLToPath } from 'node:url';
import { type GroupName, runJobStoreConformance } from '@jobs/conformance';
import type { PoolConnection } from 'mysql2/promise';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import {
  createDatabase,
  dropDatabase,
  emptyTables,
  MYSQL_URL,
  openStore,
  randomName,
  reachable,
  readRaw,
} from './helpers.js';

const peerModule = fileURLToPath(new URL('./fixtures/peer-store.ts', import.meta.url));

/** Which statements the store uses for completion: as the server offers, or forced. */
export interface ConformancePath {
  name: string;
  /** `false`: the MySQL path (no RETURNING: completion locks, then deletes). */
  deleteReturning: false | undefined;
  /** Groups this run leaves to another, each with its reason (see `ConformanceOptions.skip`). */
  skip?: Partial<Record<GroupName, string>>;
}

/**
 * The conformance suite on one path, in its own database. Two test files run it — the server's
 * own path and the MySQL 8 path — so vitest runs the two at once.
 */
export function runMysqlConformance({ name, deleteReturning, skip }: ConformancePath): void {
  describe.skipIf(!reachable)(`@jobs/mysql: ${name}`, () => {
    const options = deleteReturning === undefined ? {} : { deleteReturning };
    // One database per path; every test gets fresh tables under its own prefix.
    let database = '';
    let txPool: mysql.Pool | null = null;
    const prefixes = new Map<MysqlJobStore, string>();
    let effectsTable = '';
    // Prefixes of finished tests, their tables emptied (`emptyTables`): new tables and their
    // migrate took ~0.13 s of every test. A test about migrate gets new tables, so it migrates
    // for real.
    const reusable: string[] = [];
    beforeAll(async () => {
      database = await createDatabase();
      txPool = mysql.createPool({ uri: MYSQL_URL, database, connectionLimit: 4 });
    });
    afterAll(async () => {
      await txPool?.end();
      if (database) await dropDatabase(database);
    });

    runJobStoreConformance<MysqlJobStore, PoolConnection>({
      name,
      ...(skip ? { skip } : {}),
      createStore: async () => {
        const tablePrefix =
          (/migrat/i.test(expect.getState().currentTestName ?? '') ? undefined : reusable.pop()) ??
          `${randomName('t')}_`;
        const store = openStore(database, { tablePrefix, ...options });
        prefixes.set(store, tablePrefix);
        return store;
      },
      destroyStore: async (store) => {
        const tablePrefix = prefixes.get(store);
        if (tablePrefix && (await emptyTables(database, tablePrefix, store.schemaVersion()))) {
          reusable.push(tablePrefix);
        }
      },
      connectPeer: async (store) =>
        openStore(database, { tablePrefix: prefixes.get(store), ...options }),
      // Pinned: a capability or method lost here fails a test instead of skipping the ones it backs.
      requires: {
        capabilities: {
          notifications: true,
          transactionalEnqueue: true,
          multiProcess: true,
          scopeLimits: true,
          keyModes: true,
          blockedSet: true,
          progress: true,
          startMarks: true,
          logs: true,
          timeLimits: true,
        },
        abilities: ['cancellation', 'rateLimits', 'history', 'bulk', 'views', 'steps', 'waits'],
        methods: ['completeAndAcquire', 'completeInTransaction', 'steps.saveInTransaction'],
      },
      processPeer: (store) => ({
        module: peerModule,
        args: { uri: MYSQL_URL, database, tablePrefix: prefixes.get(store), ...options },
        nodeArgs: ['--import', 'tsx'],
      }),
      readRaw,
      // Effects go to a table beside the store's (tests of one file run one at a time).
      handlerTransaction: {
        setup: async (store) => {
          effectsTable = `\`${prefixes.get(store)}effects\``;
          if (!txPool) throw new Error('no pool');
          await txPool.query(`CREATE TABLE IF NOT EXISTS ${effectsTable} (job_id VARCHAR(32))`);
        },
        write: async (tx, jobId) => {
          await (tx as PoolConnection).query(`INSERT INTO ${effectsTable} (job_id) VALUES (?)`, [
            jobId,
          ]);
        },
        count: async (_store, jobId) => {
          if (!txPool) throw new Error('no pool');
          const [rows] = (await txPool.query(
            `SELECT COUNT(*) AS n FROM ${effectsTable} WHERE job_id = ?`,
            [jobId],
          )) as [{ n: number }[], unknown];
          return Number(rows[0]?.n ?? 0);
        },
      },
      // Bulk enqueue from SQL: the store's `<prefix>enqueue_many` procedure.
      sqlEnqueueMany: async (store, { type, payloads, options }) => {
        if (!txPool) throw new Error('no pool');
        await txPool.query(`CALL \`${prefixes.get(store)}enqueue_many\`(?, ?, ?)`, [
          type,
          payloads,
          options,
        ]);
      },
      // Enqueue from SQL: the store's `<prefix>enqueue` procedure, on a pooled connection or the
      // caller's; its one row holds the id.
      sqlEnqueue: async (store, { type, payload, options }, tx) => {
        if (!txPool) throw new Error('no pool');
        const text = `CALL \`${prefixes.get(store)}enqueue\`(?, ?, ?)`;
        const [result] = (await (tx ?? txPool).query(text, [type, payload, options])) as [
          { id: unknown }[][],
          unknown,
        ];
        return String(result[0]?.[0]?.id);
      },
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
}
