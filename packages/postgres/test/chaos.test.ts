/**
 * Chaos scenarios on PostgreSQL (`@jobs/conformance`'s `runChaosScenarios`): worker processes
 * on the built packages, some behind a TCP proxy that black-holes, refuses and cuts, one
 * killed with SIGKILL. Needs `dist` of core, conformance and postgres (CI builds first).
 */
import { fileURLToPath } from 'node:url';
import { missingBuild, runChaosScenarios } from '@jobs/conformance';
import { dropSchema, openStore, PG_URL, randomSchema, reachable } from './helpers.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const unbuilt = missingBuild(
  ['../dist/index.js', '../../core/dist/index.js', '../../conformance/dist/index.js'].map(
    (path) => new URL(path, import.meta.url),
  ),
);

runChaosScenarios({
  name: 'postgres',
  databaseUrl: PG_URL,
  skip: reachable ? unbuilt : `no PostgreSQL at ${PG_URL}`,
  setup: async () => {
    const schema = randomSchema('chaos');
    const store = openStore(schema);
    await store.migrate();
    return {
      store,
      worker: (request) => ({ module: fixture, args: { ...request, schema } }),
      teardown: async () => {
        await store.close();
        await dropSchema(schema);
      },
    };
  },
});
