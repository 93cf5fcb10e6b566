import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { runJobStoreConformance } from '@jobs/conformance';
import type { Clock } from '@jobs/core';
import { type JobJson, reviveJob } from '../src/json-file.js';
import { JsonFileJobStore } from '../src/json-file-store.js';

/** A store on a new file in its own temp directory (removed by `destroyStore`). */
const freshStore = (clock?: Clock): JsonFileJobStore =>
  new JsonFileJobStore({
    filename: join(mkdtempSync(join(tmpdir(), 'jobs-json-')), 'jobs.json'),
    clock,
  });

runJobStoreConformance({
  name: 'json-file',
  createStore: async () => freshStore(),
  // The same store on a clock the suite moves, for the rules checked to the millisecond.
  createStoreOnClock: async (clock) => freshStore(clock),
  // What this store has, and what it leaves out on purpose: the suite fails if the store stops
  // declaring exactly this, so a capability switched off cannot quietly skip its tests.
  // Switch one on in the store, then here, and its tests run (and must pass).
  requires: {
    capabilities: {
      notifications: true,
      transactionalEnqueue: false,
      multiProcess: false,
      scopeLimits: false,
      keyModes: false,
      blockedSet: false,
      progress: true,
      logs: true,
      timeLimits: true,
      startMarks: true,
    },
    // No optional ability (cancellation, rateLimits, history, bulk, views, steps, waits): their groups
    // skip, each saying why. Add one to the store, then list it here, and its tests must pass.
    abilities: [],
  },
  // A second instance on the same file: like a second connection, it shares the file's tables.
  connectPeer: async (store) => new JsonFileJobStore({ filename: store.filename }),
  destroyStore: async (store) => rmSync(dirname(store.filename), { recursive: true, force: true }),
  // Reads the file on disk, not the store's memory: every resolved write must already be there.
  // The file holds `Job` objects (times as ISO strings), so the suite compares stored jobs
  // directly: `readRawJob`, not `readRaw` (which is for SQL rows).
  readRawJob: async (store, id) => {
    const contents = JSON.parse(await readFile(store.filename, 'utf8')) as { jobs: JobJson[] };
    const stored = contents.jobs.find((job) => job.id === id);
    return stored ? reviveJob(stored) : null;
  },
  skip: {
    transactions:
      'a JSON file has no transaction a caller could open (transactionalEnqueue: false)',
  },
});
