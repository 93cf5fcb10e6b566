/**
 * The store's listening connection: a `pg.Client` of its own, kept LISTENing by core's
 * `ReconnectingListener` (reconnects with backoff, wakes subscribers after a gap).
 */
import {
  destroySocket,
  endWithin,
  type ListenSession,
  OpenConnections,
  ReconnectingListener,
} from '@jobs/core/sql';
import pg from 'pg';

/** A listener whose connections are opened with `connection` (the store's settings). */
export function notificationListener(
  connection: pg.ClientConfig,
  channel: string,
  queryTimeoutMs: number,
): ReconnectingListener<pg.Client> {
  const open = async (signal: AbortSignal): Promise<ListenSession<pg.Client>> => {
    signal.throwIfAborted();
    const client = new pg.Client(connection);
    const sockets = new OpenConnections<pg.Client>(destroySocket);
    sockets.add(client);
    // `stop()` cuts short a connect under way.
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
    return {
      connection: client,
      destroy: cut,
      // A second to say goodbye, then the socket is destroyed (a silent server never answers).
      close: () => endWithin(() => client.end(), sockets),
    };
  };
  return new ReconnectingListener(open, channel, queryTimeoutMs);
}
