/**
 * Schedules across processes on one PostgreSQL schema (see `runScheduleOverlapProcessTest`). The
 * engine processes run the built packages: `npx tsup` in core and postgres first (CI builds
 * first).
 */
import { fileURLToPath } from 'node:url';
import { missingBuild, runScheduleOverlapProcessTest } from '@jobs/conformance';
import { dropSchema, openStore, PG_URL, randomSchema, reachable } from './helpers.js';

const PEER = fileURLToPath(new URL('./fixtures/peer-store.mjs', import.meta.url));

runScheduleOverlapProcessTest({
  name: 'PostgreSQL',
  createStore: async () => openStore(randomSchema('sched')),
  destroyStore: (store) => dropSchema(store.schema),
  processPeer: (store) => ({ module: PEER, args: { url: PG_URL, schema: store.schema } }),
  skip: !reachable
    ? `no PostgreSQL at ${PG_URL}`
    : missingBuild([
        new URL('../dist/index.js', import.meta.url),
        new URL('../../core/dist/index.js', import.meta.url),
      ]),
});
