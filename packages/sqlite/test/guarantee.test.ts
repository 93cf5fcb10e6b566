/**
 * The guarantee scenarios on SQLite (`@jobs/conformance`'s `runGuaranteeScenarios`): real worker
 * processes on one database file — kill -9 with a full default prefetch, acquisition answers
 * that arrive after the lease, SIGSTOP past the lease. Needs `dist` of core, conformance and
 * sqlite (CI builds first).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runGuaranteeScenarios } from '@jobs/conformance';
import { freshFile, openStore } from './helpers.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const built = ['../dist/index.js', '../../core/dist/index.js'].every((path) =>
  existsSync(fileURLToPath(new URL(path, import.meta.url))),
);

runGuaranteeScenarios({
  name: 'sqlite',
  databaseUrl: '',
  skip: built ? null : 'build core and sqlite first (npx tsup)',
  setup: async () => {
    const filename = freshFile();
    const store = await openStore({ filename });
    return {
      store,
      worker: (request) => ({ module: fixture, args: { ...request, filename } }),
      teardown: async () => {},
    };
  },
});
