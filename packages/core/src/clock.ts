/**
 * Clocks. Stores compare due times and leases on their own clock; the engine needs a clock for
 * what it computes itself (schedule fire times, timeouts), kept in step with the store's.
 */
import { performance } from 'node:perf_hooks';
export interface Clock {
  /** Current time in ms since the epoch. */
  now(): number;
}

/** This process's monotonic clock, in ms: wall-clock steps never move a lease deadline. */
export function monotonicNow(): number {
  return performance.now();
}

/** The machine's clock. */
export const systemClock: Clock = { now: () => Date.now() };

/**
 * A clock that only moves forward, at a steady rate (`performance.now()`: ms since this
 * process started, not since the epoch). Only differences of its readings mean anything; a
 * step of the machine's wall clock does not move it.
 */
export const monotonicClock: Clock = { now: () => performance.now() };

/**
 * A clock for tests: time moves only when told to.
 *
 * @example
 * const clock = new FakeClock(new Date('2026-01-01T00:00:00Z'));
 * clock.advance(60_000);
 */
export class FakeClock implements Clock {
  private current: number;

  constructor(start: Date | number = Date.UTC(2026, 0, 1)) {
    this.current = typeof start === 'number' ? start : start.getTime();
  }

  now(): number {
    return this.current;
  }

  /** Moves time forward by `ms`. */
  advance(ms: number): void {
    if (ms < 0) throw new RangeError('FakeClock cannot go back in time');
    this.current += ms;
  }

  /** Sets the time. */
  set(time: Date | number): void {
    this.current = typeof time === 'number' ? time : time.getTime();
  }
}

/**
 * The store's clock, read locally: the store's time at the last `sync()` (the midpoint of a
 * `store.now()` round trip, like NTP's simplest form) plus the time elapsed since on a
 * monotonic clock (`performance.now()`). A step of this machine's wall clock (NTP, an operator,
 * a resumed VM) moves nothing here; only the next `sync()` reads the store again.
 */
export class StoreSyncedClock implements Clock {
  /** Store time at the last sync, and the `local` reading at the same moment. */
  private storeAt: number;
  private localAt: number;

  /**
   * @param readStoreTime reads the store's clock (`() => store.now()`).
   * @param local the clock elapsed time is measured on; only its differences count. Default:
   *   `performance.now()`, which a step of the machine's wall clock does not move.
   */
  constructor(
    private readonly readStoreTime: () => Promise<Date>,
    private readonly local: Clock = monotonicClock,
  ) {
    // Until the first sync, the machine's clock is the best guess of the store's.
    this.storeAt = Date.now();
    this.localAt = this.local.now();
  }

  now(): number {
    return this.storeAt + (this.local.now() - this.localAt);
  }

  /** How far the store's clock is ahead of this machine's wall clock now, in ms. */
  get offset(): number {
    return this.now() - Date.now();
  }

  /**
   * Reads the store's clock `samples` times and keeps the reading with the shortest round trip
   * (the latest of equals): the first read after start-up often waits for a connection, a
   * statement's preparation or a cold code path on one of its two ways, which would put this
   * clock several ms off; a second read on the warm path does not.
   */
  async sync(samples = 2): Promise<void> {
    let best: { storeAt: number; localAt: number; roundTrip: number } | null = null;
    for (let n = 0; n < Math.max(1, samples); n++) {
      const before = this.local.now();
      const storeTime = (await this.readStoreTime()).getTime();
      const after = this.local.now();
      const roundTrip = after - before;
      if (!best || roundTrip <= best.roundTrip) {
        best = { storeAt: storeTime, localAt: (before + after) / 2, roundTrip };
      }
    }
    if (!best) return;
    this.storeAt = best.storeAt;
    this.localAt = best.localAt;
  }
}
