/**
 * Targeted wake-ups in a mixed pool (`src/postgres-store.ts`): idle nodes name what they acquire
 * (types, queues, tenants) in a Bloom filter, and an enqueue notifies only idle nodes that may
 * run its jobs. Several engines, each on a store with its own pool, sit idle on one schema and
 * poll once an hour, so a job that starts was started by a wake-up; a node's notifications are
 * counted on its listener. Also: a filter's false positive (a node woken for a job it cannot
 * run) leaves the job to the next poll of a node that runs it, and one enqueue costs the same
 * statements with 1 or 10 idle nodes.
 */
import { JobEngine, type NewJob, silentLogger } from '@jobs/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresJobStore, PostgresJobStoreOptions } from '../src/index.js';
import { acceptMasks, acquisitionFilter } from '../src/postgres-store.js';
import { dropSchema, newJob, openStore, randomSchema, reachable, sleep, sql } from './helpers.js';

const schema = randomSchema('wakef');
const HOUR = 3_600_000;

interface Node {
  name: string;
  store: PostgresJobStore;
  engine: JobEngine;
  /** Statements (pool checkouts) since the last `reset()`. */
  statements: number;
}

interface NodeSpec {
  types: string[];
  queues?: string[];
  tenants?: string[];
  pollIntervalMs?: number;
  wakeUps?: PostgresJobStoreOptions['wakeUps'];
}

/** Notifications a node's listener heard so far (both channels). */
function heard(node: Node): number {
  return (node.store as unknown as { notifier: { heard: number } }).notifier.heard;
}

/** A type name (`fp-<n>`) whose every accept mask the filter of `types` holds: a false positive. */
function falsePositiveType(types: string[]): string {
  const filter = BigInt(`0x${acquisitionFilter([{ types, queues: null, tenants: null }])}`);
  for (let n = 0; n < 1_000_000; n++) {
    const type = `fp-${n}`;
    const [mask] = acceptMasks({ type, queue: 'default', tenantId: null });
    const m = BigInt(`0x${mask}`);
    if ((filter & m) === m) return type;
  }
  throw new Error('no false positive in a million names');
}

describe.skipIf(!reachable)('PostgreSQL targeted wake-ups in a mixed pool', () => {
  let writer: PostgresJobStore;
  let nodes: Node[] = [];
  const started = new Map<string, string>();
  let onStart: () => void = () => {};

  beforeAll(async () => {
    writer = openStore(schema, { max: 2 });
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

  /** Listening connections of these nodes that say they are idle. */
  async function idleListeners(): Promise<number> {
    const rows = await sql<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name LIKE 'jobs:idle:%'
         AND pid = ANY($1::int[])`,
      [await Promise.all(nodes.map((n) => n.store.listenerBackendPid()))],
    );
    return Number(rows[0]?.n);
  }

  /** Engines per `specs`, each on its own store, started, listening; `idle` of them named idle. */
  async function startNodes(specs: Record<string, NodeSpec>, idle: number): Promise<void> {
    nodes = Object.entries(specs).map(([name, spec]) => {
      const store = openStore(schema, { max: 3, wakeUps: spec.wakeUps ?? 'targeted' });
      const run = async (job: { id: string }) => {
        started.set(job.id, name);
        onStart();
      };
      const engine = new JobEngine({
        store,
        owner: name,
        concurrency: 2,
        pollIntervalMs: spec.pollIntervalMs ?? HOUR,
        leaseMs: HOUR,
        logger: silentLogger,
        handlers: Object.fromEntries(spec.types.map((type) => [type, run])),
        ...(spec.queues ? { queues: spec.queues } : {}),
        ...(spec.tenants ? { tenants: spec.tenants } : {}),
      });
      const node: Node = { name, store, engine, statements: 0 };
      store.pool.on('acquire', () => {
        node.statements++;
      });
      return node;
    });
    await Promise.all(nodes.map((n) => n.engine.start()));
    await Promise.all(nodes.map((n) => n.store.listening()));
    for (let i = 0; i < 200 && (await idleListeners()) < idle; i++) await sleep(10);
    expect(await idleListeners()).toBe(idle);
    // Each engine's first pass (acquire, next due time) and every store's test notification end.
    await sleep(200);
    for (const n of nodes) n.statements = 0;
  }

  const node = (name: string): Node => nodes.find((n) => n.name === name) as Node;

  /** Enqueues `job` and resolves with the node that started it. */
  async function enqueueAndStart(job: NewJob): Promise<string> {
    const [result] = await writer.enqueue([job]);
    const id = result?.job.id as string;
    await new Promise<void>((resolve) => {
      onStart = () => {
        if (started.has(id)) resolve();
      };
      onStart();
    });
    // Let any other wake-up land before counting.
    await sleep(100);
    return started.get(id) as string;
  }

  it('an enqueue of y wakes the idle node that handles y, not the one that handles x', async () => {
    await startNodes({ a: { types: ['x'] }, b: { types: ['y'] } }, 2);
    const [aBefore, bBefore] = [heard(node('a')), heard(node('b'))];
    expect(await enqueueAndStart(newJob('y'))).toBe('b');
    expect(heard(node('a')) - aBefore).toBe(0);
    expect(heard(node('b')) - bBefore).toBe(1);
    expect(node('a').statements).toBe(0);
  });

  it('a queue-restricted node is woken for its queue only', async () => {
    await startNodes(
      { a: { types: ['x'], queues: ['mail'] }, b: { types: ['x'], queues: ['reports'] } },
      2,
    );
    const [aBefore, bBefore] = [heard(node('a')), heard(node('b'))];
    expect(await enqueueAndStart(newJob('x', { queue: 'reports' }))).toBe('b');
    expect(heard(node('a')) - aBefore).toBe(0);
    expect(await enqueueAndStart(newJob('x', { queue: 'mail' }))).toBe('a');
    expect(heard(node('b')) - bBefore).toBe(1);
  });

  it('a tenant-restricted node is woken for its tenant only; a job without tenant, never', async () => {
    await startNodes({ a: { types: ['x'], tenants: ['acme'] }, b: { types: ['x'] } }, 2);
    const [aBefore, bBefore] = [heard(node('a')), heard(node('b'))];
    expect(await enqueueAndStart(newJob('x', { tenantId: 'globex' }))).toBe('b');
    expect(await enqueueAndStart(newJob('x'))).toBe('b');
    expect(heard(node('a')) - aBefore).toBe(0);
    expect(heard(node('b')) - bBefore).toBe(2);
    // Both run acme's jobs: one of them is woken, and it starts the job.
    const before = nodes.map(heard);
    const runner = await enqueueAndStart(newJob('x', { tenantId: 'acme' }));
    const woken = nodes.map((n, i) => heard(n) - (before[i] as number));
    expect(woken.reduce((a, b) => a + b, 0)).toBe(1);
    expect(heard(node(runner)) - (before[nodes.indexOf(node(runner))] as number)).toBe(1);
  });

  it('a job no idle node runs wakes every node (the shared channel)', async () => {
    // c runs z but never names itself idle (broadcast): only the shared channel reaches it.
    await startNodes(
      { a: { types: ['x'] }, b: { types: ['y'] }, c: { types: ['z'], wakeUps: 'broadcast' } },
      2,
    );
    const before = nodes.map(heard);
    expect(await enqueueAndStart(newJob('z'))).toBe('c');
    expect(nodes.map((n, i) => heard(n) - (before[i] as number))).toEqual([1, 1, 1]);
  });

  it("a filter's false positive wakes a node that cannot run the job; a node that runs it polls it", async () => {
    // a's filter holds every bit of the type's mask though a has no such handler; c runs the
    // type but is not a wake-up target (broadcast), and polls every 200 ms: the bound.
    const type = falsePositiveType(['x']);
    await startNodes(
      { a: { types: ['x'] }, c: { types: [type], wakeUps: 'broadcast', pollIntervalMs: 200 } },
      1,
    );
    const [aBefore, cBefore] = [heard(node('a')), heard(node('c'))];
    expect(await enqueueAndStart(newJob(type))).toBe('c');
    expect(heard(node('a')) - aBefore).toBe(1);
    expect(heard(node('c')) - cBefore).toBe(0);
  });

  it('one enqueue costs the same statements with 1 and with 10 idle nodes', async () => {
    const counts: number[] = [];
    for (const size of [1, 10]) {
      await startNodes(
        Object.fromEntries(Array.from({ length: size }, (_, i) => [`n${i}`, { types: ['x'] }])),
        size,
      );
      let sent = 0;
      const count = () => {
        sent++;
      };
      writer.pool.on('acquire', count);
      await enqueueAndStart(newJob('x'));
      writer.pool.off('acquire', count);
      counts.push(sent + nodes.reduce((sum, n) => sum + n.statements, 0));
      await Promise.all(nodes.map((n) => n.engine.stop()));
      await Promise.all(nodes.map((n) => n.store.close()));
      nodes = [];
    }
    expect(counts[0]).toBeGreaterThan(0);
    expect(counts[1]).toBe(counts[0]);
  });
});
