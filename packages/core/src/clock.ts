/**
 * Clocks. Stores compare due times and leases on their own clock; the engine needs a clock for
 * what it computes itself (schedule fire times, timeouts), kept in step with the store's.
 */
export interface Clock {
  /** Current time in ms since the epoch. */
  now(): number;
}

/** The machine's clock. */
export const systemClock: Clock = { now: () => Date.now() };

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
 * The local clock corrected by the offset to the store's clock, measured with `sync()` (the
 * midpoint of a `store.now()` round trip, like NTP's simplest form).
 */
export class StoreSyncedClock implements Clock {
  private offsetMs = 0;

  constructor(
    private readonly readStoreTime: () => Promise<Date>,
    private readonly local: Clock = systemClock,
  ) {}

  now(): number {
    return this.local.now() + this.offsetMs;
  }

  /** The last measured offset: store time minus local time, in ms. */
  get offset(): number {
    return this.offsetMs;
  }

  async sync(): Promise<void> {
    const before = this.local.now();
    const storeTime = (await this.readStoreTime()).getTime();
    const after = this.local.now();
    this.offsetMs = storeTime - (before + after) / 2;
  }
}
