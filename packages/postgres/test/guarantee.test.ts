/**
 * The guarantee scenarios on PostgreSQL (`@jobs/conformance`'s `runGuaranteeScenarios`): real
 * worker processes — kill -9 with a full default prefetch, acquisition answers that arrive
 * after the lease, SIGSTOP past the lease. Needs `dist` of core, conformance and postgres (CI
 * builds first).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runGuaranteeScenarios } from '@jobs/conformance';
import { dropSchema, openStore, PG_URL, randomSchema, reachable } from './helpers.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const built = ['../dist/index.js', '../../core/dist/index.js'].every((path) =>
  existsSync(fileURLToPath(new URL(path, import.meta.url))),
);

runGuaranteeScenarios({
  name: 'postgres',
  databaseUrl: PG_URL,
  skip: !reachable ? 'no PostgreSQL' : !built ? 'build core and postgres first (npx tsup)' : null,
  setup: async () => {
    const schema = randomSchema('guarantee');
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
