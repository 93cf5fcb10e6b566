/**
 * Completion with history on (the engine's default) does not deadlock: ten engines, each on a
 * store of its own (its own pool, as ten nodes would have), drain the same jobs while history
 * keeps every completed one; every retry is a deadlock, rare (`retryStats`, `onRetry`). (Before
 * completions locked and deleted by primary key, this drain retried 1–2 deadlocks in each of
 * four runs; after, 0 in 7 runs and 1 in a full CI run. The statements that still read the jobs
 * table by `ix_jobs_lease` — renewals and releases, when few rows run — now read it by primary
 * key too: the second test shows the wait they caused.) */
import { makeNewJob } from '@jobs/conformance';
import { JobEngine } from '@jobs/core';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import { MYSQL_URL, reachable, sql, TestDatabase } from './helpers.js';

const NODES = 10;
const JOBS = 5_000;

describe.skipIf(!reachable)('MariaDB/MySQL completion with history on', () => {
  const db = new TestDatabase();
  db.register();

  it(`${NODES} engines drain ${JOBS} jobs with history on: every job once, no deadlock retried`, async () => {
    const stores: MysqlJobStore[] = Array.from({ length: NODES }, () =>
      db.store({ connectionLimit: 16 }),
    );
    await stores[0]?.migrate();
    const retries: string[] = [];
    for (const store of stores) {
      store.onRetry((e) => retries.push(`${e.operation}: ${e.reason}`));
    }
    const ran = new Map<string, number>();
    const engines = stores.map(
      (store, i) =>
        new JobEngine({
          store,
          owner: `node-${i}`,
          concurrency: 10,
          handlers: {
            work: async (job) => {
              ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
              return { n: job.payload };
            },
          },
        }),
    );
    await Promise.all(engines.map((e) => e.start()));
    try {
      const writer = stores[0] as MysqlJobStore;
      for (let i = 0; i < JOBS; i += 500) {
        await writer.enqueue(
          Array.from({ length: 500 }, (_, k) => makeNewJob({ type: 'work', payload: i + k })),
        );
      }
      for (let t = 0; t < 1_200 && ran.size < JOBS; t++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await Promise.all(engines.map((e) => e.stop()));
    }
    expect(ran.size).toBe(JOBS);
    expect([...ran.values()].every((n) => n === 1)).toBe(true);
    const [history] = await sql(
      `SELECT count(*) AS n FROM \`${db.name}\`.jobs_jobs_history WHERE outcome = 'completed'`,
    );
    expect(Number(history?.n)).toBe(JOBS);
    // No lock wait timeout, and deadlocks rare at most: 0 in ~50 local runs since renewals read
    // by primary key (the second test); before, 1 in a full CI run. That the renewal's wait was
    // the cause of that one is likely, not proven (it could not be reproduced here), so a CI run
    // under load may still retry one: every retry must be a deadlock the store took care of,
    // never a lost or doubled job (asserted above).
    const deadlocks = stores.reduce((sum, s) => sum + s.retryStats.deadlockRetries, 0);
    expect(
      retries.every((r) => r.endsWith('deadlock')),
      retries.join(', '),
    ).toBe(true);
    expect(deadlocks, retries.slice(0, 10).join(', ')).toBeLessThanOrEqual(2);
  });

  // The likely cause of the deadlock the drain above hit now and then (under load, when its drain
  // outlived a heartbeat): a renewal read by `ix_jobs_lease (state, lock_expires_at)` — the optimizer's
  // choice when few rows run — walked every node's running rows, holding the index entry of a
  // row another node's completion had locked by primary key while it waited for that row; the
  // completion's DELETE then waited for that entry. Renewals now read by primary key only.
  it("a lease renewal does not wait for another node's completion holding its row", async () => {
    const store = db.store();
    await store.migrate();
    await store.enqueue(Array.from({ length: 7 }, () => makeNewJob({ type: 'work' })));
    const take = (owner: string, limit: number, leaseMs: number) =>
      store.acquire({ owner, limit, leaseMs, types: ['work'], queues: null, tenants: null });
    // node-b's lease ends first: its row comes first in `ix_jobs_lease`.
    const [theirs] = await take('node-b', 1, 10_000);
    const mine = await take('node-a', 6, 60_000);
    expect(theirs && mine.length === 6).toBe(true);
    // node-a's heartbeat still names four jobs whose completions just committed (the engine
    // renews what it holds, completions in flight included): fewer rows run than it names.
    const refs = mine.map((job) => ({ id: job.id, token: job.lockToken as string }));
    expect((await store.complete(refs.slice(2))).lost).toEqual([]);
    const jobs = store.tables.jobs;
    const completer = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
    const watcher = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
    try {
      await completer.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
      await completer.query('BEGIN');
      // node-b completes its job with history on, as `completeHeldWithHistory` does: the row
      // locked by primary key first …
      await completer.query(
        `SELECT id FROM ${jobs} FORCE INDEX (PRIMARY) WHERE id = ? FOR UPDATE`,
        [theirs?.id],
      );
      const [trx] = await completer.query(
        'SELECT trx_id AS id FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()',
      );
      // … while node-a renews its leases.
      const renewal = store.renewLeases('node-a', 60_000, refs);
      // Whichever comes first: the renewal's answer, or the renewal waiting for a row lock.
      let settled = false;
      const waiting = (async () => {
        for (let i = 0; i < 500 && !settled; i++) {
          const [rows] = await watcher.query(
            'SELECT COUNT(*) AS n FROM information_schema.INNODB_LOCK_WAITS WHERE blocking_trx_id = ?',
            [(trx as { id: string }[])[0]?.id],
          );
          if (Number((rows as { n: number }[])[0]?.n) > 0) return 'waited';
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        return 'gave up';
      })();
      const first = await Promise.race([renewal.then(() => 'renewed'), waiting]);
      settled = true;
      // The completion goes on: it copies the row to history, then deletes it.
      const deleted = completer
        .query(`DELETE j FROM ${jobs} j FORCE INDEX (PRIMARY) WHERE j.id = ?`, [theirs?.id])
        .then(
          () => 'deleted',
          (error: { errno?: number }) => `failed ${error.errno}`,
        );
      const outcome = await deleted;
      await completer.query('COMMIT');
      const renewed = await renewal;
      expect({ first, outcome, deadlocks: store.retryStats.deadlockRetries }).toEqual({
        first: 'renewed',
        outcome: 'deleted',
        deadlocks: 0,
      });
      expect(renewed.lost.sort()).toEqual(
        refs
          .slice(2)
          .map((ref) => ref.id)
          .sort(),
      );
    } finally {
      await completer.end();
      await watcher.end();
    }
  });
});
