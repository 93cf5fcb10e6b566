/**
 * Runs `@jobs/conformance` on a TypeormJobStore for one driver: an empty database per test,
 * peers on DataSources of their own, child-process peers, raw rows read with plain SQL, and the
 * caller's transaction as a TypeORM EntityManager.
 */
import { fileURLToPath } from 'node:url';
import { runJobStoreConformance } from '@jobs/conformance';
import type { EntityManager } from 'typeorm';
import { DataSource } from 'typeorm';
import { afterAll } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, type TestDatabase } from './databases.js';

const PEER_MODULE = fileURLToPath(new URL('./process-peer.ts', import.meta.url));

/**
 * A test database with its DataSources. On PostgreSQL and MySQL a finished test's database is
 * emptied (tables truncated or deleted from) and handed to the next test with its DataSources
 * still connected: creating a schema or database, connecting pools and running DDL for each of
 * ~150 tests was most of the suite's time. SQLite files are cheap, so every test gets a new one.
 * (Concurrent migrate on a really fresh database is covered in `migrate.test.ts`.)
 */
interface Slot {
  db: TestDatabase;
  main: DataSource;
  peers: DataSource[];
  peersUsed: number;
}

async function connect(db: TestDatabase): Promise<DataSource> {
  const dataSource = new DataSource(db.options);
  await dataSource.initialize();
  return dataSource;
}

/**
 * Every table the store writes, so nothing of a finished test reaches the next one (ids may restart:
 * a signal left for job 2 — a child's result nobody took — would be job 2's of the next test).
 */
const STORE_TABLES = [
  'jobs',
  'schedules',
  'history',
  'signals',
  'followups',
  'rate_limits',
] as const;

/**
 * Rows a test may leave before its tables are vacuumed for the next one (PostgreSQL here runs no
 * autovacuum).
 */
const VACUUM_AFTER_ROWS = 1_000;

/**
 * DELETE, not TRUNCATE, on every server: a dozen small InnoDB tables empty in ~2 ms where
 * TRUNCATE (DDL) takes ~20, and on PostgreSQL TRUNCATE gives each table and index a new file and
 * catalog row (~34 ms a call) that stays behind as a dead row for every later catalog lookup.
 */
async function empty(slot: Slot, store: TypeormJobStore, driver: Driver): Promise<void> {
  const tables = STORE_TABLES.map((name) => store.dialect.table(name));
  let deleted = 0;
  for (const table of tables) {
    const answer: unknown = await slot.main.query(`DELETE FROM ${table}`);
    // TypeORM answers a PostgreSQL DELETE with [rows, count].
    if (driver === 'postgres' && Array.isArray(answer)) deleted += Number(answer[1] ?? 0);
  }
  if (driver === 'postgres' && deleted > VACUUM_AFTER_ROWS) {
    await slot.main.query(`VACUUM ${tables.join(', ')}`);
  }
}

/** A table beside the store's for `ctx.transaction` effects (`"s"."effects"`, `jobs_effects`). */
const effectsTables = new WeakMap<DataSource, string>();
function effectsTable(store: TypeormJobStore): string {
  const table = store.dialect.table('jobs').replace(/jobs(["`])$/, 'effects$1');
  effectsTables.set(store.dataSource, table);
  return table;
}
function effectsTableOf(dataSource: DataSource): string {
  const table = effectsTables.get(dataSource);
  if (!table) throw new Error('effects table not set up for this DataSource');
  return table;
}

export function runTypeormConformance(driver: Driver): void {
  const reuse = driver !== 'better-sqlite3';
  const free: Slot[] = [];
  const all: Slot[] = [];
  const slots = new Map<TypeormJobStore, Slot>();
  afterAll(async () => {
    for (const slot of all) {
      for (const ds of [slot.main, ...slot.peers]) if (ds.isInitialized) await ds.destroy();
      await slot.db.drop();
    }
  });
  runJobStoreConformance<TypeormJobStore, EntityManager>({
    name: `typeorm-${driver}`,
    createStore: async () => {
      let slot = reuse ? free.pop() : undefined;
      if (!slot) {
        const db = await createTestDatabase(driver);
        slot = { db, main: await connect(db), peers: [], peersUsed: 0 };
        if (reuse) all.push(slot);
      }
      slot.peersUsed = 0;
      const store = new TypeormJobStore({
        dataSource: slot.main,
        destroyDataSourceOnClose: !reuse,
      });
      slots.set(store, slot);
      return store;
    },
    destroyStore: async (store) => {
      const slot = slots.get(store);
      slots.delete(store);
      if (!slot) return;
      if (!reuse) {
        for (const ds of slot.peers) if (ds.isInitialized) await ds.destroy();
        await slot.db.drop();
        return;
      }
      await empty(slot, store, driver);
      free.push(slot);
    },
    // The racing schedule runners (16 s a run) repeat the direct store's run statement for
    // statement: the TypeORM executor's transactions and locks under races are what this run
    // adds, and ownership, transactions, handler-transaction and faults prove those here.
    skip: {
      'schedule-engine': `the same SQL as @jobs/${driver === 'better-sqlite3' ? 'sqlite' : driver}'s direct run, which races the schedule runners; this executor's transactions and locks are proven by the ownership, transactions and faults groups`,
    },
    // Pinned: a capability or method lost here fails a test instead of skipping the ones it backs.
    requires: {
      capabilities: {
        notifications: true,
        // SQLite has no SKIP LOCKED, and the store says so there.
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
    connectPeer: async (store) => {
      const slot = slots.get(store);
      if (!slot) throw new Error('unknown store');
      let dataSource = slot.peers[slot.peersUsed];
      if (!dataSource) {
        dataSource = await connect(slot.db);
        slot.peers.push(dataSource);
      }
      slot.peersUsed += 1;
      // Each peer is its own DataSource (own pool); the harness closes the store, not the pool.
      return new TypeormJobStore({ dataSource, destroyDataSourceOnClose: false });
    },
    processPeer: (store) => ({
      module: PEER_MODULE,
      args: { options: slots.get(store)?.db.options },
      nodeArgs: ['--import', 'tsx'],
    }),
    readRaw: async (store, id) => {
      const table = store.dialect.table('jobs');
      const rows = (await store.dataSource.query(
        `SELECT * FROM ${table} WHERE id = ${driver === 'postgres' ? '$1' : '?'}`,
        [id],
      )) as Record<string, unknown>[];
      return rows[0] ?? null;
    },
    handlerTransaction: {
      singleWriter: driver === 'better-sqlite3',
      setup: async (store) => {
        const table = effectsTable(store);
        await store.dataSource.query(`CREATE TABLE IF NOT EXISTS ${table} (job_id varchar(32))`);
        await store.dataSource.query(`DELETE FROM ${table}`);
      },
      write: async (tx, jobId) => {
        const manager = tx as EntityManager;
        const store = manager.connection;
        const mark = store.options.type === 'postgres' ? '$1' : '?';
        await manager.query(`INSERT INTO ${effectsTableOf(store)} (job_id) VALUES (${mark})`, [
          jobId,
        ]);
      },
      count: async (store, jobId) => {
        const mark = driver === 'postgres' ? '$1' : '?';
        const rows = (await store.dataSource.query(
          `SELECT COUNT(*) AS n FROM ${effectsTable(store)} WHERE job_id = ${mark}`,
          [jobId],
        )) as { n: unknown }[];
        return Number(rows[0]?.n ?? 0);
      },
    },
    // Enqueue from SQL through TypeORM's query(): PostgreSQL's function, MySQL's procedure,
    // SQLite's view (then the id it wrote, or its key's holder, read in the same transaction).
    sqlEnqueue: async (store, { type, payload, options }, tx) => {
      const run = async (manager: EntityManager): Promise<string> => {
        if (driver === 'postgres') {
          const db = slots.get(store)?.db.options as { schema: string } | undefined;
          const schema = db?.schema ?? 'public';
          const rows = (await manager.query(
            `SELECT "${schema}".enqueue($1, $2::jsonb, $3::jsonb) AS id`,
            [type, payload, options],
          )) as { id: unknown }[];
          return String(rows[0]?.id);
        }
        if (driver !== 'better-sqlite3') {
          const result = (await manager.query('CALL `jobs_enqueue`(?, ?, ?)', [
            type,
            payload,
            options,
          ])) as { id: unknown }[][];
          return String(result[0]?.[0]?.id);
        }
        await manager.query('INSERT INTO jobs_enqueue (type, payload, options) VALUES (?, ?, ?)', [
          type,
          payload,
          options,
        ]);
        const key = (JSON.parse(options) as { key?: unknown } | null)?.key;
        const rows = (await (typeof key === 'string'
          ? manager.query('SELECT id FROM jobs_jobs WHERE job_key = ?', [key])
          : manager.query('SELECT max(id) AS id FROM jobs_jobs'))) as { id: unknown }[];
        return String(rows[0]?.id);
      };
      return tx ? run(tx) : store.dataSource.transaction(run);
    },
    // Bulk enqueue from SQL through TypeORM's query(): the same three entry points' `_many`.
    sqlEnqueueMany: async (store, { type, payloads, options }) => {
      const manager = store.dataSource.manager;
      if (driver === 'postgres') {
        const db = slots.get(store)?.db.options as { schema: string } | undefined;
        await manager.query(
          `SELECT "${db?.schema ?? 'public'}".enqueue_many($1, $2::jsonb, $3::jsonb)`,
          [type, payloads, options],
        );
      } else if (driver !== 'better-sqlite3') {
        await manager.query('CALL `jobs_enqueue_many`(?, ?, ?)', [type, payloads, options]);
      } else {
        await manager.query(
          'INSERT INTO jobs_enqueue_many (type, payloads, options) VALUES (?, ?, ?)',
          [type, payloads, options],
        );
      }
    },
    transaction: {
      begin: async (store) => {
        const runner = store.dataSource.createQueryRunner();
        await runner.connect();
        await runner.startTransaction();
        return runner.manager;
      },
      commit: async (manager) => {
        await manager.queryRunner?.commitTransaction();
        await manager.queryRunner?.release();
      },
      rollback: async (manager) => {
        await manager.queryRunner?.rollbackTransaction();
        await manager.queryRunner?.release();
      },
    },
  });
}
