/**
 * The pool fits the engine: a store opened with default options grows its pool when an engine
 * starts, so handlers that hold `ctx.transaction` and call the store once more never wait for a
 * connection until it times out; a `connectionLimit` given too small is kept and warned about
 * once.
 */

import { sleep, waitFor } from '@jobs/conformance';
import { type Job, type JobContext, JobEngine, type Logger } from '@jobs/core';
import type { PoolConnection } from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { MysqlJobStore, type MysqlJobStoreOptions } from '../src/index.js';
import { MYSQL_URL, reachable, sql, TestDatabase } from './helpers.js';

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

/** The pool's size now, as the store reports it (an empty reservation, given back). */
function connectionLimit(store: MysqlJobStore): number | null {
  const reservation = store.reserveConnections(0);
  reservation.release();
  return reservation.poolSize;
}

describe.skipIf(!reachable)('MysqlJobStore pool size', () => {
  const db = new TestDatabase();
  db.register();

  async function openStore(options: Partial<MysqlJobStoreOptions> = {}) {
    const store = db.keep(new MysqlJobStore({ uri: MYSQL_URL, database: db.name, ...options }));
    await store.migrate();
    return store;
  }

  it('default options: 20 handlers at concurrency 20, each in ctx.transaction enqueuing one more job, all finish on their first attempt', async () => {
    const store = await openStore();
    await sql(`CREATE TABLE IF NOT EXISTS \`${db.name}\`.effects (job_id VARCHAR(32))`);
    const { logger, lines } = recordingLogger();
    const problems: unknown[] = [];
    const children: unknown[] = [];
    const engine: JobEngine = new JobEngine({
      store,
      concurrency: 20,
      logger,
      handlers: {
        parent: async (job: Job, ctx: JobContext) => {
          await ctx.transaction(async (tx: PoolConnection) => {
            await tx.query(`INSERT INTO \`${db.name}\`.effects (job_id) VALUES (?)`, [job.id]);
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
    expect(
      connectionLimit(store),
      'concurrency + 6 (the wake-up wait has its own connection)',
    ).toBe(26);
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
    const effects = await sql(`SELECT COUNT(*) AS n FROM \`${db.name}\`.effects`);
    expect(Number(effects[0]?.n)).toBe(20);
    expect(connectionLimit(store), 'stopping gave the connections back').toBe(10);
  });

  it('a connectionLimit given too small is kept, and the engine warns once naming both numbers', async () => {
    const store = await openStore({ connectionLimit: 8 });
    const { logger, lines } = recordingLogger();
    const engine = new JobEngine({
      store,
      concurrency: 20,
      logger,
      handlers: { work: async () => {} },
    });
    await engine.start();
    await engine.stop();
    expect(connectionLimit(store)).toBe(8);
    expect(lines.warn).toHaveLength(1);
    expect(lines.warn[0]).toContain('pool holds 8 connections, fewer than the 26');
    expect(lines.warn[0]).toContain('set `connectionLimit` to at least 26');
  });
});
