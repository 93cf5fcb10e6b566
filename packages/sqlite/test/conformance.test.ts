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
