/**
 * The store behind a real PgBouncer (a private one, `pgbouncer.ts`): connections are accepted
 * (no startup parameters it refuses), transaction mode runs enqueue/acquire/complete rounds from
 * several stores and an engine drain with no named prepared statements, wake-ups come through a
 * direct listen connection, and the server's timeouts still hold (`SET LOCAL` in each
 * transaction, `SET` on each session).
 */
import { type AcquireRequest, JobEngine, refOf } from '@jobs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresJobStore, PostgresJobStoreOptions } from '../src/index.js';
import {
  dropSchema,
  newJob,
  openStore,
  PG_URL,
  randomSchema,
  reachable,
  sleep,
} from './helpers.js';
import { type Bouncer, pgbouncerOrSkip, startPgbouncer } from './pgbouncer.js';

const binary = reachable ? pgbouncerOrSkip() : null;
const schema = randomSchema('bouncer');

const request = (owner: string, limit = 5): AcquireRequest => ({
  owner,
  limit,
  leaseMs: 30_000,
  types: ['work'],
  queues: null,
  tenants: null,
});

/** A store error's driver cause's SQLSTATE. */
function sqlState(error: unknown): unknown {
  let e = error as { code?: unknown; cause?: unknown } | undefined;
  while (e) {
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
    e = e.cause as typeof e;
  }
  return undefined;
}

describe.skipIf(!binary)('PostgresJobStore behind PgBouncer', () => {
  let bouncer: Bouncer;
  const stores: PostgresJobStore[] = [];
  const open = (options: Partial<PostgresJobStoreOptions>): PostgresJobStore => {
    const store = openStore(schema, { max: 3, onWarning: () => {}, ...options });
    stores.push(store);
    return store;
  };

  beforeAll(async () => {
    bouncer = await startPgbouncer(binary as string, PG_URL);
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await bouncer?.stop();
    await dropSchema(schema);
  });

  it('transaction mode: migrate, then enqueue/acquire/complete rounds from three stores at once', async () => {
    const warnings: string[] = [];
    const peers = Array.from({ length: 3 }, () =>
      open({
        connectionString: bouncer.transactionUrl,
        pooler: 'transaction',
        listenConnectionString: PG_URL,
        onWarning: (m) => warnings.push(m),
      }),
    );
    await peers[0]?.migrate();
    const rounds = 40;
    const completed: string[] = [];
    await Promise.all(
      peers.map(async (store, p) => {
        for (let round = 0; round < rounds; round++) {
          await store.enqueue([newJob('work'), newJob('work')]);
          const jobs = await store.acquire(request(`p${p}`));
          if (jobs.length > 0) {
            await store.complete(jobs.map(refOf));
            completed.push(...jobs.map((j) => j.id));
          }
        }
      }),
    );
    // Whatever the rounds left behind is drained, then every job ran once.
    for (let jobs = await peers[0]?.acquire(request('drain', 50)); jobs?.length; ) {
      await peers[0]?.complete(jobs.map(refOf));
      completed.push(...jobs.map((j) => j.id));
      jobs = await peers[0]?.acquire(request('drain', 50));
    }
    expect(completed.length).toBe(3 * rounds * 2);
    expect(new Set(completed).size).toBe(completed.length);
    expect(warnings).toEqual([]);
  });

  it('transaction mode: two engines drain jobs enqueued through the pooler', async () => {
    const ran = new Map<string, number>();
    const engines = [0, 1].map(
      (i) =>
        new JobEngine({
          store: open({
            connectionString: bouncer.transactionUrl,
            pooler: 'transaction',
            listenConnectionString: PG_URL,
            max: 10,
          }),
          owner: `engine-${i}`,
          concurrency: 4,
          handlers: {
            work: async (job) => {
              ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
            },
          },
        }),
    );
    await Promise.all(engines.map((e) => e.start()));
    try {
      const writer = open({ connectionString: bouncer.transactionUrl, pooler: 'transaction' });
      const enqueued = await writer.enqueue(Array.from({ length: 200 }, () => newJob('work')));
      for (let i = 0; i < 400 && ran.size < enqueued.length; i++) await sleep(50);
      expect(ran.size).toBe(enqueued.length);
      expect([...ran.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await Promise.all(engines.map((e) => e.stop()));
    }
  });

  it('transaction mode: an enqueue through the pooler wakes a store listening on the direct URL', async () => {
    const writer = open({ connectionString: bouncer.transactionUrl, pooler: 'transaction' });
    const reader = open({
      connectionString: bouncer.transactionUrl,
      pooler: 'transaction',
      listenConnectionString: PG_URL,
    });
    let wakes = 0;
    const unsubscribe = reader.subscribe(() => {
      wakes++;
    });
    try {
      await reader.listening();
      for (let i = 0; i < 3; i++) {
        const before = wakes;
        await writer.enqueue([newJob('work')]);
        for (let t = 0; t < 100 && wakes === before; t++) await sleep(20);
        expect(wakes).toBeGreaterThan(before);
      }
    } finally {
      unsubscribe();
    }
  });

  it('transaction mode: the server still cancels a statement over queryTimeoutMs', async () => {
    const store = open({
      connectionString: bouncer.transactionUrl,
      pooler: 'transaction',
      listenConnectionString: PG_URL,
      queryTimeoutMs: 1_000,
    });
    const [queued] = await store.enqueue([newJob('work')]);
    const jobs = await store.acquire(request('timeout', 50));
    const job = jobs.find((j) => j.id === queued?.job.id);
    if (!job) throw new Error('job not acquired');
    // The handler's own statements have no client-side deadline: only the server bounds them.
    const outcome = await store
      .completeInTransaction(refOf(job), async (tx) => {
        const client = tx as { query(text: string): Promise<{ rows: Record<string, string>[] }> };
        const shown = await client.query('SHOW statement_timeout');
        await client.query('SELECT pg_sleep(5)');
        return shown.rows[0]?.statement_timeout;
      })
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
    // 57014 query_canceled: "canceling statement due to statement timeout".
    expect('error' in outcome && sqlState(outcome.error)).toBe('57014');
    // Nothing committed: the job still runs under its lease.
    expect((await store.getJob(job.id))?.state).toBe('running');
    // SHOW in the same kind of transaction reads the bound.
    const shown = await store.completeInTransaction(refOf(job), async (tx) => {
      const client = tx as { query(text: string): Promise<{ rows: Record<string, string>[] }> };
      return (await client.query('SHOW statement_timeout')).rows[0]?.statement_timeout;
    });
    expect(shown).toBe('1s');
    // Its server connection went back to the pool with no bound left behind.
    const other = open({ connectionString: bouncer.transactionUrl, pooler: 'transaction' });
    const pgClient = await other.pool.connect();
    try {
      const { rows } = await pgClient.query('SHOW statement_timeout');
      expect(rows[0]?.statement_timeout).toBe('0');
    } finally {
      pgClient.release();
    }
  });

  it('transaction mode without listenConnectionString: a warning, and engines poll', () => {
    const warnings: string[] = [];
    const store = open({
      connectionString: bouncer.transactionUrl,
      pooler: 'transaction',
      onWarning: (m) => warnings.push(m),
    });
    expect(store.capabilities.notifications).toBe(false);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('listenConnectionString');
  });

  it('a LISTEN configured through the transaction pooler is reported as deaf', async () => {
    const warnings: string[] = [];
    const store = open({
      connectionString: bouncer.transactionUrl,
      pooler: 'transaction',
      listenConnectionString: bouncer.transactionUrl,
      onWarning: (m) => warnings.push(m),
    });
    const unsubscribe = store.subscribe(() => {});
    try {
      for (let t = 0; t < 250 && warnings.length === 0; t++) await sleep(20);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('heard no notification');
    } finally {
      unsubscribe();
    }
  });

  it('session mode: connections are accepted, wake-ups arrive, the session keeps the bound', async () => {
    const warnings: string[] = [];
    const store = open({
      connectionString: bouncer.sessionUrl,
      queryTimeoutMs: 1_000,
      onWarning: (m) => warnings.push(m),
    });
    const writer = open({ connectionString: bouncer.sessionUrl });
    let wakes = 0;
    const unsubscribe = store.subscribe(() => {
      wakes++;
    });
    try {
      await store.listening();
      await writer.enqueue([newJob('work')]);
      for (let t = 0; t < 100 && wakes === 0; t++) await sleep(20);
      expect(wakes).toBeGreaterThan(0);
      const [queued] = await store.enqueue([newJob('work')]);
      const jobs = await store.acquire(request('session', 50));
      const job = jobs.find((j) => j.id === queued?.job.id);
      if (!job) throw new Error('job not acquired');
      const outcome = await store
        .completeInTransaction(refOf(job), async (tx) => {
          await (tx as { query(text: string): Promise<unknown> }).query('SELECT pg_sleep(5)');
        })
        .then(
          () => null,
          (error: unknown) => error,
        );
      expect(sqlState(outcome)).toBe('57014');
      for (let t = 0; t < 200 && warnings.length === 0; t++) await sleep(20);
    } finally {
      unsubscribe();
    }
    // The probe was heard: no warning.
    expect(warnings).toEqual([]);
  });
});
