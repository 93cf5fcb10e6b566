/**
 * Keyed enqueue inside callers' own REPEATABLE READ transactions (MySQL's default), many at once
 * on separate connections: none deadlocks, none has its transaction rolled back, and a key
 * shared by several callers ends as one job. And lock waits: bounded to seconds on the store's
 * own connections, however long another transaction holds a row.
 */
import { makeNewJob, refOf } from '@jobs/conformance';
import type { EnqueueResult, NewJob } from '@jobs/core';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import type { MysqlJobStore, MysqlRetryEvent } from '../src/index.js';
import { MYSQL_URL, openStore, randomName, reachable, sql, TestDatabase } from './helpers.js';

const CALLERS = 40;
const ROUNDS = 4;
/** Callers 0‥29 enqueue a key of their own; 30‥39 share three keys. */
const OWN_KEYS = 30;
const SHARED_KEYS = 3;

const db = new TestDatabase();

async function freshStore(): Promise<MysqlJobStore> {
  const store = openStore(db.name, { tablePrefix: `${randomName('t')}_` });
  db.keep(store);
  await store.migrate();
  return store;
}

interface CallerOutcome {
  key: string;
  result: EnqueueResult | null;
  error: unknown;
}

/**
 * Every caller opens its transaction and takes its snapshot before anyone enqueues; then all
 * enqueue `jobOf(caller)` in their transactions at once and commit (or roll back on an error).
 */
async function enqueueInCallers(
  store: MysqlJobStore,
  connections: readonly mysql.Connection[],
  jobOf: (caller: number) => NewJob,
): Promise<CallerOutcome[]> {
  for (const connection of connections) {
    await connection.beginTransaction();
    await connection.query(`SELECT COUNT(*) AS n FROM ${store.tables.jobs}`);
  }
  return Promise.all(
    connections.map(async (connection, caller): Promise<CallerOutcome> => {
      const job = jobOf(caller);
      const key = job.key as string;
      try {
        const [result] = await store.enqueue([job], { tx: connection });
        // The caller's own write after the enqueue, in the same transaction.
        await connection.query('SELECT 1');
        await connection.commit();
        return { key, result: result ?? null, error: null };
      } catch (error) {
        await connection.rollback().catch(() => {});
        return { key, result: null, error };
      }
    }),
  );
}

describe.skipIf(!reachable)('@jobs/mysql keyed enqueue in callers’ transactions', () => {
  db.register();

  it('40 REPEATABLE READ callers enqueueing own and shared keys at once: no deadlock, no rollback, one job per key', async () => {
    const store = await freshStore();
    const connections = await Promise.all(
      Array.from({ length: CALLERS }, () =>
        mysql.createConnection({ uri: MYSQL_URL, database: db.name }),
      ),
    );
    try {
      for (const connection of connections) {
        await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      }
      // A few jobs already hold keys that sort between the callers' keys (gaps to lock).
      await store.enqueue(
        Array.from({ length: 8 }, (_, i) => makeNewJob({ key: `k-${i * 10 + 5}-held` })),
      );
      for (let round = 0; round < ROUNDS; round++) {
        const keyOf = (caller: number): string =>
          caller < OWN_KEYS
            ? `k-${caller}-own-${round}`
            : `k-${(caller % SHARED_KEYS) * 10}-shared-${round}`;
        const outcomes = await enqueueInCallers(store, connections, (caller) =>
          makeNewJob({ key: keyOf(caller), payload: { caller, round } }),
        );
        const failed = outcomes.filter((o) => o.error !== null);
        expect(
          failed.map((o) => `${o.key}: ${(o.error as Error).message}`),
          `round ${round}`,
        ).toEqual([]);
        const byKey = new Map<string, EnqueueResult[]>();
        for (const { key, result } of outcomes) {
          byKey.set(key, [...(byKey.get(key) ?? []), result as EnqueueResult]);
        }
        expect(byKey.size).toBe(OWN_KEYS + SHARED_KEYS);
        for (const [key, results] of byKey) {
          // One creator per key; everyone else was handed that job.
          expect(
            results.filter((r) => r.created),
            key,
          ).toHaveLength(1);
          expect(new Set(results.map((r) => r.job.id)).size, key).toBe(1);
        }
        const stored = await sql(
          `SELECT job_key, COUNT(*) AS n FROM ${store.tables.jobs}
           WHERE job_key LIKE ? GROUP BY job_key`,
          [`%-${round}`],
        );
        expect(stored).toHaveLength(OWN_KEYS + SHARED_KEYS);
        expect(stored.every((row) => Number(row.n) === 1)).toBe(true);
      }
    } finally {
      await Promise.allSettled(connections.map((c) => c.end()));
    }
  });

  it('20 REPEATABLE READ callers replacing and debouncing shared keys at once: no deadlock, no rollback, one job per key', async () => {
    const store = await freshStore();
    const callers = 20;
    const connections = await Promise.all(
      Array.from({ length: callers }, () =>
        mysql.createConnection({ uri: MYSQL_URL, database: db.name }),
      ),
    );
    try {
      for (const connection of connections) {
        await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      }
      for (let round = 0; round < ROUNDS; round++) {
        // Half the keys are held before the callers start, half are created by one of them.
        const keyOf = (caller: number): string => `m-${caller % 4}-${round}`;
        await store.enqueue(
          [0, 1].map((k) => makeNewJob({ key: `m-${k}-${round}`, delayMs: 60_000 })),
        );
        const outcomes = await enqueueInCallers(store, connections, (caller) =>
          makeNewJob({
            key: keyOf(caller),
            keyMode: caller % 2 ? 'replace' : 'debounce',
            payload: { caller },
            delayMs: 30_000 + caller,
          }),
        );
        expect(
          outcomes
            .filter((o) => o.error !== null)
            .map((o) => `${o.key}: ${(o.error as Error).message}`),
          `round ${round}`,
        ).toEqual([]);
        for (let k = 0; k < 4; k++) {
          const key = `m-${k}-${round}`;
          const mine = outcomes.filter((o) => o.key === key);
          expect(new Set(mine.map((o) => o.result?.job.id)).size, key).toBe(1);
          const [row] = await sql(`SELECT payload FROM ${store.tables.jobs} WHERE job_key = ?`, [
            key,
          ]);
          const sent = Array.from({ length: callers }, (_, caller) => caller).filter(
            (caller) => keyOf(caller) === key,
          );
          expect(sent, key).toContain(JSON.parse(String(row?.payload)).caller);
        }
      }
    } finally {
      await Promise.allSettled(connections.map((c) => c.end()));
    }
  });

  it('a caller transaction left open after keyed enqueues holds back no other caller’s keys', async () => {
    const store = await freshStore();
    const [held] = await store.enqueue([makeNewJob({ key: 'k-5' })]);
    const open = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
    const other = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
    try {
      for (const connection of [open, other]) {
        await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      }
      // A wait for the open transaction's locks shows as an error at once, not as a hang.
      await other.query('SET SESSION innodb_lock_wait_timeout = 1');
      await open.beginTransaction();
      const mine = await store.enqueue([makeNewJob({ key: 'k-5' }), makeNewJob({ key: 'k-7' })], {
        tx: open,
      });
      expect(mine.map((r) => r.created)).toEqual([false, true]);
      expect(mine[0]?.job.id).toBe(held?.job.id);
      // Keys just below, between and above the open transaction's keys.
      for (const key of ['k-4', 'k-6', 'k-8']) {
        await other.beginTransaction();
        const [result] = await store.enqueue([makeNewJob({ key })], { tx: other });
        await other.commit();
        expect(result?.created, key).toBe(true);
      }
      await open.commit();
      expect((await store.listJobs({ limit: 10, offset: 0 })).map((j) => j.key).sort()).toEqual([
        'k-4',
        'k-5',
        'k-6',
        'k-7',
        'k-8',
      ]);
    } finally {
      await Promise.allSettled([open.end(), other.end()]);
    }
  });

  it('a keyed enqueue of a key this transaction already enqueued returns its own job', async () => {
    const store = await freshStore();
    const connection = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
    try {
      await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      await connection.beginTransaction();
      const [first] = await store.enqueue([makeNewJob({ key: 'mine' })], { tx: connection });
      const [again, other] = await store.enqueue(
        [makeNewJob({ key: 'mine' }), makeNewJob({ key: 'other' })],
        { tx: connection },
      );
      await connection.commit();
      expect(first?.created).toBe(true);
      expect(again).toMatchObject({ created: false, job: { id: first?.job.id, key: 'mine' } });
      expect(other?.created).toBe(true);
      expect((await store.getJob(first?.job.id as string))?.key).toBe('mine');
    } finally {
      await connection.end();
    }
  });

  it('a row another transaction never unlocks fails the call within seconds, after a few counted lock-wait retries', async () => {
    const store = await freshStore();
    const [job] = await store.enqueue([makeNewJob()]);
    const [held] = await store.acquire({
      owner: 'o',
      limit: 1,
      leaseMs: 60_000,
      types: ['work'],
      queues: null,
      tenants: null,
    });
    const events: MysqlRetryEvent[] = [];
    store.onRetry((event) => events.push(event));
    const blocker = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
    try {
      await blocker.beginTransaction();
      await blocker.query(`SELECT id FROM ${store.tables.jobs} WHERE id = ? FOR UPDATE`, [
        job?.job.id,
      ]);
      // Bounded = it returns: the test's timeout is well under one default lock wait (50 s).
      const error = await store.release([refOf(held as NonNullable<typeof held>)]).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({
        code: 'STORE',
        message: expect.stringContaining('errno 1205'),
      });
      expect(events.length).toBeGreaterThanOrEqual(1);
      expect(events.every((e) => e.reason === 'lock-wait-timeout' && e.errno === 1205)).toBe(true);
      expect(store.retryStats.lockWaitRetries).toBe(events.length);
      await blocker.commit();
      // The lock gone, the same call goes through.
      expect((await store.release([refOf(held as NonNullable<typeof held>)])).lost).toEqual([]);
    } finally {
      await blocker.end();
    }
  }, 40_000);
});
