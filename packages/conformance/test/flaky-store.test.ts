import { MemoryJobStore } from '@jobs/core';
import { describe, expect, it } from 'vitest';
import { FlakyJobStore, InjectedFaultError, makeNewJob } from '../src/index.js';

async function enqueueMany(store: FlakyJobStore, n: number): Promise<string[]> {
  const outcomes: string[] = [];
  for (let i = 0; i < n; i++) {
    try {
      await store.enqueue([makeNewJob({ payload: i })]);
      outcomes.push('ok');
    } catch (error) {
      outcomes.push(error instanceof InjectedFaultError ? error.injected : 'other');
    }
  }
  return outcomes;
}

describe('FlakyJobStore', () => {
  it('fails about failureRate of the calls, half before and half after the inner call', async () => {
    const inner = new MemoryJobStore();
    const store = new FlakyJobStore(inner, { failureRate: 0.3, seed: 7 });
    const outcomes = await enqueueMany(store, 400);
    const before = outcomes.filter((o) => o === 'before').length;
    const after = outcomes.filter((o) => o === 'after').length;
    expect(store.faults).toMatchObject({
      calls: 400,
      before,
      after,
      byMethod: { enqueue: before + after },
    });
    expect(before + after).toBeGreaterThan(80);
    expect(before + after).toBeLessThan(160);
    expect(before).toBeGreaterThan(0);
    expect(after).toBeGreaterThan(0);
    // A fault after the call took effect still wrote the job; a fault before did not.
    expect((await inner.listJobs({ limit: 1000, offset: 0 })).length).toBe(400 - before);
  });

  it('the same seed injects the same faults', async () => {
    const a = await enqueueMany(new FlakyJobStore(new MemoryJobStore(), { seed: 3 }), 50);
    const b = await enqueueMany(new FlakyJobStore(new MemoryJobStore(), { seed: 3 }), 50);
    const c = await enqueueMany(new FlakyJobStore(new MemoryJobStore(), { seed: 4 }), 50);
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
  });

  it('reads pass through, and enabled = false stops injecting', async () => {
    const store = new FlakyJobStore(new MemoryJobStore(), { failureRate: 1, mode: 'before' });
    await expect(store.enqueue([makeNewJob()])).rejects.toBeInstanceOf(InjectedFaultError);
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
    store.enabled = false;
    await store.enqueue([makeNewJob()]);
    expect(await store.stats()).toEqual([{ type: 'work', state: 'async', count: 1 }]);
    expect(store.faults.before).toBe(1);
  });

  it('rejects a failure rate outside 0..1', () => {
    expect(() => new FlakyJobStore(new MemoryJobStore(), { failureRate: 1.5 })).toThrow(RangeError);
  });
});
