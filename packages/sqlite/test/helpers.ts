import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteJobStore, type SqliteJobStoreOptions } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import { afterAll } from 'vitest';

/** `newJob()`: a valid NewJob of type `work` with neutral defaults; `sleep(ms)`. */
export { makeNewJob as newJob, sleep } from '@jobs/conformance';

/** One temp folder per test file, removed after the file; every store gets its own db file. */
const folder = mkdtempSync(join(tmpdir(), 'jobs-sqlite-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

let counter = 0;

/** A path for a new, empty database file. */
export function freshFile(): string {
  counter += 1;
  return join(folder, `t${counter}-${process.pid}.db`);
}

/** Stores opened with `openStore` are closed after the file's tests. */
const opened: SqliteJobStore[] = [];
afterAll(async () => {
  for (const store of opened) await store.close();
});

export async function openStore(
  options: Partial<SqliteJobStoreOptions> = {},
): Promise<SqliteJobStore> {
  const store = new SqliteJobStore({ filename: options.db ? undefined : freshFile(), ...options });
  opened.push(store);
  await store.migrate();
  return store;
}

/** Another store on the same file, with its own connection. */
export function peerOf(
  filename: string,
  options: Partial<SqliteJobStoreOptions> = {},
): SqliteJobStore {
  const store = new SqliteJobStore({ filename, ...options });
  opened.push(store);
  return store;
}

/** Reads a row around the store, on a connection of its own. */
export function readRow(
  filename: string,
  sql: string,
  ...params: unknown[]
): Record<string, unknown> | undefined {
  const db = new Database(filename, { readonly: true });
  try {
    return db.prepare(sql).get(...params) as Record<string, unknown> | undefined;
  } finally {
    db.close();
  }
}

export const request = {
  owner: 'owner-a',
  limit: 100,
  leaseMs: 30_000,
  types: ['work'] as string[],
  queues: null,
  tenants: null,
};
