/**
 * Wake-ups on MySQL/MariaDB through TypeORM, as `@jobs/mysql`'s: an idle engine waits on the
 * server (one `SELECT SLEEP(…)` per `notifyWaitMs`, on a connection of the store's own) instead
 * of reading the end of the jobs' key every 20 ms, and an enqueue of another store ends the wait
 * (`KILL QUERY`), so a job starts long before the wait or the engines' 30 s poll would come; so
 * does a signal sent elsewhere to a job waiting for it.
 * Counts statements at mysql2's connections, never times.
 */
import { makeNewJob } from '@jobs/conformance';
import { JobEngine, silentLogger } from '@jobs/core';
import mysqlCore from 'mysql2';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import {
  createTestDatabase,
  openDataSource,
  serverAvailable,
  type TestDatabase,
} from './databases.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits (bounded: 10 s) until `done()`; says whether it came. */
async function until(done: () => boolean): Promise<boolean> {
  for (let i = 0; i < 500 && !done(); i++) await sleep(20);
  return done();
}

/** The prototype of mysql2's connections (TypeORM's pool and the store's own), where `query` lives. */
const connectionMethods = (mysqlCore as unknown as { Connection: { prototype: object } }).Connection
  .prototype as Record<string, unknown>;

/** Records the text of every statement any mysql2 connection of this process sends. */
function recordStatements(): { texts: string[]; stop(): void } {
  const texts: string[] = [];
  const originals = ['query', 'execute'].map((method) => {
    const original = connectionMethods[method] as (...args: unknown[]) => unknown;
    connectionMethods[method] = function (this: unknown, ...args: unknown[]) {
      const first = args[0] as string | { sql?: string };
      texts.push(String(typeof first === 'string' ? first : first?.sql));
      return original.apply(this, args);
    };
    return [method, original] as const;
  });
  return {
    texts,
    stop: () => {
      for (const [method, original] of originals) connectionMethods[method] = original;
    },
  };
}

const available = await serverAvailable('mysql');

describe.skipIf(!available)(
  '@jobs/typeorm on MySQL/MariaDB: wake-ups wait, they do not poll',
  () => {
    let db: TestDatabase;
    let sources: DataSource[] = [];

    beforeAll(async () => {
      db = await createTestDatabase('mysql');
    });
    afterAll(async () => {
      await Promise.all(sources.map((source) => source.destroy()));
      await db.drop();
    });

    it('an idle engine sends a wait per notifyWaitMs, no key reads, and an enqueue elsewhere ends its wait', async () => {
      const writerSource = await openDataSource(db);
      const nodeSource = await openDataSource(db);
      sources = [writerSource, nodeSource];
      const writer = new TypeormJobStore({ dataSource: writerSource });
      await writer.migrate();
      // A wait far longer than the test: a job that starts was woken by the enqueue's KILL QUERY,
      // not by the wait's end nor by the engine's own poll (30 s).
      const node = new TypeormJobStore({ dataSource: nodeSource, notifyWaitMs: 60_000 });
      const started: string[] = [];
      const engine = new JobEngine({
        store: node,
        logger: silentLogger,
        handlers: {
          work: async (job) => void started.push(job.id),
          approve: async (_job, ctx) => {
            resumed.push(await ctx.waitFor('approved', { key: 'order-1', timeoutMs: 600_000 }));
          },
        },
      });
      const resumed: unknown[] = [];
      const log = recordStatements();
      try {
        await engine.start();
        // The first wait comes once the engine is idle (later on a loaded machine: the store
        // opens its own connection for it); then a while more, in which nothing reads the key.
        const isWait = (text: string) => text.startsWith('SELECT SLEEP(');
        expect(await until(() => log.texts.some(isWait))).toBe(true);
        await sleep(1_000);
        const keyReads = log.texts.filter((text) => /MAX\(`?id`?\)/i.test(text));
        expect(keyReads).toEqual([]);
        const idleFrom = log.texts.length;
        const [enqueued] = await writer.enqueue([makeNewJob({ type: 'work' })]);
        expect(await until(() => started.includes(String(enqueued?.job.id)))).toBe(true);
        expect(log.texts.slice(idleFrom).some((text) => text.startsWith('KILL QUERY'))).toBe(true);
        // A signal sent elsewhere ends the wait too: the job waiting for it resumes at once.
        const [waiting] = await writer.enqueue([makeNewJob({ type: 'approve' })]);
        const id = String(waiting?.job.id);
        let parked = false;
        for (let i = 0; i < 500 && !parked; i++) {
          await sleep(20);
          parked = (await writer.getJob(id))?.state === 'timer';
        }
        expect(parked).toBe(true);
        await sleep(500); // the idle engine's store waits on the server again
        await writer.waits.signal('approved', 'order-1', '"yes"');
        expect(await until(() => resumed.length > 0)).toBe(true);
        expect(resumed).toEqual(['yes']);
      } finally {
        log.stop();
        await engine.stop();
        await Promise.all([node.close(), writer.close()]);
      }
    });

    it('polls when notifyIntervalMs is given, as before', async () => {
      const source = await openDataSource(db);
      sources.push(source);
      const store = new TypeormJobStore({ dataSource: source, notifyIntervalMs: 20 });
      await store.migrate();
      const engine = new JobEngine({
        store,
        logger: silentLogger,
        handlers: { work: async () => {} },
      });
      const log = recordStatements();
      try {
        await engine.start();
        await sleep(500);
        expect(log.texts.some((text) => text.startsWith('SELECT SLEEP('))).toBe(false);
        expect(log.texts.length).toBeGreaterThan(5);
      } finally {
        log.stop();
        await engine.stop();
        await store.close();
      }
    });
  },
);
