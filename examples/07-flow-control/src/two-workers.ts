/**
 * Two workers on one SQLite file, each an engine on its own connection — as two processes of an
 * app would be — for the scenarios that show limits holding across workers.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type EngineOptions, JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';

export interface TwoWorkers {
  /** The workers; the first one also enqueues. */
  workers: JobEngine[];
  /** Starts both, waits until `finished()` is true, then stops them and closes their stores. */
  runUntil(finished: () => boolean): Promise<void>;
}

export async function twoWorkers(
  filename: string,
  options: Omit<EngineOptions, 'store'>,
): Promise<TwoWorkers> {
  const stores = [new SqliteJobStore({ filename }), new SqliteJobStore({ filename })];
  await stores[0]?.migrate();
  const workers = stores.map((store) => new JobEngine({ store, pollIntervalMs: 100, ...options }));
  return {
    workers,
    async runUntil(finished) {
      await Promise.all(workers.map((w) => w.start()));
      while (!finished()) await sleep(20);
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.all(stores.map((s) => s.close()));
    },
  };
}
