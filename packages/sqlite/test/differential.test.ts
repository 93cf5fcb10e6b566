/**
 * The memory store is the reference of the contract; this test makes that a check. Seeded random
 * sequences of store operations (enqueue with keys, scopes, priorities and delays; acquire;
 * complete, fail, release, renew; the clock moving on; lease recovery; suspend and activate;
 * delete; retry from the dead-letter area) run against a `MemoryJobStore` and a `SqliteJobStore`
 * on one `FakeClock`. After every step both stores must have answered alike and hold the same
 * jobs, field for field (lock tokens aside: each store makes its own).
 *
 * A failure names the seed and the step; rerun one seed with `JOBS_DIFF_SEED=<seed>`.
 */

import { seededRandom } from '@jobs/conformance';
import {
  FakeClock,
  type Job,
  type JobFilter,
  type JobRef,
  MemoryJobStore,
  type NewJob,
  refOf,
} from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import { describe, expect, it } from 'vitest';
import { freshFile, newJob } from './helpers.js';

const SEEDS = process.env.JOBS_DIFF_SEED
  ? [Number(process.env.JOBS_DIFF_SEED)]
  : Array.from({ length: 10 }, (_, i) => 1_000 + i);
const STEPS = 200;
const LEASE_MS = 1_000;
const TYPES = ['a', 'b'];

/**
 * Ids are compared by when their job was made, not by value: ids only promise their order, and a
 * store may leave gaps (SQLite's AUTOINCREMENT after a replaced key, a PostgreSQL sequence after
 * a rollback). `sqliteIds` maps each SQLite id to the memory store's id of the same job.
 */
type Side = 'memory' | 'sqlite';
const sqliteIds = new Map<string, string>();
const memoryIds = new Map<string, string>();
const sameId = (side: Side, id: string): string =>
  side === 'memory' ? id : (sqliteIds.get(id) ?? `unmatched sqlite id ${id}`);
const idIn = (side: Side, memoryId: string): string =>
  side === 'memory' ? memoryId : (memoryIds.get(memoryId) ?? `unmatched memory id ${memoryId}`);
function match(memoryId: string, sqliteId: string): void {
  if (sqliteIds.has(sqliteId) || memoryIds.has(memoryId)) return;
  sqliteIds.set(sqliteId, memoryId);
  memoryIds.set(memoryId, sqliteId);
}

/**
 * Jobs a store made on its own (the follow-up run of a key whose holder was running) are matched
 * in the order of their ids; a store that made a different number of them fails the comparison.
 */
async function matchNewJobs(pair: Pair): Promise<void> {
  const unmatched = async (side: Side, known: Map<string, string>) =>
    (await pair[side].listJobs({ limit: 10_000, offset: 0 }))
      .map((job) => job.id)
      .filter((id) => !known.has(id))
      .sort((x, y) => Number(x) - Number(y));
  const memory = await unmatched('memory', memoryIds);
  const sqlite = await unmatched('sqlite', sqliteIds);
  for (const [i, id] of memory.entries()) if (sqlite[i]) match(id, sqlite[i]);
}

/** What a job looks like to a user, minus what each store makes its own (the lock token). */
function shape(side: Side, job: Job | null): unknown {
  if (job === null) return null;
  return {
    id: sameId(side, job.id),
    type: job.type,
    payload: job.payload,
    state: job.state,
    priority: job.priority,
    dueAt: job.dueAt.getTime(),
    retriesLeft: job.retriesLeft,
    attempts: job.attempts,
    scope: job.scope,
    exclusive: job.exclusive,
    scopeLimit: job.scopeLimit ?? null,
    key: job.key,
    queue: job.queue,
    lastError: job.lastError?.message ?? null,
    createdAt: job.createdAt.getTime(),
    lockOwner: job.lockOwner,
    lockExpiresAt: job.lockExpiresAt?.getTime() ?? null,
    locked: job.lockToken !== null,
    startedAt: job.startedAt?.getTime() ?? null,
    suspendedFrom: job.suspendedFrom,
  };
}

const ids = (side: Side, jobs: readonly Job[]): string[] => jobs.map((job) => sameId(side, job.id));
const sorted = (side: Side, values: readonly string[] | undefined): string[] =>
  (values ?? []).map((id) => sameId(side, id)).sort();

/** The two stores and, for each job either holds a lease on, its token in each. */
interface Pair {
  memory: MemoryJobStore;
  sqlite: SqliteJobStore;
  held: Map<string, { memory: JobRef; sqlite: JobRef }>;
}

async function both<T>(
  pair: Pair,
  call: (store: MemoryJobStore | SqliteJobStore, side: Side) => Promise<T>,
): Promise<[T, T]> {
  return [await call(pair.memory, 'memory'), await call(pair.sqlite, 'sqlite')];
}

async function snapshot(pair: Pair, side: Side): Promise<unknown[]> {
  const jobs = await pair[side].listJobs({ limit: 10_000, offset: 0 });
  return jobs
    .map((job) => shape(side, job))
    .sort((x, y) => Number((x as Job).id) - Number((y as Job).id));
}

function randomNewJob(next: () => number): NewJob {
  const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)] as T;
  const scoped = next() < 0.35;
  const keyed = next() < 0.3;
  return newJob({
    type: pick(TYPES),
    payload: { n: Math.floor(next() * 1_000) },
    priority: pick([-1, 0, 0, 1, 2]),
    delayMs: next() < 0.3 ? Math.floor(next() * 2_000) : 0,
    retries: pick([0, 1, 2]),
    scope: scoped ? pick(['s1', 's2']) : null,
    exclusive: scoped && next() < 0.7,
    scopeLimit: scoped && next() < 0.3 ? 2 : null,
    key: keyed ? pick(['k1', 'k2', 'k3']) : null,
    keyMode: keyed ? pick(['keep', 'replace', 'debounce'] as const) : undefined,
    queue: pick(['default', 'default', 'q2']),
  });
}

async function runSequence(seed: number): Promise<void> {
  const next = seededRandom(seed);
  const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)] as T;
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const pair: Pair = {
    memory: new MemoryJobStore({ clock }),
    sqlite: new SqliteJobStore({ filename: freshFile(), clock }),
    held: new Map(),
  };
  sqliteIds.clear();
  memoryIds.clear();
  await pair.memory.migrate();
  await pair.sqlite.migrate();
  const heldIds = () => [...pair.held.keys()];
  const takeHeld = (): [string, { memory: JobRef; sqlite: JobRef }] | null => {
    const all = [...pair.held.entries()];
    return all.length === 0 ? null : pick(all);
  };
  try {
    for (let step = 0; step < STEPS; step++) {
      const roll = next();
      let op = '';
      let answers: [unknown, unknown] = [null, null];
      if (roll < 0.22) {
        const jobs = Array.from({ length: 1 + Math.floor(next() * 3) }, () => randomNewJob(next));
        op = `enqueue ${JSON.stringify(jobs.map((j) => [j.type, j.key, j.keyMode, j.scope]))}`;
        // One at a time: a batch holding two jobs of one key is refused by design.
        const results: [unknown[], unknown[]] = [[], []];
        for (const job of jobs) {
          const [m, s] = await both(pair, (store) => store.enqueue([job]));
          for (const [i, r] of m.entries()) if (s[i]) match(r.job.id, s[i].job.id);
          results[0].push(m.map((r) => [r.created, shape('memory', r.job)]));
          results[1].push(s.map((r) => [r.created, shape('sqlite', r.job)]));
        }
        answers = results;
      } else if (roll < 0.42) {
        const request = {
          owner: pick(['w1', 'w2']),
          limit: 1 + Math.floor(next() * 4),
          leaseMs: LEASE_MS,
          types: next() < 0.8 ? TYPES : ['a'],
          queues: next() < 0.8 ? null : ['q2'],
          tenants: null,
        };
        op = `acquire ${JSON.stringify(request)}`;
        const [m, s] = await both(pair, (store) => store.acquire(request));
        answers = [ids('memory', m), ids('sqlite', s)];
        for (const [i, job] of m.entries()) {
          const other = s[i];
          if (other && sameId('sqlite', other.id) === job.id) {
            pair.held.set(job.id, { memory: refOf(job), sqlite: refOf(other) });
          }
        }
      } else if (roll < 0.54) {
        const held = takeHeld();
        if (!held) continue;
        op = `complete ${held[0]}`;
        const [m, s] = await both(pair, (store, side) => store.complete([held[1][side]]));
        answers = [sorted('memory', m.lost), sorted('sqlite', s.lost)];
        pair.held.delete(held[0]);
      } else if (roll < 0.64) {
        const held = takeHeld();
        if (!held) continue;
        const job = await pair.memory.getJob(held[0]);
        const retryDelayMs = Math.floor(next() * 1_500);
        const deadletter = (job?.retriesLeft ?? 0) <= 0;
        op = `fail ${held[0]} deadletter=${deadletter} delay=${retryDelayMs}`;
        const [m, s] = await both(pair, (store, side) =>
          store.fail([
            {
              ...held[1][side],
              error: { message: `boom ${step}`, stack: null },
              deadletter,
              retryDelayMs,
            },
          ]),
        );
        answers = [sorted('memory', m.lost), sorted('sqlite', s.lost)];
        pair.held.delete(held[0]);
      } else if (roll < 0.69) {
        const held = takeHeld();
        if (!held) continue;
        op = `release ${held[0]}`;
        const [m, s] = await both(pair, (store, side) => store.release([held[1][side]]));
        answers = [sorted('memory', m.lost), sorted('sqlite', s.lost)];
        pair.held.delete(held[0]);
      } else if (roll < 0.75) {
        const owner = pick(['w1', 'w2']);
        op = `renew ${owner} ${heldIds().join(',')}`;
        const [m, s] = await both(pair, (store, side) =>
          store.renewLeases(
            owner,
            LEASE_MS,
            [...pair.held.values()].map((refs) => refs[side]),
          ),
        );
        answers = [sorted('memory', m.lost), sorted('sqlite', s.lost)];
      } else if (roll < 0.87) {
        const ms = Math.floor(next() * 1_500);
        op = `advance ${ms} ms`;
        clock.advance(ms);
      } else if (roll < 0.92) {
        op = 'recover';
        const [m, s] = await both(pair, (store) => store.recoverExpiredLeases(100));
        answers = (['memory', 'sqlite'] as const).map((side) => {
          const r = side === 'memory' ? m : s;
          return {
            requeued: sorted(side, r.requeued),
            deadlettered: sorted(side, r.deadlettered),
            released: sorted(side, r.released),
            cancelled: sorted(side, r.cancelled),
          };
        }) as [unknown, unknown];
      } else if (roll < 0.95) {
        const filter: JobFilter = { type: pick(TYPES) };
        const suspend = next() < 0.5;
        op = `${suspend ? 'suspend' : 'activate'} ${filter.type}`;
        answers = await both(pair, (store) =>
          suspend ? store.suspend(filter) : store.activate(filter),
        );
      } else if (roll < 0.98) {
        // Deleting a running job is the engine's cancel, not a delete: pick a waiting one.
        const waiting = (await pair.memory.listJobs({ limit: 10_000, offset: 0 })).filter(
          (job) => job.state !== 'running',
        );
        if (waiting.length === 0) continue;
        const id = pick(waiting).id;
        op = `delete ${id}`;
        answers = await both(pair, (store, side) => store.deleteJob(idIn(side, id)));
      } else {
        const dead = await pair.memory.listJobs({ limit: 10_000, offset: 0, state: 'deadletter' });
        if (dead.length === 0) continue;
        const id = pick(dead).id;
        op = `retry ${id}`;
        const [m, s] = await both(pair, (store, side) => store.retryDeadletter(idIn(side, id), 1));
        answers = [shape('memory', m), shape('sqlite', s)];
      }
      await matchNewJobs(pair);
      if (process.env.JOBS_DIFF_TRACE) console.log(step, op, JSON.stringify(answers[0]));
      const where = `seed ${seed}, step ${step}: ${op}`;
      expect(answers[1], `${where} (answer)`).toEqual(answers[0]);
      expect(await snapshot(pair, 'sqlite'), `${where} (jobs)`).toEqual(
        await snapshot(pair, 'memory'),
      );
      // Each store's own answer for the next due time too (what an idle engine sleeps until).
      const nextDue = await both(pair, (store) =>
        store.nextDueAt({ types: TYPES, queues: null, tenants: null }),
      );
      expect(nextDue[1]?.getTime() ?? null, `${where} (next due)`).toBe(
        nextDue[0]?.getTime() ?? null,
      );
    }
  } finally {
    await pair.sqlite.close();
    await pair.memory.close();
  }
}

describe('the memory store and SQLite agree (seeded random operations)', () => {
  for (const seed of SEEDS) {
    it(`seed ${seed}: ${STEPS} steps`, async () => {
      await runSequence(seed);
    });
  }
});
