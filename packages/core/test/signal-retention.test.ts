/**
 * Signal retention (`EngineOptions.signalRetention`): an engine's housekeeping deletes signals
 * nobody took once they are older than the retention (on the store's clock), keeps younger ones
 * and a job's record of what it waits for, and refuses a bad retention naming the option. The
 * store side (`StoreWaits.pruneSignals`) is checked on every store by the conformance `waits`
 * group.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock, JobEngine, MemoryJobStore, ValidationError } from '../src/index.js';
import { engine } from './helpers.js';

describe('signal retention', () => {
  it('maintenance deletes signals nobody took past signalRetention, and keeps younger ones', async () => {
    const clock = new FakeClock();
    const store = new MemoryJobStore({ clock });
    await store.waits.signal('approval', 'old', '{"n":1}');
    clock.advance(2 * 3_600_000);
    await store.waits.signal('approval', 'young', '{"n":2}');
    const e = engine({
      store,
      clock,
      signalRetention: 'PT1H',
      handlers: { work: async () => 1 },
    });
    const pruned = new Promise((resolve) => e.on('signals-pruned', resolve));
    await e.start();
    expect(await pruned).toEqual({ count: 1 });
    // The young one is still there: a later prune with no retention left takes only it.
    clock.advance(1);
    expect(await store.waits.pruneSignals(0, 10)).toBe(1);
  });

  it('signalRetention must be an ISO-8601 duration from PT1M to P3650D', () => {
    const store = new MemoryJobStore();
    const make = (signalRetention: string) => () =>
      new JobEngine({ store, signalRetention, handlers: { work: async () => 1 } });
    expect(make('PT30S')).toThrow(ValidationError);
    expect(make('PT30S')).toThrow(/signalRetention/);
    expect(make('a week')).toThrow(/signalRetention/);
    expect(make('P30D')).not.toThrow();
  });
});
