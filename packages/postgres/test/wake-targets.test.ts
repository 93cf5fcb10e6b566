/**
 * Targeted wake-ups (`src/postgres-store.ts`): six engines, each on a store with its own pool,
 * sit idle on one schema; an enqueue wakes at most `k` of them (counted as the statements each
 * node's pool ran), and the job still starts at once — on a wake-up, not a poll (the engines
 * poll once an hour). An enqueue inside the caller's transaction wakes every node. Mixed pools
 * (nodes that run different types, queues, tenants): `wake-filters.test.ts`.
 */
import { JobEngine, silentLogger } from '@jobs/core';
import type { Client } from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import { wakeTargetsFor } from '../src/postgres-store.js';
import { dropSchema, newJob, openStore, randomSchema, reachable, sleep, sql } from './helpers.js';

const schema = randomSchema('wake');
const NODES = 6;
const HOUR = 3_600_000;

interface Node {
  store: PostgresJobStore;
  engine: JobEngine;
  /** Statements (pool checkouts) since the last `reset()`. */
  statements: number;
}

describe.skipIf(!reachable)('PostgreSQL targeted wake-ups', () => {
  let writer: PostgresJobStore;
  let nodes: Node[] = [];
  const started = new Map<string, number>();
  let onStart: () => void = () => {};

  beforeAll(async () => {
    writer = openStore(schema, { wakeUps: 'targeted' });
    await writer.migrate();
  });
  afterAll(async () => {
    await writer?.close();
    await dropSchema(schema);
  });
  afterEach(async () => {
    await Promise.all(nodes.map((n) => n.engine.stop()));
    await Promise.all(nodes.map((n) => n.store.close()));
    nodes = [];
  });

  /** Listening connections of this schema's stores that say they are idle. */
  async function idleListeners(): Promise<number> {
    const rows = await sql<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name LIKE 'jobs:idle:%'
         AND pid = ANY($1::int[])`,
      [await Promise.all(nodes.map((n) => n.store.listenerBackendPid()))],
    );
    return Number(rows[0]?.n);
  }

  /** Six idle engines, each on its own store and pool, listening and named idle. */
  async function startNodes(): Promise<void> {
    nodes = Array.from({ length: NODES }, (_, i) => {
      const store = openStore(schema, { max: 4, wakeUps: 'targeted' });
      const engine = new JobEngine({
        store,
        owner: `node-${i}`,
        concurrency: 2,
        // No poll, no lease recovery pass while the test runs: a node that queries was woken.
        pollIntervalMs: HOUR,
        leaseMs: HOUR,
        logger: silentLogger,
        handlers: {
          ping: async (job) => {
            started.set(job.id, i);
            onStart();
          },
        },
      });
      const node: Node = { store, engine, statements: 0 };
      store.pool.on('acquire', () => {
        node.statements++;
      });
      return node;
    });
    await Promise.all(nodes.map((n) => n.engine.start()));
    await Promise.all(nodes.map((n) => n.store.listening()));
    for (let i = 0; i < 200 && (await idleListeners()) < NODES; i++) await sleep(10);
    expect(await idleListeners()).toBe(NODES);
    // Let each engine's first pass (acquire, next due time) end before counting.
    await sleep(100);
    for (const n of nodes) n.statements = 0;
  }

  function allStarted(ids: string[]): Promise<void> {
    return new Promise((resolve) => {
      onStart = () => {
        if (ids.every((id) => started.has(id))) resolve();
      };
      onStart();
    });
  }

  const woken = (): number => nodes.filter((n) => n.statements > 0).length;

  it('an enqueue of one job wakes one idle node of six, which starts it', async () => {
    await startNodes();
    const [result] = await writer.enqueue([newJob('ping')]);
    const id = result?.job.id as string;
    await allStarted([id]);
    // The node that ran it settles; let any other wake-up land before counting.
    await sleep(100);
    expect(woken()).toBeGreaterThanOrEqual(1);
    expect(woken()).toBeLessThanOrEqual(wakeTargetsFor(1));
    const runner = nodes[started.get(id) as number] as Node;
    expect(runner.statements).toBeGreaterThan(0);
  });

  it('an enqueue of three jobs wakes at most three nodes and all three jobs start', async () => {
    await startNodes();
    const results = await writer.enqueue([newJob('ping'), newJob('ping'), newJob('ping')]);
    await allStarted(results.map((r) => r.job.id));
    await sleep(100);
    expect(woken()).toBeLessThanOrEqual(wakeTargetsFor(3));
  });

  it("an enqueue inside the caller's transaction wakes every node, on commit", async () => {
    await startNodes();
    const client = await writer.pool.connect();
    let id: string;
    try {
      await client.query('BEGIN');
      const [result] = await writer.enqueue([newJob('ping')], { tx: client });
      id = result?.job.id as string;
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await allStarted([id]);
    // The NOTIFY in the transaction does not know the job: the shared channel, every node.
    for (let i = 0; i < 200 && woken() < NODES; i++) await sleep(10);
    expect(woken()).toBe(NODES);
  });

  it('with no idle node a wake-up goes to every node (the shared channel)', async () => {
    await startNodes();
    // Every listening connection says busy: no target, so the shared channel is notified.
    const renamed = await Promise.all(
      nodes.map(async (n) => {
        const client = await (
          n.store as unknown as { notifier: { ready(): Promise<Client> } }
        ).notifier.ready();
        await client.query("SELECT set_config('application_name', 'jobs:busy:test', false)");
      }),
    );
    expect(renamed).toHaveLength(NODES);
    expect(await idleListeners()).toBe(0);
    for (const n of nodes) n.statements = 0;
    const [result] = await writer.enqueue([newJob('ping')]);
    await allStarted([result?.job.id as string]);
    for (let i = 0; i < 200 && woken() < NODES; i++) await sleep(10);
    expect(woken()).toBe(NODES);
  });
});
