/**
 * Wake-ups for engines on other connections and processes, so they start jobs enqueued
 * elsewhere without waiting for their next poll:
 * - PostgreSQL: one connection from the DataSource's pool LISTENs; enqueue sends `pg_notify`
 *   inside its transaction, so the wake-up is delivered on commit (never for a rollback).
 * - SQLite: `PRAGMA data_version` on the shared connection changes when another connection or
 *   process commits; it is checked every `intervalMs`.
 */
import { StoreSubscribers } from '@jobs/core';
import type { DataSource } from 'typeorm';
import type { SqliteHandle } from './runner.js';

export interface Notifier {
  add(listener: () => void): () => void;
  stop(): Promise<void>;
}

interface PgClient {
  query(sql: string): Promise<unknown>;
  on(event: 'notification', fn: (message: { channel: string }) => void): unknown;
  on(event: 'error' | 'end', fn: (error?: unknown) => void): unknown;
  removeAllListeners(event?: string): unknown;
}

type Release = (error?: unknown) => void;

export class PostgresNotifier implements Notifier {
  private readonly listeners = new StoreSubscribers();
  private connection: { client: PgClient; release: Release } | null = null;
  private connecting: Promise<void> | null = null;
  private retry: NodeJS.Timeout | null = null;
  private backoffMs = 50;
  private stopped = false;

  constructor(
    private readonly dataSource: DataSource,
    /** The channel name (any text; quoted for LISTEN). */
    readonly channel: string,
  ) {}

  add(listener: () => void): () => void {
    const remove = this.listeners.add(listener);
    if (!this.connection && !this.connecting && !this.retry) this.connect();
    return remove;
  }

  private connect(): void {
    this.connecting = this.open()
      .catch(() => this.scheduleRetry())
      .finally(() => {
        this.connecting = null;
      });
  }

  private scheduleRetry(): void {
    if (this.stopped) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      this.connect();
    }, this.backoffMs);
    this.retry.unref();
    this.backoffMs = Math.min(this.backoffMs * 2, 2_000);
  }

  private async open(): Promise<void> {
    if (this.stopped) return;
    const driver = this.dataSource.driver as unknown as {
      obtainMasterConnection(): Promise<[PgClient, Release]>;
    };
    const [client, release] = await driver.obtainMasterConnection();
    let dropped = false;
    const drop = (error?: unknown): void => {
      if (dropped) return;
      dropped = true;
      if (this.connection?.client === client) this.connection = null;
      client.removeAllListeners('notification');
      release(error ?? new Error('listener connection ended'));
      this.scheduleRetry();
    };
    client.on('error', drop);
    client.on('end', drop);
    client.on('notification', (message) => {
      if (message.channel === this.channel) this.listeners.wake();
    });
    try {
      await client.query(`LISTEN "${this.channel.replace(/"/g, '""')}"`);
    } catch (error) {
      drop(error);
      return;
    }
    if (this.stopped) {
      await this.release(client, release);
      return;
    }
    this.connection = { client, release };
    // Notifications sent while no connection listened are lost: wake once to look.
    if (this.backoffMs > 50) this.listeners.wake();
    this.backoffMs = 50;
  }

  private async release(client: PgClient, release: Release): Promise<void> {
    client.removeAllListeners('notification');
    client.removeAllListeners('error');
    client.removeAllListeners('end');
    try {
      await client.query('UNLISTEN *');
      release();
    } catch (error) {
      release(error);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    await this.connecting;
    const connection = this.connection;
    this.connection = null;
    if (connection) await this.release(connection.client, connection.release);
  }
}

export class SqliteNotifier implements Notifier {
  private readonly listeners = new StoreSubscribers();
  private timer: NodeJS.Timeout | null = null;
  private version: number | null = null;

  constructor(
    private readonly handle: () => SqliteHandle,
    private readonly intervalMs: number,
  ) {}

  private read(): number {
    const row = this.handle().prepare('PRAGMA data_version').all()[0] as
      | { data_version?: number }
      | undefined;
    return Number(row?.data_version ?? 0);
  }

  add(listener: () => void): () => void {
    const remove = this.listeners.add(listener);
    if (!this.timer) {
      this.version = this.read();
      this.timer = setInterval(() => {
        let now: number;
        try {
          now = this.read();
        } catch {
          return; // the DataSource is being destroyed; stop() follows
        }
        if (now !== this.version) {
          this.version = now;
          this.listeners.wake();
        }
      }, this.intervalMs);
      this.timer.unref();
    }
    return () => {
      remove();
      if (this.listeners.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    };
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
