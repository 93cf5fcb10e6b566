import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { runJobStoreConformance } from '@jobs/conformance';
import { JsonFileJobStore } from '../src/json-file-store.js';

/** A store on a new file in its own temp directory (removed by `destroyStore`). */
const freshStore = (): JsonFileJobStore =>
  new JsonFileJobStore({ filename: join(mkdtempSync(join(tmpdir(), 'jobs-json-')), 'jobs.json') });

runJobStoreConformance({
  name: 'json-file',
  createStore: async () => freshStore(),
  // A second instance on the same file: like a second connection, it shares the file's tables.
  connectPeer: async (store) => new JsonFileJobStore({ filename: store.filename }),
  destroyStore: async (store) => rmSync(dirname(store.filename), { recursive: true, force: true }),
  // Reads the file on disk, not the store's memory: every resolved write must already be there.
  readRaw: async (store, id) => {
    const contents = JSON.parse(await readFile(store.filename, 'utf8')) as {
      jobs: { id: number }[];
    };
    return contents.jobs.find((row) => String(row.id) === id) ?? null;
  },
  skip: {
    transactions:
      'a JSON file has no transaction a caller could open (transactionalEnqueue: false)',
  },
});
