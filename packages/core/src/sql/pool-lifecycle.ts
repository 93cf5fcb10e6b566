/**
 * Closing a network store's connections in bounded time. A driver's goodbye (pg's `end()`,
 * mysql2's QUIT) waits for the server to answer, which never happens on a silent network and
 * would keep the process alive: past a grace the sockets still open are destroyed.
 */

/** How long a store's `close()` lets its connections say goodbye. */
export const CLOSE_GRACE_MS = 1_000;

/**
 * A driver connection's socket: pg's `Client` and mysql2's promise connection hold it at
 * `connection.stream`, mysql2's core connection at `stream`.
 */
export interface SocketHolder {
  stream?: { destroy(): void } | undefined;
  connection?: { stream?: { destroy(): void } | undefined } | undefined;
}

/** Destroys a driver connection's socket at once, without a goodbye: what waits on it fails. */
export function destroySocket(holder: SocketHolder): void {
  (holder.connection?.stream ?? holder.stream)?.destroy();
}

/**
 * A promise made on first use and shared by every caller — made again after it failed (a
 * server that was away is asked again): a DataSource's start, a server check, a pool.
 */
export class SharedUntilFailure<T> {
  private pending: Promise<T> | null = null;

  constructor(private readonly make: () => Promise<T>) {}

  get(): Promise<T> {
    if (!this.pending) {
      const pending = this.make();
      this.pending = pending;
      pending.catch(() => {
        if (this.pending === pending) this.pending = null;
      });
    }
    return this.pending;
  }

  /** The promise made, if any, forgotten (for closing what it made). */
  take(): Promise<T> | null {
    const pending = this.pending;
    this.pending = null;
    return pending;
  }
}

/**
 * The open connections of a pool, for destroying those that linger after its goodbye. A
 * store adds each connection its pool opens and deletes each one it closes.
 */
export class OpenConnections<C> extends Set<C> {
  constructor(private readonly destroyConnection: (connection: C) => void) {
    super();
  }

  /** Destroys every connection still open. */
  destroyAll(): void {
    for (const connection of this) this.destroyConnection(connection);
    this.clear();
  }
}

/**
 * Runs `end` (a pool's or a connection's goodbye) for at most `graceMs`, then destroys what
 * `open` still holds — at once when `end` failed or ran late, to be sure when it finished.
 *
 * @example
 * await endWithin(() => pool.end(), open);
 */
export async function endWithin<C>(
  end: () => Promise<unknown>,
  open: OpenConnections<C>,
  graceMs = CLOSE_GRACE_MS,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, graceMs);
  });
  // Errors of the goodbye (a connect that timed out meanwhile) do not matter: every socket is
  // gone after.
  await Promise.race([end().catch(() => {}), late]);
  clearTimeout(timer);
  open.destroyAll();
}

/**
 * A pool the store opens on first use and ends within the grace on `close()` — the
 * one-connection pool lease renewals run on, so a heartbeat never queues behind a busy pool.
 */
export class LazyPool<P extends { end(): Promise<unknown> }, C> {
  private opened: { pool: P; open: OpenConnections<C> } | null = null;

  /** `track` follows the connections the pool opens (see `OpenConnections`). */
  constructor(
    private readonly create: () => P,
    private readonly track: (pool: P) => OpenConnections<C>,
  ) {}

  get(): P {
    if (!this.opened) {
      const pool = this.create();
      this.opened = { pool, open: this.track(pool) };
    }
    return this.opened.pool;
  }

  async close(): Promise<void> {
    const opened = this.opened;
    this.opened = null;
    if (opened) await endWithin(() => opened.pool.end(), opened.open);
  }
}
