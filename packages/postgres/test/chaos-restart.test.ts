/**
 * Restarts of a real PostgreSQL server under running worker processes (`@jobs/conformance`'s
 * `runRestartScenario`): a private server (initdb in a temporary directory, its own port) is
 * crashed with an immediate shutdown and shut down fast, then started again, several times.
 * The shared server on 5432 is never touched. Needs `dist` of core, conformance and postgres.
 */
import { fileURLToPath } from 'node:url';
import { missingBuild, runRestartScenario } from '@jobs/conformance';
import { PostgresJobStore } from '../src/index.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const unbuilt = missingBuild(
  ['../dist/index.js', '../../core/dist/index.js', '../../conformance/dist/index.js'].map(
    (path) => new URL(path, import.meta.url),
  ),
);
const schema = 'jobs';

runRestartScenario({
  name: 'postgres',
  server: 'postgres',
  skip: unbuilt,
  setup: async (server) => {
    const store = new PostgresJobStore({ connectionString: server.url(), schema, max: 4 });
    await store.migrate();
    return {
      store,
      worker: (request) => ({ module: fixture, args: { ...request, schema } }),
      teardown: () => store.close(),
    };
  },
});
