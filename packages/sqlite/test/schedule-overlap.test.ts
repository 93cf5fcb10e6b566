/**
 * Schedules across processes on one SQLite file (see `runScheduleOverlapProcessTest`). The
 * engine processes load @jobs/core from its dist: build it first (`npx tsup` in packages/core;
 * CI builds first).
 */
import { fileURLToPath } from 'node:url';
import { runScheduleOverlapProcessTest } from '@jobs/conformance';
import { SqliteJobStore } from '@jobs/sqlite';
import { freshFile } from './helpers.js';

const peerModule = fileURLToPath(new URL('./fixtures/peer.ts', import.meta.url));

runScheduleOverlapProcessTest({
  name: 'SQLite',
  createStore: async () => new SqliteJobStore({ filename: freshFile() }),
  processPeer: (store) => ({
    module: peerModule,
    args: { filename: store.db.name, notifyIntervalMs: 20 },
    nodeArgs: ['--import', 'tsx'],
  }),
});
