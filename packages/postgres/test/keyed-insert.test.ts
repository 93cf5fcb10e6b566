/**
 * A keyed enqueue whose key's holder finishes before it is read, on every try, gives up after
 * five tries with a message naming this package. A trigger makes every insert of the key a
 * silent no-op, as if a holder took it and finished between the insert and the read; a
 * sequence (outside transactions) counts the tries.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import { dropSchema, newJob, openStore, randomSchema, reachable, sql } from './helpers.js';

describe.skipIf(!reachable)('the keyed insert on PostgreSQL', () => {
  const schema = randomSchema('keyed');
  let store: PostgresJobStore;

  beforeAll(async () => {
    store = openStore(schema);
    await store.migrate();
    await sql(`CREATE SEQUENCE "${schema}".tries`);
    await sql(`CREATE FUNCTION "${schema}".lose_key() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM nextval('"${schema}".tries'); RETURN NULL; END $$`);
    await sql(`CREATE TRIGGER lose_key BEFORE INSERT ON "${schema}".jobs FOR EACH ROW
      WHEN (NEW.job_key = 'lost') EXECUTE FUNCTION "${schema}".lose_key()`);
  });

  afterAll(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  test('a key that keeps changing hands fails the enqueue after 5 tries, naming @jobs/postgres', async () => {
    await expect(
      store.enqueue([newJob('work', { key: 'lost' }), newJob('work', { key: 'kept' })]),
    ).rejects.toThrow(/^\[@jobs\/postgres\] enqueue: key "lost" kept changing hands: .*, 5 times$/);
    const [tries] = await sql<{ last_value: string }>(`SELECT last_value FROM "${schema}".tries`);
    expect(Number(tries?.last_value)).toBe(5);
  });
});
