/**
 * Restarts of a real MariaDB server under running worker processes (`@jobs/conformance`'s
 * `runRestartScenario`): a private server (mariadb-install-db in a temporary directory, its
 * own port) is killed with SIGKILL and shut down with SIGTERM, then started again, several
 * times. The shared server on 3306 is never touched. Needs `dist` of core, conformance and mysql.
 */
import { fileURLToPath } from 'node:url';
import { missingBuild, runRestartScenario } from '@jobs/conformance';
import { MysqlJobStore } from '../src/index.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const unbuilt = missingBuild(
  ['../dist/index.js', '../../core/dist/index.js', '../../conformance/dist/index.js'].map(
    (path) => new URL(path, import.meta.url),
  ),
);
const database = 'test';

runRestartScenario({
  name: 'mysql',
  server: 'mariadb',
  skip: unbuilt,
  setup: async (server) => {
    const store = new MysqlJobStore({ uri: server.url(), database, connectionLimit: 4 });
    await store.migrate();
    return {
      store,
      worker: (request) => ({ module: fixture, args: { ...request, database } }),
      teardown: () => store.close(),
    };
  },
});
