/**
 * Chaos scenarios on MySQL/MariaDB (`@jobs/conformance`'s `runChaosScenarios`): worker
 * processes on the built packages, some behind a TCP proxy that black-holes, refuses and cuts,
 * one killed with SIGKILL. Needs `dist` of core, conformance and mysql (CI builds first).
 */
import { fileURLToPath } from 'node:url';
import { missingBuild, runChaosScenarios } from '@jobs/conformance';
import { createDatabase, dropDatabase, MYSQL_URL, openStore, reachable } from './helpers.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const unbuilt = missingBuild(
  ['../dist/index.js', '../../core/dist/index.js', '../../conformance/dist/index.js'].map(
    (path) => new URL(path, import.meta.url),
  ),
);

runChaosScenarios({
  name: 'mysql',
  databaseUrl: MYSQL_URL,
  skip: reachable ? unbuilt : `no MySQL/MariaDB at ${MYSQL_URL}`,
  setup: async () => {
    const database = await createDatabase();
    const store = openStore(database);
    await store.migrate();
    return {
      store,
      worker: (request) => ({ module: fixture, args: { ...request, database } }),
      teardown: async () => {
        await store.close();
        await dropDatabase(database);
      },
    };
  },
});
