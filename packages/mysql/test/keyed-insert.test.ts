/**
 * A keyed enqueue whose key's holder finishes before it is read, on every try, gives up after
 * five tries with a message naming this package (it once named `@jobs/core/sql`). A trigger
 * answers every insert of the key with a duplicate-key error while no row holds it, as if a
 * holder took it and finished between the insert and the read.
 */
import { makeNewJob } from '@jobs/conformance';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import { createDatabase, dropDatabase, openStore, reachable, sql } from './helpers.js';

describe.skipIf(!reachable)('the keyed insert on MySQL/MariaDB', () => {
  let database: string;
  let store: MysqlJobStore;

  beforeAll(async () => {
    database = await createDatabase();
    store = openStore(database);
    await store.migrate();
    await sql(`CREATE TRIGGER \`${database}\`.lose_key BEFORE INSERT ON ${store.tables.jobs}
      FOR EACH ROW BEGIN
        IF NEW.job_key = 'lost' THEN
          SIGNAL SQLSTATE '23000' SET MYSQL_ERRNO = 1062, MESSAGE_TEXT = 'Duplicate entry';
        END IF;
      END`);
  });

  afterAll(async () => {
    await store?.close();
    if (database) await dropDatabase(database);
  });

  test('a key that keeps changing hands fails the enqueue, naming @jobs/mysql', async () => {
    await expect(store.enqueue([makeNewJob({ type: 'work', key: 'lost' })])).rejects.toThrow(
      /^\[@jobs\/mysql\] enqueue: key "lost" kept changing hands: .*, 5 times$/,
    );
    // Nothing of the failed enqueue stays; another key goes in.
    const [kept] = await store.enqueue([makeNewJob({ type: 'work', key: 'kept' })]);
    expect(kept?.created).toBe(true);
  });
});
