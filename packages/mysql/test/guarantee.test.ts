/**
 * The guarantee scenarios on MySQL/MariaDB (`@jobs/conformance`'s `runGuaranteeScenarios`):
 * real worker processes — kill -9 with a full default prefetch, acquisition answers that
 * arrive after the lease, SIGSTOP past the lease. Needs `dist` of core, conformance and mysql
 * (CI builds first).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runGuaranteeScenarios } from '@jobs/conformance';
import { createDatabase, dropDatabase, MYSQL_URL, openStore, reachable } from './helpers.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const built = ['../dist/index.js', '../../core/dist/index.js'].every((path) =>
  existsSync(fileURLToPath(new URL(path, import.meta.url))),
);

runGuaranteeScenarios({
  name: 'mysql',
  databaseUrl: MYSQL_URL,
  skip: !reachable ? 'no MySQL/MariaDB' : !built ? 'build core and mysql first (npx tsup)' : null,
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
