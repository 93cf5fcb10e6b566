/**
 * Exclusive scopes under races that a snapshot-only check gets wrong: while peers acquire,
 * other connections insert higher-priority exclusive jobs into the same scope and complete
 * what is running. After every round, at most one job of the scope may be running.
 */
import type { AcquireRequest, Job } from '@jobs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import { dropSchema, newJob, openStore, randomSchema, reachable, sql } from './helpers.js';

const schema = randomSchema('excl');
const ROUNDS = 40;
const PEERS = 4;

describe.skipIf(!reachable)('exclusive scopes under racing acquirers and inserters', () => {
  let store: PostgresJobStore;
  let peers: PostgresJobStore[];

  beforeAll(async () => {
    store = openStore(schema);
    await store.migrate();
    peers = Array.from({ length: PEERS }, () => openStore(schema, { max: 2 }));
  });
  afterAll(async () => {
    await Promise.all((peers ?? []).map((p) => p.close()));
    await store?.close();
    await dropSchema(schema);
  });

  it('never runs two jobs of one scope, whatever is inserted or completed meanwhile', async () => {
    const request = (owner: string): AcquireRequest => ({
      owner,
      limit: 3,
      leaseMs: 60_000,
      types: ['a'],
      queues: null,
      tenants: null,
    });
    await store.enqueue(
      Array.from({ length: 5 }, () => newJob('a', { scope: 's', exclusive: true })),
    );
    let held: Job[] = [];
    let started = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const [acquired] = await Promise.all([
        Promise.all(peers.map((p, i) => p.acquire(request(`p${i}`)))),
        // A new head of the scope appears (higher priority) while peers decide.
        store.enqueue([newJob('a', { scope: 's', exclusive: true, priority: round })]),
        // …and what ran so far finishes, now or never.
        round % 2 === 0
          ? store.complete(held.map((j) => ({ id: j.id, token: j.lockToken as string })))
          : Promise.resolve({ lost: [] }),
      ]);
      const got = acquired.flat();
      started += got.length;
      expect(got.length).toBeLessThanOrEqual(1);
      if (round % 2 === 0) held = [];
      held.push(...got);
      const running = await sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".jobs WHERE scope = 's' AND state = 'running'`,
      );
      expect(running[0]?.n).toBeLessThanOrEqual(1);
    }
    expect(started).toBeGreaterThan(5);
  });
});
