/**
 * One dedicated connection that LISTENs on the store's channel and calls subscribers on every
 * notification. If the connection drops (server restart, `pg_terminate_backend`, network), it
 * reconnects with backoff and then wakes subscribers once, since notifications sent while it was
 * away are lost.
 */
import { StoreSubscribers } from '@jobs/core';
import { withDeadline } from '@jobs/core/sql';
import pg from 'pg';
import { destroyConnection } from './pg-executor.js';

/** How long `stop()` lets the connection say goodbye before it destroys the socket. */
const STOP_GRACE_MS = 1_000;

export class NotificationListener {
  private client: pg.Client | null = null;
  /** A subscriber's error, or the connection's, is recovered from (by reconnecting): dropped. */
  private readonly subscribers = new StoreSubscribers();
  private stopped = true;
  private closed = false;
  private connecting: Promise<void> | null = null;
  /** The connection being opened (connect, then LISTEN), for `stop()` to cut short. */
  private opening: pg.Client | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private backoffMs = 50;

  constructor(
    private readonly connection: pg.ClientConfig,
    private readonly channel: string,
    /** Deadline of the LISTEN statement: on a silent network it fails and is tried again. */
    private readonly queryTimeoutMs: number,
  ) {}

  /**
   * Adds a subscriber; the first one opens the connection, which then stays open until `stop()`
   * (the store's `close()`), so subscribers coming and going never race a closing connection.
   */
  add(listener: () => void): () => void {
    if (this.closed) throw new Error('listener is stopped');
    const unsubscribe = this.subscribers.add(listener);
    if (this.stopped) {
      this.stopped = false;
      this.connect();
    }
    return unsubscribe;
  }

  /** Resolves once the listening connection is up (for tests and orderly startup). */
  async ready(): Promise<void> {
    while (!this.stopped && this.client === null) {
      await (this.connecting ?? new Promise((resolve) => setTimeout(resolve, 10)));
    }
  }

  /** The backend pid of the listening connection (tests terminate it to prove reconnects). */
  async backendPid(): Promise<number | null> {
    await this.ready();
    const client = this.client;
    if (!client) return null;
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    return rows[0]?.pid ?? null;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.opening) destroyConnection(this.opening);
    await this.connecting?.catch(() => {});
    const client = this.client;
    this.client = null;
    if (client) await endWithin(client, STOP_GRACE_MS);
  }

  private connect(): void {
    this.connecting = this.open().finally(() => {
      this.connecting = null;
    });
  }

  private async open(): Promise<void> {
    const client = new pg.Client(this.connection);
    let dropped = false;
    const onDrop = (): void => {
      if (dropped) return;
      dropped = true;
      if (this.client === client) this.client = null;
      client.end().catch(() => {});
      if (this.stopped) return;
      this.scheduleReconnect();
    };
    client.on('error', onDrop);
    client.on('end', () => onDrop());
    client.on('notification', () => {
      if (this.client === client) this.subscribers.wake();
    });
    this.opening = client;
    try {
      await client.connect();
      await withDeadline(
        client.query(`LISTEN "${this.channel}"`),
        this.queryTimeoutMs,
        'queryTimeoutMs',
        () => destroyConnection(client),
      );
    } catch {
      onDrop();
      return;
    } finally {
      this.opening = null;
    }
    if (this.stopped) {
      dropped = true;
      await endWithin(client, STOP_GRACE_MS);
      return;
    }
    const wasReconnect = this.backoffMs > 50;
    this.backoffMs = 50;
    this.client = client;
    // Anything enqueued while we were not listening went unheard: let subscribers look.
    if (wasReconnect) this.subscribers.wake();
  }

  private scheduleReconnect(): void {
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, 5_000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (!this.stopped) this.connect();
    }, delay);
    this.retryTimer.unref?.();
  }
}

/** Ends `client`, destroying its socket when the server does not answer within `graceMs`. */
async function endWithin(client: pg.Client, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = client.end().catch(() => {});
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      destroyConnection(client);
      resolve();
    }, graceMs);
  });
  await Promise.race([ended, late]);
  clearTimeout(timer);
}
