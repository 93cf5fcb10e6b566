import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import { dropSchema, newJob, openStore, randomSchema, reachable, sleep, sql } from './helpers.js';

const schema = randomSchema('notify');

/** Counts wake-ups of a subscriber; `next()` resolves on the next one. */
function wakeCounter(store: PostgresJobStore) {
  let count = 0;
  let waiters: (() => void)[] = [];
  const unsubscribe = store.subscribe(() => {
    count++;
    for (const w of waiters) w();
    waiters = [];
  });
  return {
    get count() {
      return count;
    },
    next: (timeoutMs = 5_000) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no wake-up')), timeoutMs);
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
    unsubscribe,
  };
}

describe.skipIf(!reachable)('PostgresJobStore notifications and transactions', () => {
  let writer: PostgresJobStore;
  let reader: PostgresJobStore;

  beforeAll(async () => {
    writer = openStore(schema);
    reader = openStore(schema);
    await writer.migrate();
  });
  afterAll(async () => {
    await writer?.close();
    await reader?.close();
    await dropSchema(schema);
  });

  it('migrate is safe when many stores call it at once on a fresh schema', async () => {
    const fresh = randomSchema('mig');
    const stores = Array.from({ length: 6 }, () => openStore(fresh, { max: 1 }));
    try {
      await Promise.all(stores.map((s) => s.migrate()));
      const rows = await sql<{ n: string }>(`SELECT count(*) AS n FROM "${fresh}".jobs_migrations`);
      // Each version recorded once.
      expect(Number(rows[0]?.n)).toBe(stores[0]?.dialect.migrations.length);
      await stores[0]?.enqueue([newJob('a')]);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
      await dropSchema(fresh);
    }
  });

  it('an enqueue inside a committed transaction wakes other stores only on commit', async () => {
    const wakes = wakeCounter(reader);
    await reader.listening();
    const client = await writer.pool.connect();
    try {
      await client.query('BEGIN');
      const [result] = await writer.enqueue([newJob('a')], { tx: client });
      // Not visible and not announced before commit.
      expect(await reader.getJob(result?.job.id as string)).toBeNull();
      await sleep(150);
      expect(wakes.count).toBe(0);
      const woke = wakes.next();
      await client.query('COMMIT');
      await woke;
      expect(await reader.getJob(result?.job.id as string)).not.toBeNull();
    } finally {
      client.release();
      wakes.unsubscribe();
    }
  });

  it('a rolled-back enqueue leaves no job and wakes nobody', async () => {
    const wakes = wakeCounter(reader);
    await reader.listening();
    const client = await writer.pool.connect();
    let id = '';
    try {
      await client.query('BEGIN');
      const results = await writer.enqueue([newJob('a'), newJob('a', { key: 'rolled-back' })], {
        tx: client,
      });
      id = results[0]?.job.id as string;
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    await sleep(300);
    expect(wakes.count).toBe(0);
    expect(await reader.getJob(id)).toBeNull();
    const raw = await sql(
      `SELECT id FROM "${schema}".jobs WHERE id = $1 OR job_key = 'rolled-back'`,
      [id],
    );
    expect(raw).toEqual([]);
    wakes.unsubscribe();
  });

  it('a bulk enqueue sends one notification per statement', async () => {
    const wakes = wakeCounter(reader);
    await reader.listening();
    const woke = wakes.next();
    await writer.enqueue(Array.from({ length: 200 }, () => newJob('a')));
    await woke;
    await sleep(150);
    expect(wakes.count).toBe(1);
    wakes.unsubscribe();
  });

  it('the listener reconnects after its connection is killed and hears later enqueues', async () => {
    const wakes = wakeCounter(reader);
    await reader.listening();
    const pid = await reader.listenerBackendPid();
    expect(pid).toBeTypeOf('number');
    await sql('SELECT pg_terminate_backend($1)', [pid]);
    // The reconnect wakes once by itself (notifications may have been missed while down).
    await wakes.next();
    const newPid = await reader.listenerBackendPid();
    expect(newPid).not.toBe(pid);
    const before = wakes.count;
    const woke = wakes.next();
    await writer.enqueue([newJob('a')]);
    await woke;
    expect(wakes.count).toBeGreaterThan(before);
    wakes.unsubscribe();
  });

  it('released and recovered jobs wake other stores: they are acquirable again', async () => {
    await writer.enqueue([newJob('rel'), newJob('rel')]);
    const [a, b] = await writer.acquire({
      owner: 'w',
      limit: 2,
      leaseMs: 30_000,
      types: ['rel'],
      queues: null,
      tenants: null,
    });
    const wakes = wakeCounter(reader);
    await reader.listening();
    let woke = wakes.next();
    await writer.release([{ id: a?.id as string, token: a?.lockToken as string }]);
    await woke;
    await sql(
      `UPDATE "${schema}".jobs SET lock_expires_at = now() - interval '1 second' WHERE id = $1`,
      [b?.id],
    );
    woke = wakes.next();
    expect((await writer.recoverExpiredLeases(10)).requeued).toEqual([b?.id]);
    await woke;
    wakes.unsubscribe();
  });

  it('rejects a tx that is not a pg client', async () => {
    await expect(writer.enqueue([newJob('a')], { tx: {} })).rejects.toThrow(/is no pg client/);
  });
});
