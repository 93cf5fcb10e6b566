import { describe, expect, it, vi } from 'vitest';
import { MemoryJobStore } from '../src/memory-store.js';
import { engine, newJob, waitFor } from './helpers.js';

/** A memory store that asks engines for batches of up to `batchLimit` (as MySQL's does). */
function storeWithBatchLimit(batchLimit: unknown): MemoryJobStore {
  const store = new MemoryJobStore();
  Object.assign(store, { capabilities: { ...store.capabilities, batchLimit } });
  return store;
}

async function runBacklog(
  options: { prefetch?: number; maxPrefetch?: number },
  total: number,
  runMs = 0,
  store = new MemoryJobStore(),
) {
  await store.enqueue(Array.from({ length: total }, () => newJob({ type: 'noop' })));
  const batches: number[] = [];
  const limits: number[] = [];
  let done = 0;
  const e = engine({
    store,
    concurrency: 10,
    ...options,
    handlers: {
      noop: async () => {
        if (runMs > 0) await new Promise((resolve) => setTimeout(resolve, runMs));
        done += 1;
      },
    },
  });
  e.on('acquired', ({ jobs }) => {
    batches.push(jobs.length);
    limits.push(e.snapshot().prefetchLimit);
  });
  await e.start();
  await waitFor(() => done === total, 'the backlog to be run', 20_000);
  return { e, store, batches, limits };
}

describe('adaptive prefetch (the default)', () => {
  it('leases bigger batches while a backlog waits, up to concurrency + maxPrefetch', async () => {
    const { batches } = await runBacklog({}, 5_000);
    expect(batches[0]).toBe(20);
    expect(Math.max(...batches)).toBeGreaterThan(400);
    expect(Math.max(...batches)).toBeLessThanOrEqual(1_000);
  });

  it('shrinks again when the backlog is gone', async () => {
    const { e, store, batches, limits } = await runBacklog({}, 2_000);
    expect(Math.max(...limits)).toBeGreaterThan(100);
    const before = batches.length;
    // Single jobs now: batches come back nearly empty, so the engine holds fewer.
    for (let i = 0; i < 6; i++) {
      await store.enqueue([newJob({ type: 'noop' })]);
      e.poll();
      await waitFor(() => batches.length > before + i, 'an acquisition');
    }
    expect(e.snapshot().prefetchLimit).toBe(10);
  });

  it('holds no more slow jobs than start within half a second', async () => {
    // 50 ms a job at concurrency 10: at most 10 × 500 / 50 = 100 prefetched, where a backlog of
    // fast jobs grows past 400 (above). Node's timers run on the event loop's cached clock, so a
    // 50 ms timer can end 1–2 ms early by the wall clock the engine measures runs with: a run
    // measured at 48 ms allows 10 × 500 / 48 = 104 (a CI run saw 101).
    const { limits, batches } = await runBacklog({}, 600, 50);
    expect(Math.max(...limits)).toBeLessThanOrEqual(104);
    expect(Math.max(...batches)).toBeLessThanOrEqual(114);
    // It did grow: the cap is the horizon, not the starting prefetch.
    expect(Math.max(...limits)).toBeGreaterThan(20);
  });

  it('keeps a fixed prefetch when one is given', async () => {
    const { batches } = await runBacklog({ prefetch: 5 }, 500);
    expect(Math.max(...batches)).toBeLessThanOrEqual(15);
  });

  it("grows to the store's batchLimit where it asks for more than 1,000", async () => {
    // Wall-clock time stands still here, so every handler is measured at 0 ms whatever the load
    // on the machine: only the batch limit bounds the growth, not the start-within horizon
    // (on a busy machine a no-op measured at 7 ms would cap it at 10 × 500 / 7 ≈ 700).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    try {
      const { batches } = await runBacklog({}, 12_000, 0, storeWithBatchLimit(3_000));
      expect(Math.max(...batches)).toBeGreaterThan(1_000);
      expect(Math.max(...batches)).toBeLessThanOrEqual(3_000);
    } finally {
      vi.useRealTimers();
    }
  });

  it("maxPrefetch still bounds a store's larger batchLimit", async () => {
    const { batches } = await runBacklog({ maxPrefetch: 90 }, 2_000, 0, storeWithBatchLimit(3_000));
    expect(Math.max(...batches)).toBeLessThanOrEqual(100);
  });

  it('refuses a batchLimit that is not a whole number from 1, naming the store', () => {
    for (const bad of [0, 2.5, '4000', -1]) {
      expect(() => engine({ store: storeWithBatchLimit(bad), handlers: {} })).toThrow(
        /capabilities\.batchLimit of the memory store: must be a whole number from 1/,
      );
    }
  });

  it('honours maxPrefetch', async () => {
    const { batches } = await runBacklog({ maxPrefetch: 40 }, 1_000);
    expect(Math.max(...batches)).toBeLessThanOrEqual(50);
    expect(Math.max(...batches)).toBeGreaterThan(20);
  });
});
