import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import { dropSchema, openStore, randomSchema, reachable, sql } from './helpers.js';

/**
 * PostgreSQL's enqueue function where the conformance group does not reach: a trigger (the
 * example of docs/sql-enqueue.md), and a store's own `notifyChannel`.
 */
describe.skipIf(!reachable)('PostgreSQL enqueue from SQL', () => {
  const schema = randomSchema('sqlenq');
  let store: PostgresJobStore;
  beforeAll(async () => {
    store = openStore(schema);
    await store.migrate();
    await sql(`CREATE TABLE "${schema}".orders (id int, email text)`);
    await sql(`CREATE FUNCTION "${schema}".orders_enqueue_receipt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM "${schema}".enqueue(
    'send-receipt',
    jsonb_build_object('order', NEW.id, 'email', NEW.email),
    jsonb_build_object('key', 'receipt-' || NEW.id, 'queue', 'mail', 'delayMs', NEW.id - 40));
  RETURN NEW;
END $$`);
    await sql(`CREATE TRIGGER orders_receipt AFTER INSERT ON "${schema}".orders
      FOR EACH ROW EXECUTE FUNCTION "${schema}".orders_enqueue_receipt()`);
  });
  afterAll(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('an AFTER INSERT trigger enqueues a job per row, in the inserting transaction', async () => {
    await sql(`INSERT INTO "${schema}".orders VALUES (42, 'a@b.c'), (43, 'x@y.z')`);
    const jobs = await store.listJobs({ type: 'send-receipt', limit: 10, offset: 0 });
    expect(jobs.map((j) => [j.key, j.queue, j.payload, j.state])).toEqual([
      ['receipt-42', 'mail', { order: 42, email: 'a@b.c' }, 'timer'],
      ['receipt-43', 'mail', { order: 43, email: 'x@y.z' }, 'timer'],
    ]);
    // The same order again: its key's holder answers, nothing is added.
    await sql(`INSERT INTO "${schema}".orders VALUES (42, 'again')`);
    expect(await store.listJobs({ type: 'send-receipt', limit: 10, offset: 0 })).toEqual(jobs);
  });

  it('a bad option fails the insert that fired the trigger, naming the field; nothing is kept', async () => {
    // delayMs = id - 40: negative for order 1.
    await expect(sql(`INSERT INTO "${schema}".orders VALUES (1, 'c@d.e')`)).rejects.toThrow(
      /options\.delayMs/,
    );
    expect(await sql(`SELECT * FROM "${schema}".orders WHERE id = 1`)).toEqual([]);
    expect(await store.listJobs({ key: 'receipt-1', limit: 10, offset: 0 })).toEqual([]);
  });

  it("notifies the store's own notifyChannel", async () => {
    const other = randomSchema('sqlchan');
    const named = openStore(other, { notifyChannel: `${other}_custom` });
    try {
      await named.migrate();
      let wakeUps = 0;
      const unsubscribe = named.subscribe(() => {
        wakeUps += 1;
      });
      try {
        // LISTEN connects asynchronously: call until a wake-up arrives.
        for (let i = 0; i < 50 && wakeUps === 0; i++) {
          await sql(`SELECT "${other}".enqueue('work', '{}', '{}')`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(wakeUps).toBeGreaterThan(0);
      } finally {
        unsubscribe();
      }
    } finally {
      await named.close();
      await dropSchema(other);
    }
  });
});
