/**
 * `enqueue(…, { tx })` takes only a client inside its transaction: a pool, a client that never
 * ran BEGIN or one whose transaction failed is refused with a ValidationError saying what to pass
 * (the job would otherwise commit on its own), and nothing is written. A client in a transaction
 * is accepted, also when its BEGIN is still queued (not awaited), and a rollback removes the job.
 */
import { JobEngine, silentLogger, ValidationError } from '@jobs/core';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import { dropSchema, newJob, openStore, PG_URL, randomSchema, reachable } from './helpers.js';

const schema = randomSchema('callertx');

describe.skipIf(!reachable)('PostgresJobStore: the caller’s transaction is checked', () => {
  let store: PostgresJobStore;
  let engine: JobEngine;
  let pool: pg.Pool;

  beforeAll(async () => {
    store = openStore(schema);
    await store.migrate();
    engine = new JobEngine({ store, logger: silentLogger });
    pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
  });
  afterAll(async () => {
    await pool?.end();
    await store?.close();
    await dropSchema(schema);
  });
  beforeEach(async () => {
    await store.pool.query(`DELETE FROM "${schema}".jobs`);
  });

  const jobCount = async (): Promise<number> =>
    (await store.listJobs({ limit: 100, offset: 0 })).length;

  it('a pool is refused, saying to pass the client of the transaction; nothing is written', async () => {
    const refused = engine.enqueue('email', {}, { tx: pool });
    await expect(refused).rejects.toThrow(ValidationError);
    await expect(refused).rejects.toThrow(
      /^tx: \[@jobs\/postgres\] is a pg Pool, so the job would commit on its own, outside your transaction: pass the client of your transaction \(const client = await pool\.connect\(\); await client\.query\('BEGIN'\)/,
    );
    // The store's own pool too.
    await expect(store.enqueue([newJob('email')], { tx: store.pool })).rejects.toThrow(/pg Pool/);
    await expect(engine.enqueue('email', {}, { tx: {} })).rejects.toThrow(/is no pg client/);
    expect(await jobCount()).toBe(0);
  });

  it('a client that never ran BEGIN is refused; nothing is written', async () => {
    const client = await pool.connect();
    try {
      await client.query('SELECT 1');
      const refused = engine.enqueue('email', {}, { tx: client });
      await expect(refused).rejects.toThrow(ValidationError);
      await expect(refused).rejects.toThrow(/is a client outside a transaction \(no BEGIN\)/);
      // After COMMIT it is outside again.
      await client.query('BEGIN');
      await client.query('COMMIT');
      await expect(engine.enqueue('email', {}, { tx: client })).rejects.toThrow(/no BEGIN/);
      // A COMMIT still queued (not awaited) is seen too: the server is asked.
      await client.query('BEGIN');
      const commit = client.query('COMMIT');
      await expect(engine.enqueue('email', {}, { tx: client })).rejects.toThrow(/no BEGIN/);
      await commit;
    } finally {
      client.release();
    }
    const never = new pg.Client({ connectionString: PG_URL });
    await expect(engine.enqueue('email', {}, { tx: never })).rejects.toThrow(/not connected/);
    expect(await jobCount()).toBe(0);
  });

  it('a client whose transaction failed is refused, saying to roll it back', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await expect(client.query('SELECT 1/0')).rejects.toThrow(/division by zero/);
      await expect(engine.enqueue('email', {}, { tx: client })).rejects.toThrow(
        /its transaction failed .*: roll it back/,
      );
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await jobCount()).toBe(0);
  });

  it('a client inside BEGIN is accepted: rolled back, the job is gone; committed, it stays', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const rolledBack = await engine.enqueue('email', { n: 1 }, { tx: client });
      expect(await store.getJob(rolledBack.id)).toBeNull(); // not visible before commit
      await client.query('ROLLBACK');
      expect(await store.getJob(rolledBack.id)).toBeNull();

      // A BEGIN still queued (not awaited) counts: the server is asked.
      const begin = client.query('BEGIN');
      const committed = await engine.enqueue('email', { n: 2 }, { tx: client });
      await begin;
      await client.query('COMMIT');
      expect((await store.getJob(committed.id))?.payload).toEqual({ n: 2 });

      // A client whose pg keeps no status (pg-native, pg before 8.21): the server is asked.
      const statusless = { query: client.query.bind(client) };
      await expect(engine.enqueue('email', {}, { tx: statusless })).rejects.toThrow(/no BEGIN/);
      await client.query('BEGIN');
      const asked = await engine.enqueue('email', { n: 3 }, { tx: statusless });
      await client.query('ROLLBACK');
      expect(await store.getJob(asked.id)).toBeNull();

      // A plain pg.Client (not from a pool) in a transaction works the same.
      const own = new pg.Client({ connectionString: PG_URL });
      await own.connect();
      try {
        await own.query('BEGIN');
        const [result] = await store.enqueue([newJob('email')], { tx: own });
        await own.query('ROLLBACK');
        expect(await store.getJob(result!.job.id)).toBeNull();
      } finally {
        await own.end();
      }
    } finally {
      client.release();
    }
    expect(await jobCount()).toBe(1);
  });
});
