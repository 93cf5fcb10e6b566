/**
 * A LISTEN connection of the store's own, outside any pool (`@jobs/postgres`; `@jobs/typeorm`
 * on PostgreSQL), for core's `ReconnectingListener`: opened with `newClient`, cut short when the
 * listener closes, and given `CLOSE_GRACE_MS` to say goodbye before its socket is destroyed (a
 * silent server never answers).
 */
import {
  destroySocket,
  endWithin,
  type ListeningConnection,
  type ListenSession,
  OpenConnections,
  ReconnectingListener,
  type SocketHolder,
} from './executor.js';

/** What such a connection needs: pg's `Client` has it. */
export interface ListenClient extends ListeningConnection, SocketHolder {
  connect(): Promise<unknown>;
  end(): Promise<unknown>;
}

/**
 * A listener on connections `newClient` makes, one at a time.
 *
 * @example
 * const listener = ownConnectionListener(() => new pg.Client(settings), 'jobs_jobs', 30_000);
 */
export function ownConnectionListener<C extends ListenClient>(
  newClient: () => C,
  channel: string | readonly string[],
  queryTimeoutMs: number,
): ReconnectingListener<C> {
  const open = async (signal: AbortSignal): Promise<ListenSession<C>> => {
    signal.throwIfAborted();
    const client = newClient();
    const sockets = new OpenConnections<C>(destroySocket);
    sockets.add(client);
    // Closing the listener cuts short a connect under way.
    const cut = (): void => sockets.destroyAll();
    signal.addEventListener('abort', cut);
    // Errors also come as the 'error' event the listener handles: never unhandled.
    client.on('error', () => {});
    try {
      await client.connect();
    } catch (error) {
      cut();
      throw error;
    } finally {
      signal.removeEventListener('abort', cut);
    }
    // A second to say goodbye, then the socket is destroyed.
    const close = () => endWithin(() => client.end(), sockets);
    return { connection: client, destroy: cut, close };
  };
  return new ReconnectingListener(open, channel, queryTimeoutMs);
}
