/**
 * The pool fits the engine: a store opened with default options grows its pool when an engine
 * starts, so handlers that hold `ctx.transaction` and call the store once more never wait for a
 * connection until it times out; a `max` given too small is kept and warned about once.
 */

import { waitFor } from '@jobs/conformance';
import { type Job, type JobContext, JobEngine, type Logger } from '@jobs/core';
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresJobStore, type PostgresJobStoreOptions } from '../src/index.js';
import { dropSchema, PG_URL, randomSchema, reachable, sleep } from './helpers.js';

const schema = randomSchema('pool');

/** A logger that keeps what it is told. */
function recordingLogger() {
  const lines = { warn: [] as string[], error: [] as string[] };
  const logger: Logger = {
    debug() {},
    info() {},
    warn: (message) => void lines.warn.push(message),
    error: (message) => void lines.error.push(message),
  };
  return { logger, lines };
}

const stores: PostgresJobStore[] = [];
async function openStore(options: Partial<PostgresJobStoreOptions> = {}) {
  const store = new PostgresJobStore({ connectionString: PG_URL, schema, ...options });
  stores.push(store);
  await store.migrate();
  return store;
}

/** pg's pool size now. */
const poolMax = (store: PostgresJobStore) =>
  (store.pool as unknown as { options: { max: number } }).options.max;

describe.skipIf(!reachable)('PostgresJobStore pool size', () => {
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await dropSchema(schema);
  });

  it('default options: 20 handlers at concurrency 20, each in ctx.transaction enqueuing one more job, all finish on their first attempt', async () => {
    const store = await openStore();
    await store.pool.query(`CREATE TABLE IF NOT EXISTS "${schema}".effects (job_id text)`);
    const { logger, lines } = recordingLogger();
    const problems: unknown[] = [];
    const children: unknown[] = [];
    const engine: JobEngine = new JobEngine({
      store,
      concurrency: 20,
      logger,
      handlers: {
        parent: async (job: Job, ctx: JobContext) => {
          await ctx.transaction(async (tx: pg.PoolClient) => {
            await tx.query(`INSERT INTO "${schema}".effects (job_id) VALUES ($1)`, [job.id]);
            // One more store call while the transaction holds its connection.
            await engine.enqueue('child', { parent: job.id });
            await sleep(300);
          });
        },
        child: async (job: Job) => void children.push((job.payload as { parent: string }).parent),
      },
    });
    engine.on('failed', ({ error }) => void problems.push(error));
    engine.on('error', ({ error, during }) => void problems.push(`${during}: ${String(error)}`));
    await engine.start();
    expect(poolMax(store), 'the default pool grew to concurrency + 6').toBe(26);
    const parents = await engine.enqueueMany(
      Array.from({ length: 20 }, (_, i) => ({ type: 'parent', payload: { i } })),
    );
    await waitFor('every child to run', async () => children.length === 20, 60_000);
    await engine.stop();
    expect(problems, 'no handler waited out a connect timeout').toEqual([]);
    expect(lines).toEqual({ warn: [], error: [] });
    expect(new Set(children)).toEqual(new Set(parents.map((p) => p.id)));
    for (const parent of parents) {
      const record = await store.history.get(parent.id);
      expect(record, `parent ${parent.id} completed on its first attempt`).toMatchObject({
        outcome: 'completed',
        attempts: 1,
      });
    }
    const effects = await store.pool.query(`SELECT count(*)::int AS n FROM "${schema}".effects`);
    expect(effects.rows[0].n).toBe(20);
    expect(poolMax(store), 'stopping gave the connections back').toBe(10);
  });

  it('two engines on one default store: the pool fits both, and each stop gives its share back', async () => {
    const store = await openStore();
    const { logger, lines } = recordingLogger();
    const a = new JobEngine({ store, concurrency: 20, logger, handlers: { a: async () => {} } });
    const b = new JobEngine({ store, concurrency: 4, logger, handlers: { b: async () => {} } });
    await a.start();
    await b.start();
    expect(poolMax(store)).toBe(26 + 10);
    await a.stop();
    expect(poolMax(store)).toBe(10);
    await b.stop();
    expect(poolMax(store)).toBe(10);
    expect(lines.warn).toEqual([]);
  });

  it('a max given too small is kept, and the engine warns once naming both numbers', async () => {
    const store = await openStore({ max: 8 });
    const { logger, lines } = recordingLogger();
    const engine = new JobEngine({
      store,
      concurrency: 20,
      logger,
      handlers: { work: async () => {} },
    });
    await engine.start();
    await engine.stop();
    expect(poolMax(store)).toBe(8);
    expect(lines.warn).toHaveLength(1);
    expect(lines.warn[0]).toContain('pool holds 8 connections, fewer than the 26');
    expect(lines.warn[0]).toContain('set `max` to at least 26');
  });

  it('a max that fits draws no warning', async () => {
    const store = await openStore({ max: 26 });
    const { logger, lines } = recordingLogger();
    const engine = new JobEngine({
      store,
      concurrency: 20,
      logger,
      handlers: { w: async () => {} },
    });
    await engine.start();
    await engine.stop();
    expect(lines.warn).toEqual([]);
  });
});
