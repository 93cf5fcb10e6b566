/**
 * Fitting a network store's pool to the engines on it (`JobStore.reserveConnections`). A store
 * is built before it knows any engine's concurrency; each engine reserves what it may use at
 * once when it starts and gives it back when it stops. A pool the store opened at its default
 * size follows the reservations; a size the caller chose, or the caller's own pool, is kept,
 * and the engine warns when it is too small.
 */
import type { ConnectionReservation } from '../store.js';

/** The pool size a network store opens with until an engine reserves more. */
export const DEFAULT_POOL_SIZE = 10;

export interface PoolSizingOptions {
  /** The pool's size now; null when it cannot be read (a pool cluster, a DataSource not up). */
  size(): number | null;
  /** Sets the pool's size. Absent when the size is the caller's: given, or their own pool. */
  resize?: (size: number) => void;
  /** Connections the store itself takes from the pool at once (a wake-signal watcher). */
  own: number;
  /** What sets the size, for messages (`max`, `connectionLimit`, …). */
  sizeOption: string;
}

/**
 * The reservations held on one store's pool.
 *
 * @example
 * const sizing = new PoolSizing({ size: () => pool.options.max, resize: (n) => { pool.options.max = n; }, own: 0, sizeOption: '`max`' });
 * const reservation = sizing.reserve(26); // an engine of concurrency 20
 */
export class PoolSizing {
  private readonly held = new Set<{ connections: number }>();

  constructor(private readonly options: PoolSizingOptions) {}

  /** Connections needed at once: every reservation held, plus the store's own. */
  get needed(): number {
    let sum = this.options.own;
    for (const reservation of this.held) sum += reservation.connections;
    return sum;
  }

  reserve(connections: number): ConnectionReservation {
    const entry = { connections };
    this.held.add(entry);
    this.fit();
    return {
      poolSize: this.options.size(),
      needed: this.needed,
      sizeOption: this.options.sizeOption,
      release: () => {
        if (this.held.delete(entry)) this.fit();
      },
    };
  }

  /** A default pool: never below the default, else as big as the reservations need. */
  private fit(): void {
    this.options.resize?.(Math.max(DEFAULT_POOL_SIZE, this.needed));
  }
}
