/**
 * `StoreSyncedClock`: the store's time at the last sync plus the time elapsed since on a
 * monotonic clock, so a step of this machine's wall clock moves nothing.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FakeClock, StoreSyncedClock } from '../src/clock.js';
import type { Logger } from '../src/engine/types.js';
import { MemoryJobStore } from '../src/memory-store.js';
import { engine, waitFor } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('StoreSyncedClock', () => {
  it('reads the store’s time at the sync and moves on with the local clock', async () => {
    const store = new FakeClock(Date.UTC(2026, 0, 1));
    const local = new FakeClock(5_000);
    const clock = new StoreSyncedClock(async () => new Date(store.now()), local);
    await clock.sync();
    expect(clock.now()).toBe(Date.UTC(2026, 0, 1));
    local.advance(1_500);
    expect(clock.now()).toBe(Date.UTC(2026, 0, 1) + 1_500);
  });

  it('the midpoint of the round trip counts as the moment the store was read', async () => {
    const local = new FakeClock(0);
    const clock = new StoreSyncedClock(async () => {
      local.advance(100); // the request's way
      const read = new Date(Date.UTC(2026, 0, 1));
      local.advance(100); // the answer's way
      return read;
    }, local);
    await clock.sync();
    expect(clock.now()).toBe(Date.UTC(2026, 0, 1) + 100);
  });

  it('keeps the read with the shortest round trip: a slow first read does not put it off', async () => {
    const local = new FakeClock(0);
    const store = new FakeClock(Date.UTC(2026, 0, 1));
    let reads = 0;
    const clock = new StoreSyncedClock(async () => {
      reads += 1;
      // The first read waits 40 ms on its way out (a connection, a cold path), then 2 ms back.
      const out = reads === 1 ? 40 : 2;
      local.advance(out);
      store.advance(out);
      const read = new Date(store.now());
      local.advance(2);
      store.advance(2);
      return read;
    }, local);
    await clock.sync();
    expect(reads).toBe(2);
    // Store and local time moved in step: the synced clock reads the store's time exactly.
    expect(clock.now()).toBe(store.now());
  });

  it('a step of the wall clock, back or ahead, changes nothing until the next sync', async () => {
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true, advanceTimeDelta: 20 });
    const storeTime = Date.UTC(2030, 5, 1);
    const started = performance.now();
    // The store's clock moves on in real time, whatever this process's Date says.
    const clock = new StoreSyncedClock(
      async () => new Date(storeTime + (performance.now() - started)),
    );
    await clock.sync();
    for (const step of [-3_600_000, -40_000, 40_000, 3_600_000]) {
      vi.setSystemTime(Date.now() + step);
      const expected = storeTime + (performance.now() - started);
      expect(Math.abs(clock.now() - expected), `after a step of ${step} ms`).toBeLessThan(50);
    }
  });
});

describe('an engine’s clock', () => {
  it('is read from the store again at once when this machine’s wall clock stepped', async () => {
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true, advanceTimeDelta: 20 });
    // A database server's clock: a step of this process's Date does not move it.
    const store = new MemoryJobStore({
      clock: { now: () => performance.timeOrigin + performance.now() },
    });
    let reads = 0;
    const readStore = store.now.bind(store);
    store.now = async () => {
      reads += 1;
      return readStore();
    };
    const infos: string[] = [];
    const logger: Logger = {
      debug() {},
      info: (message) => void infos.push(message),
      warn() {},
      error() {},
    };
    const e = engine({ store, handlers: { t: () => {} }, logger, pollIntervalMs: 50 });
    await e.start();
    const synced = reads;
    vi.setSystemTime(Date.now() - 3_600_000);
    await waitFor(() => reads > synced, 'the store’s clock to be read again');
    expect(infos.filter((m) => m.includes('clock stepped'))).toHaveLength(1);
  });
});
