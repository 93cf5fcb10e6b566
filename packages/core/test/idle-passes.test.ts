/**
 * What an idle engine asks its store: a store may set the engine's default poll
 * (`capabilities.pollIntervalMs`); passes woken only for housekeeping (lease recovery every
 * `leaseMs / 2`) neither acquire nor read the next due time, unless the housekeeping recovered
 * jobs, which are then acquired on the same pass.
 */
import { describe, expect, it } from 'vitest';
import { resolveEngineOptions } from '../src/engine/options.js';
import { MemoryJobStore } from '../src/memory-store.js';
import { engine, newJob, waitFor } from './helpers.js';

/** A memory store that asks engines for a default poll of `pollIntervalMs`. */
function storeWithPoll(pollIntervalMs: unknown): MemoryJobStore {
  const store = new MemoryJobStore();
  Object.assign(store, { capabilities: { ...store.capabilities, pollIntervalMs } });
  return store;
}

/** Counts the calls an engine makes to `store`'s acquisition, due-time and recovery methods. */
function countCalls(store: MemoryJobStore) {
  const calls = { acquire: 0, nextDueAt: 0, recover: 0 };
  const acquire = store.acquire.bind(store);
  const nextDueAt = store.nextDueAt.bind(store);
  const recover = store.recoverExpiredLeases.bind(store);
  Object.assign(store, {
    acquire: (...args: Parameters<typeof acquire>) => {
      calls.acquire += 1;
      return acquire(...args);
    },
    nextDueAt: (...args: Parameters<typeof nextDueAt>) => {
      calls.nextDueAt += 1;
      return nextDueAt(...args);
    },
    recoverExpiredLeases: (...args: Parameters<typeof recover>) => {
      calls.recover += 1;
      return recover(...args);
    },
  });
  return calls;
}

describe('idle passes', () => {
  it("takes the store's capabilities.pollIntervalMs as the default poll; the option wins", () => {
    const store = storeWithPoll(30_000);
    expect(resolveEngineOptions({ store, handlers: {} }).pollIntervalMs).toBe(30_000);
    expect(
      resolveEngineOptions({ store, handlers: {}, pollIntervalMs: 2_000 }).pollIntervalMs,
    ).toBe(2_000);
    expect(resolveEngineOptions({ store: new MemoryJobStore(), handlers: {} }).pollIntervalMs).toBe(
      5_000,
    );
  });

  it('refuses a capabilities.pollIntervalMs that is no whole number from 25, naming the store', () => {
    for (const bad of [0, 2.5, '4000', -1]) {
      expect(() => resolveEngineOptions({ store: storeWithPoll(bad), handlers: {} })).toThrow(
        /capabilities\.pollIntervalMs of the memory store: must be a whole number from 25/,
      );
    }
  });

  it('housekeeping passes of an idle engine neither acquire nor read the next due time', async () => {
    const store = storeWithPoll(60_000);
    const calls = countCalls(store);
    // Lease recovery every 50 ms; the poll not within the test.
    const e = engine({ store, leaseMs: 100, handlers: { work: async () => {} } });
    await e.start();
    await waitFor(() => calls.recover >= 6, 'six recovery passes');
    // The first pass acquired and read the next due time; none of the recovery passes did.
    expect(calls.acquire).toBe(1);
    expect(calls.nextDueAt).toBe(1);
    await e.stop();
  });

  it('a pass that recovered a lease acquires the job at once, without waiting for a poll', async () => {
    const store = storeWithPoll(60_000);
    const [enqueued] = await store.enqueue([newJob({ type: 'work' })]);
    // An owner that dies holding the job: its lease lapses after 100 ms.
    await store.acquire({
      owner: 'dead',
      limit: 1,
      leaseMs: 100,
      types: ['work'],
      queues: null,
      tenants: null,
    });
    const ran: string[] = [];
    const e = engine({
      store,
      leaseMs: 200,
      handlers: {
        work: async (job) => {
          ran.push(job.id);
        },
      },
    });
    await e.start();
    // Recovered within a pass or two of its expiry; the next poll is a minute away.
    await waitFor(() => ran.length > 0, 'the recovered job to run', 5_000);
    expect(ran).toEqual([enqueued?.job.id]);
    await e.stop();
  });
});
