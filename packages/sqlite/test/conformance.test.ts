import { fileURLToPath } from 'node:url';
import { runJobStoreConformance } from '@jobs/conformance';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import { freshFile } from './helpers.js';

const peerModule = fileURLToPath(new URL('./fixtures/peer.ts', import.meta.url));

runJobStoreConformance<SqliteJobStore, Database.Database>({
  name: 'sqlite',
  // A fresh file per store: files are the unit of isolation, so no prefix is needed.
  createStore: async () => new SqliteJobStore({ filename: freshFile() }),
  createStoreOnClock: async (clock) => new SqliteJobStore({ filename: freshFile(), clock }),
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
  connectPeer: async (store) => new SqliteJobStore({ filename: store.db.name }),
  processPeer: (store) => ({
    module: peerModule,
    args: { filename: store.db.name },
    nodeArgs: ['--import', 'tsx'],
  }),
  readRaw: async (store, id) => {
    const db = new Database(store.db.name, { readonly: true });
    try {
      const row = db.prepare('SELECT * FROM jobs_jobs WHERE id = ?').get(Number(id));
      return (row as Record<string, unknown> | undefined) ?? null;
    } finally {
      db.close();
    }
  },
  // ctx.transaction: effects in a table of the store's file, written on the handler's connection.
  handlerTransaction: {
    singleWriter: true,
    setup: async (store) => {
      store.db.exec('CREATE TABLE IF NOT EXISTS effects (job_id TEXT)');
    },
    write: async (tx, jobId) => {
      (tx as SqliteJobStore['db']).prepare('INSERT INTO effects (job_id) VALUES (?)').run(jobId);
    },
    count: async (store, jobId) =>
      Number(
        (
          store.db.prepare('SELECT COUNT(*) AS n FROM effects WHERE job_id = ?').get(jobId) as {
            n: number;
          }
        ).n,
      ),
  },
  // Enqueue from SQL: an INSERT into the `jobs_enqueue` view on a connection of its own (or the
  // caller's), then the id it wrote — or its key's holder — read in the same transaction.
  sqlEnqueue: async (store, { type, payload, options }, tx) => {
    const db = (tx as Database.Database | undefined) ?? new Database(store.db.name);
    try {
      db.pragma('busy_timeout = 5000');
      const write = db.transaction(() => {
        db.prepare('INSERT INTO jobs_enqueue (type, payload, options) VALUES (?, ?, ?)').run(
          type,
          payload,
          options,
        );
        const key = (JSON.parse(options) as { key?: unknown } | null)?.key;
        const row = (
          typeof key === 'string'
            ? db.prepare('SELECT id FROM jobs_jobs WHERE job_key = ?').get(key)
            : db.prepare('SELECT max(id) AS id FROM jobs_jobs').get()
        ) as { id: number };
        return String(row.id);
      });
      return write();
    } finally {
      if (!tx) db.close();
    }
  },
  // Bulk enqueue from SQL: one INSERT into the `jobs_enqueue_many` view, on its own connection.
  sqlEnqueueMany: async (store, { type, payloads, options }) => {
    const db = new Database(store.db.name);
    try {
      db.pragma('busy_timeout = 5000');
      db.prepare('INSERT INTO jobs_enqueue_many (type, payloads, options) VALUES (?, ?, ?)').run(
        type,
        payloads,
        options,
      );
    } finally {
      db.close();
    }
  },
  // The caller's transaction on a connection of its own (as an app's would be): enqueue joins it
  // synchronously; commit and rollback end it.
  transaction: {
    begin: async (store) => {
      const db = new Database(store.db.name);
      db.pragma('busy_timeout = 5000');
      db.exec('BEGIN');
      return db;
    },
    commit: async (db) => {
      db.exec('COMMIT');
      db.close();
    },
    rollback: async (db) => {
      db.exec('ROLLBACK');
      db.close();
    },
  },
});
