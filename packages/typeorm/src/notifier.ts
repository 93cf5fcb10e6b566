/**
 * PostgreSQL wake-ups: while anyone subscribes, one connection of the DataSource's pool LISTENs
 * (enqueue sends `pg_notify` in its transaction: delivered on commit, never for a rollback). A
 * lost connection is replaced with backoff, and subscribers woken once: notifications sent
 * while nobody listened are lost. (SQLite uses core's `SqliteCommitWatcher`.)
 */
import { StoreSubscribers } from '@jobs/core';
import type { DataSource } from 'typeorm';

export interface Notifier {
  add(listener: () => void): () => void;
  stop(): Promise<void>;
}

type Handler = (message?: { channel?: string }) => void;
interface PgClient {
  query(sql: string): Promise<unknown>;
  on(event: string, handler: Handler): unknown;
  removeListener(event: string, handler: Handler): unknown;
}

export class PostgresNotifier implements Notifier {
  private readonly listeners = new StoreSubscribers();
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Ends the current wait: for the connection to be lost, or before the next attempt. */
  private interrupt = (): void => undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly channel: string,
  ) {}

  add(listener: () => void): () => void {
    const remove = this.listeners.add(listener);
    this.running ??= this.listen();
    return remove;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.interrupt();
    await this.running;
  }

  private wait(until: (done: () => void) => void): Promise<void> {
    return new Promise((resolve) => {
      this.interrupt = resolve;
      until(resolve);
    });
  }

  /** Keeps a connection listening until `stop()`; every one after the first wakes subscribers. */
  private async listen(): Promise<void> {
    for (let first = true, backoffMs = 50; !this.stopped; first = false) {
      const listened = await this.listenOnce(!first).catch(() => false);
      backoffMs = listened ? 50 : Math.min(backoffMs * 2, 2_000);
      if (!this.stopped) await this.wait((done) => setTimeout(done, backoffMs).unref());
    }
  }

  /** LISTENs on one connection until it is lost or `stop()`; says whether it listened. */
  private async listenOnce(wake: boolean): Promise<boolean> {
    const driver = this.dataSource.driver as unknown as {
      obtainMasterConnection(): Promise<[PgClient, (error?: unknown) => void]>;
    };
    const [client, release] = await driver.obtainMasterConnection();
    let listened = false;
    let lost: unknown;
    const handlers: [string, Handler][] = [
      ['notification', (message) => message?.channel === this.channel && this.listeners.wake()],
    ];
    const ended = this.wait((done) => {
      const end: Handler = (error) => {
        lost ??= error ?? new Error('listener connection ended');
        done();
      };
      handlers.push(['error', end], ['end', end]);
    });
    for (const [event, handler] of handlers) client.on(event, handler);
    try {
      await client.query(`LISTEN "${this.channel.replace(/"/g, '""')}"`);
      listened = true;
      if (wake) this.listeners.wake();
      if (!this.stopped) await ended;
      if (lost === undefined) await client.query('UNLISTEN *');
    } catch (error) {
      lost ??= error;
    } finally {
      for (const [event, handler] of handlers) client.removeListener(event, handler);
      release(lost);
    }
    return listened;
  }
}
