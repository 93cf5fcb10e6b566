/**
 * Due-time precision: an idle engine sleeps until the next due job on the store's clock and
 * starts it then, not after its idle back-off; an early wake-up (this clock a few ms ahead of
 * the store's) costs a few ms, not a back-off; a due job that cannot start never makes the
 * loop spin. Timers and clocks are fake here, so "when" is a reading of the fake clock.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../src/clock.js';
import { MemoryJobStore } from '../src/memory-store.js';
import { engine } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
});

function fakeTime(): void {
  vi.useFakeTimers({
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'],
  });
}

/** An engine on a store whose clock is `Date.now()`; the engine's clock is `engineAhead` ms ahead. */
async function idleEngine(
  engineAhead: number,
  handlers: Record<string, () => void | Promise<void>>,
) {
  const storeClock: Clock = { now: () => Date.now() };
  const store = new MemoryJobStore({ clock: storeClock });
  const clock: Clock = { now: () => Date.now() + engineAhead };
  const e = engine({ store, clock, handlers });
  await e.start();
  // Idle long enough for the idle delay to back off to its longest.
  await vi.advanceTimersByTimeAsync(10_000);
  return { e, store };
}

describe('due-time precision', () => {
  it('starts a job due at T at T on an idle engine, not after the idle back-off', async () => {
    fakeTime();
    const started: number[] = [];
    const { e } = await idleEngine(0, { t: () => void started.push(Date.now()) });
    const job = await e.enqueue('t', null, { delayMs: 300 });
    const due = job.dueAt.getTime();
    await vi.advanceTimersByTimeAsync(299);
    expect(started).toEqual([]);
    await vi.advanceTimersByTimeAsync(5);
    expect(started).toHaveLength(1);
    expect(started[0]).toBeGreaterThanOrEqual(due);
    expect(started[0]).toBeLessThanOrEqual(due + 2);
  });

  it('several timers in a row each start at their due time', async () => {
    fakeTime();
    const started: number[] = [];
    const { e } = await idleEngine(0, { t: () => void started.push(Date.now()) });
    const dues: number[] = [];
    for (const delayMs of [700, 150, 420]) {
      dues.push((await e.enqueue('t', null, { delayMs })).dueAt.getTime());
    }
    await vi.advanceTimersByTimeAsync(1_000);
    expect(started).toHaveLength(3);
    dues.sort((a, b) => a - b);
    for (const [n, due] of dues.entries()) {
      expect(started[n]).toBeGreaterThanOrEqual(due);
      expect(started[n]).toBeLessThanOrEqual(due + 2);
    }
  });

  it('an early wake-up (the engine’s clock ahead of the store’s) costs a few ms, not a back-off', async () => {
    fakeTime();
    const started: number[] = [];
    const { store } = await idleEngine(7, { t: () => void started.push(Date.now()) });
    // Enqueued on the store's clock, from another client: a notification wakes the engine.
    const client = engine({ store, handlers: {} });
    const job = await client.enqueue('t', null, { delayMs: 300 });
    const due = job.dueAt.getTime();
    await vi.advanceTimersByTimeAsync(299);
    expect(started).toEqual([]);
    await vi.advanceTimersByTimeAsync(20);
    expect(started).toHaveLength(1);
    expect(started[0]).toBeGreaterThanOrEqual(due);
    expect(started[0]).toBeLessThanOrEqual(due + 10);
  });

  it('a due job that cannot start (its exclusive scope is busy) does not make the loop spin', async () => {
    fakeTime();
    let release: () => void = () => {};
    const { e, store } = await idleEngine(0, {
      t: async () => {
        await new Promise<void>((resolve) => {
          release = resolve;
        });
      },
    });
    await e.enqueue('t', 1, { scope: 'a', exclusive: true });
    await vi.advanceTimersByTimeAsync(10);
    await e.enqueue('t', 2, { scope: 'a', exclusive: true });
    let acquisitions = 0;
    const acquire = store.acquire.bind(store);
    store.acquire = (request) => {
      acquisitions += 1;
      return acquire(request);
    };
    await vi.advanceTimersByTimeAsync(10_000);
    // Backing off from 1 ms to the idle delay (≤ 1 s): some tries, never one per ms.
    expect(acquisitions).toBeGreaterThan(0);
    expect(acquisitions).toBeLessThan(40);
    release();
    await vi.advanceTimersByTimeAsync(100);
  });
});
