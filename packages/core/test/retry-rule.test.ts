/**
 * The retry rule (`decideRetry`, rules.ts): what a failed attempt leads to, for the
 * engine's handlers and `@jobs/http`'s remote workers alike; and an engine run still follows it.
 */
import { describe, expect, it } from 'vitest';
import {
  decideRetry,
  JobEngine,
  MemoryJobStore,
  type RetryPolicy,
  UnrecoverableError,
} from '../src/index.js';

const doubling: RetryPolicy = { kind: 'exponential', initialMs: 1_000, factor: 2, jitter: 0 };
const job = (over: { retriesLeft?: number; attempts?: number; retryPolicy?: RetryPolicy }) => ({
  retriesLeft: 2,
  attempts: 1,
  retryPolicy: null,
  ...over,
});

describe('decideRetry', () => {
  it("with retries left, waits the backoff of the type's policy for this failure", () => {
    expect(decideRetry(job({ attempts: 3 }), { unrecoverable: false }, doubling)).toEqual({
      willRetry: true,
      delayMs: 4_000,
    });
    // An attempt count of 0 (never started) counts as the first failure.
    expect(decideRetry(job({ attempts: 0 }), { unrecoverable: false }, doubling).delayMs).toBe(
      1_000,
    );
  });

  it("the job's own policy wins over the type's; a delay the worker named wins over both", () => {
    const own = job({ retryPolicy: { kind: 'fixed', delayMs: 7_000 } });
    expect(decideRetry(own, { unrecoverable: false }, doubling).delayMs).toBe(7_000);
    expect(decideRetry(own, { unrecoverable: false, delayMs: 0 }, doubling)).toEqual({
      willRetry: true,
      delayMs: 0,
    });
    expect(decideRetry(own, { unrecoverable: false, delayMs: null }, doubling).delayMs).toBe(7_000);
  });

  it('no retries left, or unrecoverable: the dead-letter area, whatever delay was named', () => {
    const deadletter = { willRetry: false, delayMs: 0 };
    expect(decideRetry(job({ retriesLeft: 0 }), { unrecoverable: false }, doubling)).toEqual(
      deadletter,
    );
    expect(
      decideRetry(job({ retriesLeft: 0 }), { unrecoverable: false, delayMs: 5 }, doubling),
    ).toEqual(deadletter);
    expect(decideRetry(job({ retriesLeft: 5 }), { unrecoverable: true }, doubling)).toEqual(
      deadletter,
    );
  });

  it("an engine's failed runs follow it: the handler's policy, then UnrecoverableError dead-letters", async () => {
    const store = new MemoryJobStore();
    let runs = 0;
    const engine = new JobEngine({
      store,
      handlers: {
        flaky: {
          retry: { kind: 'fixed', delayMs: 30 },
          handler: async () => {
            runs += 1;
            throw runs === 1 ? new Error('try again') : new UnrecoverableError('give up');
          },
        },
      },
    });
    const failed: { willRetry: boolean; retryDelayMs: number; message: string }[] = [];
    const done = new Promise<void>((resolve) =>
      engine.on('failed', ({ willRetry, retryDelayMs, error }) => {
        failed.push({ willRetry, retryDelayMs, message: error.message });
        if (!willRetry) resolve();
      }),
    );
    await engine.start();
    try {
      const enqueued = await engine.enqueue('flaky', {}, { retries: 3 });
      await done;
      expect(failed).toEqual([
        { willRetry: true, retryDelayMs: 30, message: 'try again' },
        { willRetry: false, retryDelayMs: 0, message: 'give up' },
      ]);
      const dead = await store.getJob(enqueued.id);
      expect(dead?.state).toBe('deadletter');
      expect(dead?.retriesLeft).toBe(2);
    } finally {
      await engine.stop({ timeoutMs: 1_000 });
    }
  });
});
