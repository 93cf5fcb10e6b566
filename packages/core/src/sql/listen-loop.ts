/**
 * Wake-ups by LISTEN/NOTIFY (PostgreSQL, through `pg` or a TypeORM DataSource): one connection
 * LISTENs on the store's channel (and any of its own) while anyone subscribes, and every notification wakes the
 * subscribers. A lost connection (server restart, `pg_terminate_backend`, network) is replaced
 * with backoff, and subscribers are woken once then: notifications sent while nobody listened
 * are lost. The LISTEN has a deadline, so on a silent network it fails and is tried again.
 */
import { StoreSubscribers } from '../store-support.js';
import { withDeadline } from './deadline.js';

type Handler = (message?: { channel?: string; payload?: string }) => void;

/**
 * The payload of a test notification (`ReconnectingListener.heard`): counted, but it wakes
 * nobody.
 */
export const PROBE_PAYLOAD = 'jobs:probe';

/** What a connection needs to LISTEN: pg's `Client` has it. */
export interface ListeningConnection {
  query(sql: string): Promise<unknown>;
  on(event: 'notification' | 'error' | 'end', handler: Handler): unknown;
  removeListener(event: 'notification' | 'error' | 'end', handler: Handler): unknown;
}

/** A connection opened for listening, and how to let it go. */
export interface ListenSession<C extends ListeningConnection> {
  connection: C;
  /** Destroys its socket (a LISTEN past its deadline). */
  destroy(): void;
  /** Closes or gives back the connection; `lost` is why it ended, if it was lost. */
  close(lost: unknown): Promise<void>;
}

const FIRST_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 5_000;

export class ReconnectingListener<C extends ListeningConnection> {
  private readonly subscribers = new StoreSubscribers();
  private running: Promise<void> | null = null;
  private stopped = false;
  private current: C | null = null;
  /** Notifications heard on the channel, test ones included. */
  private notifications = 0;
  /** Cuts short a connection being opened when the listener is closed. */
  private readonly stopping = new AbortController();
  /** Ends the current wait: for the connection to be lost, or before the next attempt. */
  private interrupt = (): void => undefined;

  /** The channels listened to: the store's, and any of this listener's own. */
  private readonly channels: readonly string[];

  constructor(
    /** Opens a connection to listen on; `signal` aborts when the listener is closed. */
    private readonly open: (signal: AbortSignal) => Promise<ListenSession<C>>,
    /** The channel, or channels (the store's shared one and a node's own), to LISTEN on. */
    channel: string | readonly string[],
    private readonly queryTimeoutMs: number,
  ) {
    this.channels = typeof channel === 'string' ? [channel] : [...channel];
  }

  /** Adds a subscriber; the first one starts listening, until `close()`. */
  subscribe(listener: () => void): () => void {
    if (this.stopped) throw new Error('the listener is closed');
    const remove = this.subscribers.add(listener);
    this.running ??= this.listen();
    return remove;
  }

  /** Resolves with the listening connection once it is up (null once closed or unused). */
  async ready(): Promise<C | null> {
    while (!this.stopped && this.running && this.current === null) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return this.current;
  }

  /**
   * Notifications heard on the channel so far, test ones (payload `PROBE_PAYLOAD`) included: a
   * store sends one and sees whether this grows.
   */
  get heard(): number {
    return this.notifications;
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    this.interrupt();
    await this.running;
  }

  private wait(until: (done: () => void) => void): Promise<void> {
    return new Promise((resolve) => {
      this.interrupt = resolve;
      until(resolve);
    });
  }

  /** Keeps a connection listening until `close()`; every one after the first wakes subscribers. */
  private async listen(): Promise<void> {
    for (let first = true, backoffMs = FIRST_BACKOFF_MS; !this.stopped; first = false) {
      const listened = await this.listenOnce(!first).catch(() => false);
      backoffMs = listened ? FIRST_BACKOFF_MS : Math.min(backoffMs * 2, MAX_BACKOFF_MS);
      if (!this.stopped) await this.wait((done) => setTimeout(done, backoffMs).unref());
    }
  }

  /** LISTENs on one connection until it is lost or `close()`; says whether it listened. */
  private async listenOnce(wake: boolean): Promise<boolean> {
    const session = await this.open(this.stopping.signal);
    const client = session.connection;
    let listened = false;
    let lost: unknown;
    const handlers: ['notification' | 'error' | 'end', Handler][] = [
      [
        'notification',
        (message) => {
          if (message?.channel === undefined || !this.channels.includes(message.channel)) return;
          this.notifications++;
          if (message.payload !== PROBE_PAYLOAD) this.subscribers.wake();
        },
      ],
    ];
    const ended = this.wait((done) => {
      const end: Handler = (error) => {
        lost ??= error ?? new Error('the listening connection ended');
        done();
      };
      handlers.push(['error', end], ['end', end]);
    });
    for (const [event, handler] of handlers) client.on(event, handler);
    // Closing the listener cuts a LISTEN under way short (the wait ends here, whether or not
    // the driver notices its socket destroyed); a listening connection says goodbye instead.
    let cut = (): void => {};
    const closing = new Promise<never>((_resolve, reject) => {
      cut = () => {
        session.destroy();
        reject(new Error('the listener was closed'));
      };
    });
    closing.catch(() => {});
    try {
      this.stopping.signal.addEventListener('abort', cut);
      if (this.stopped) cut();
      const listen = client.query(
        this.channels.map((channel) => `LISTEN "${channel.replace(/"/g, '""')}";`).join(' '),
      );
      await Promise.race([
        withDeadline(listen, this.queryTimeoutMs, 'queryTimeoutMs', () => session.destroy()),
        closing,
      ]);
      this.stopping.signal.removeEventListener('abort', cut);
      listened = true;
      this.current = client;
      if (wake) this.subscribers.wake();
      if (!this.stopped) await ended;
    } catch (error) {
      lost ??= error;
    } finally {
      this.stopping.signal.removeEventListener('abort', cut);
      this.current = null;
      for (const [event, handler] of handlers) client.removeListener(event, handler);
      await session.close(lost);
    }
    return listened;
  }
}
