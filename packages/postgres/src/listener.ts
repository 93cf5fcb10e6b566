/**
 * The store's listening connection: a `pg.Client` of its own, kept LISTENing by core's
 * `ReconnectingListener` (reconnects with backoff, wakes subscribers after a gap).
 */
import { ownConnectionListener, type ReconnectingListener } from '@jobs/core/sql';
import pg from 'pg';

/**
 * A listener whose connections are opened with `connection` (the store's settings), LISTENing
 * on `channels`; each connection opens with the `application_name` that `applicationName` gives
 * then (see `postgres-store.ts`).
 */
export function notificationListener(
  connection: pg.ClientConfig,
  channels: string | readonly string[],
  queryTimeoutMs: number,
  applicationName?: () => string,
): ReconnectingListener<pg.Client> {
  const newClient = () =>
    new pg.Client(
      applicationName ? { ...connection, application_name: applicationName() } : connection,
    );
  return ownConnectionListener(newClient, channels, queryTimeoutMs);
}
