/**
 * PostgreSQL wake-ups: while anyone subscribes, one connection of the DataSource's pool
 * LISTENs (enqueue sends `pg_notify` in its transaction: delivered on commit, never for a
 * rollback), kept by core's `ReconnectingListener`. It goes back to the pool after UNLISTEN.
 */
import {
  CLOSE_GRACE_MS,
  destroySocket,
  type ListeningConnection,
  ReconnectingListener,
  type SocketHolder,
  withDeadline,
} from '@jobs/core/sql';
import type { DataSource } from 'typeorm';

type PgClient = ListeningConnection & SocketHolder;

export function postgresListener(
  dataSource: DataSource,
  channel: string,
  queryTimeoutMs: number,
): ReconnectingListener<PgClient> {
  const driver = dataSource.driver as unknown as {
    obtainMasterConnection(): Promise<[PgClient, (error?: unknown) => void]>;
  };
  return new ReconnectingListener(
    async () => {
      const [client, release] = await driver.obtainMasterConnection();
      const destroy = (): void => destroySocket(client);
      return {
        connection: client,
        destroy,
        close: async (lost) => {
          // A connection still good goes back to the pool listening to nothing; a lost one (or
          // one that does not answer the goodbye in time) is dropped.
          let error = lost;
          if (error === undefined) {
            const unlisten = client.query('UNLISTEN *');
            error = await withDeadline(unlisten, CLOSE_GRACE_MS, 'CLOSE_GRACE_MS', destroy).then(
              () => undefined,
              (failed: unknown) => failed,
            );
          }
          release(error);
        },
      };
    },
    channel,
    queryTimeoutMs,
  );
}
