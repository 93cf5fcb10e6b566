/**
 * The store's listening connection: a `pg.Client` of its own, kept LISTENing by core's
 * `ReconnectingListener` (reconnects with backoff, wakes subscribers after a gap).
 */
import { ownConnectionListener, type ReconnectingListener } from '@jobs/core/sql';
import pg from 'pg';

/** A listener whose connections are opened with `connection` (the store's settings). */
export function notificationListener(
  connection: pg.ClientConfig,
  channel: string,
  queryTimeoutMs: number,
): ReconnectingListener<pg.Client> {
  return ownConnectionListener(() => new pg.Client(connection), channel, queryTimeoutMs);
}
