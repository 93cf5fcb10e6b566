/**
 * `enqueue(…, { tx })` takes only a connection inside its transaction: a pool or a connection in
 * autocommit mode is refused with a ValidationError saying what to pass (the job would otherwise
 * commit on its own), and nothing is written. A connection in a transaction is accepted, and a
 * rollback removes the job.
 */
import { JobEngine, silentLogger, ValidationError } from '@jobs/core';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import { MYSQL_URL, reachable, TestDatabase } from './helpers.js';

const db = new TestDatabase();

describe.skipIf(!reachable)('MysqlJobStore: the caller’s transaction is checked', () => {
  db.register();
  let store: MysqlJobStore;
  let engine: JobEngine;
  let pool: mysql.Pool;

  beforeAll(async () => {
    store = db.store();
    await store.migrate();
    engine = new JobEngine({ store, logger: silentLogger });
    pool = mysql.createPool({ uri: MYSQL_URL, database: db.name, connectionLimit: 2 });
  });
  afterAll(async () => {
    await pool?.end();
  });

  const jobCount = async (): Promise<number> =>
    (await store.listJobs({ limit: 100, offset: 0 })).length;

  it('a pool is refused, saying to pass the connection of the transaction; nothing is written', async () => {
    const refused = engine.enqueue('email', {}, { tx: pool });
    await expect(refused).rejects.toThrow(ValidationError);
    await expect(refused).rejects.toThrow(
      /^tx: \[@jobs\/mysql\] is a mysql2 pool, so the job would commit on its own, outside your transaction: pass the connection of your transaction \(const connection = await pool\.getConnection\(\); await connection\.beginTransaction\(\)/,
    );
    // The callback-style pool behind the promise one, and no connection at all.
    await expect(engine.enqueue('email', {}, { tx: pool.pool })).rejects.toThrow(/mysql2 pool/);
    await expect(engine.enqueue('email', {}, { tx: {} })).rejects.toThrow(/no mysql2 connection/);
    expect(await jobCount()).toBe(0);
  });

  it('a connection without beginTransaction() is refused, also after a commit; nothing is written', async () => {
    const connection = await pool.getConnection();
    try {
      const refused = engine.enqueue('email', {}, { tx: connection });
      await expect(refused).rejects.toThrow(ValidationError);
      await expect(refused).rejects.toThrow(/is a connection outside a transaction/);
      await connection.beginTransaction();
      await connection.commit();
      await expect(engine.enqueue('email', {}, { tx: connection })).rejects.toThrow(
        /outside a transaction/,
      );
    } finally {
      connection.release();
    }
    expect(await jobCount()).toBe(0);
  });

  it('a connection in a transaction is accepted: rolled back, the job is gone; committed, it stays', async () => {
    const connection = await pool.getConnection();
    try {
      await connection.beginTransaction();
      const rolledBack = await engine.enqueue('email', { n: 1 }, { tx: connection });
      await connection.rollback();
      expect(await store.getJob(rolledBack.id)).toBeNull();

      await connection.beginTransaction();
      const committed = await engine.enqueue('email', { n: 2 }, { tx: connection });
      await connection.commit();
      expect((await store.getJob(committed.id))?.payload).toEqual({ n: 2 });

      // Autocommit off: every statement is in a transaction the caller ends.
      await connection.query('SET autocommit = 0');
      const implicit = await engine.enqueue('email', { n: 3 }, { tx: connection });
      await connection.rollback();
      expect(await store.getJob(implicit.id)).toBeNull();
      await connection.query('SET autocommit = 1');
    } finally {
      connection.release();
    }
    expect(await jobCount()).toBe(1);
  });
});
