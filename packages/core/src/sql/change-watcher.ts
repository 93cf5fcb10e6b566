/**
 * Wake-ups for databases without notifications: a cheap value that changes when other
 * connections make jobs acquirable, read every few milliseconds while someone listens; a
 * change wakes the subscribers (an engine then acquires). SQLite reads `PRAGMA data_version`
 * (shared memory, no I/O); MySQL reads `Dialect.wakeSignal` (the end of the primary key). The
 * read is one cheap statement, not an acquisition: an idle engine costs the database one such
 * read per interval per store, and acquires only when something changed.
 */
import { StoreSubscribers } from '../rules.js';
import type { Operation, Query } from './executor.js';

export class ChangeWatcher<V> {
  private readonly subscribers = new StoreSubscribers();
  private timer: NodeJS.Timeout | null = null;
  /** The value last read; undefined until the first read after `subscribe`. */
  private last: V | undefined = undefined;
  private reading = false;
  private readCount = 0;
  /** A `checkSoon` is under way. */
  private soon = false;

  /**
   * `read` returns the current value (sync or async), or null once its source is gone (the
   * watcher then stops). A failed read is skipped: the engine's fallback poll and its own
   * error reporting cover an unreachable database. While `busy()` says the subscribers are
   * looking for jobs anyway (an acquisition ran within the interval), reads are skipped; the
   * next read compares with the last value read, so nothing added meanwhile is missed.
   */
  constructor(
    private readonly read: () => V | null | Promise<V | null>,
    private readonly intervalMs: number,
    private readonly busy: () => boolean = () => false,
  ) {}

  /** Reads done so far (for benches: the cost of an idle engine). */
  get reads(): number {
    return this.readCount;
  }

  subscribe(listener: () => void): () => void {
    const remove = this.subscribers.add(listener);
    if (!this.timer) {
      this.last = undefined;
      this.check();
      this.timer = setInterval(() => {
        this.tick();
        this.check();
      }, this.intervalMs);
      this.timer.unref();
      this.started();
    }
    return () => {
      remove();
      if (this.subscribers.size === 0) this.stop();
    };
  }

  /** Wakes this process's own subscribers after its own commit, on the next turn. */
  wakeSoon(): void {
    this.subscribers.wakeSoon();
  }

  /** Stops reading and drops every subscriber (the store is closing). */
  close(): void {
    this.stop(true);
  }

  /** Stops reading; with `clear`, also drops every subscriber (the store is closing). */
  stop(clear = false): void {
    if (this.timer) {
      clearInterval(this.timer);
      this.stopped();
    }
    this.timer = null;
    if (clear) this.subscribers.clear();
  }

  /** The first subscriber came: reading every interval starts (a subclass adds triggers). */
  protected started(): void {}

  /** Reading stopped (no subscriber left, or closed). */
  protected stopped(): void {}

  /** Every interval, before the read. */
  protected tick(): void {}

  /**
   * An early trigger (e.g. the file changed): reads on the next turn, and once more
   * `againMs` later, in case the change was not visible yet; calls meanwhile add nothing.
   */
  protected checkSoon(againMs = 1): void {
    if (this.soon || !this.timer) return;
    this.soon = true;
    setImmediate(() => {
      if (this.timer) this.check();
      setTimeout(() => {
        this.soon = false;
        if (this.timer) this.check();
      }, againMs).unref();
    });
  }

  private check(): void {
    // One read at a time: a slow database is not sent a queue of them.
    if (this.reading || (this.last !== undefined && this.busy())) return;
    this.readCount += 1;
    let value: V | null | Promise<V | null>;
    try {
      value = this.read();
    } catch {
      return; // the connection is closing; stop() follows
    }
    if (!(value instanceof Promise)) {
      this.seen(value);
      return;
    }
    this.reading = true;
    value.then(
      (v) => {
        this.reading = false;
        if (this.timer) this.seen(v);
      },
      () => {
        this.reading = false;
      },
    );
  }

  private seen(value: V | null): void {
    if (value === null) {
      this.stop();
      return;
    }
    const first = this.last === undefined;
    if (!first && value === this.last) return;
    this.last = value;
    if (!first) this.subscribers.wake();
  }
}

/**
 * Wake-ups from a dialect's `wakeSignal` (MySQL: the end of the jobs' primary key), read by
 * `read` every `intervalMs` while anyone listens — except within an interval after this
 * process started an acquisition (`acquiring()`): its engines are looking for jobs anyway.
 */
export class WakeSignalWatcher extends ChangeWatcher<string> {
  private readonly acquired: { at: number };

  /** `read` runs `readWakeSignal` through the store, or returns null once it is closed. */
  constructor(read: () => Promise<string> | null, intervalMs: number) {
    const acquired = { at: Number.NEGATIVE_INFINITY };
    // Monotonic: a step of the wall clock back must not silence the watcher for as long.
    super(read, intervalMs, () => performance.now() - acquired.at < intervalMs);
    this.acquired = acquired;
  }

  /** This process started an acquisition. */
  acquiring(): void {
    this.acquired.at = performance.now();
  }
}

/** Reads a dialect's `wakeSignal`, as text. */
export function* readWakeSignal(signal: Query): Operation<string> {
  return String((yield signal).rows[0]?.v ?? '');
}
