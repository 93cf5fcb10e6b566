import {
  assertIdentifier,
  assertKnownOptions,
  assertPositiveInteger,
  StoreError,
  ValidationError,
} from '@jobs/core';
import { postgresDialect, resolveConnectionTimeouts, SqlJobStore } from '@jobs/core/sql';
import pg from 'pg';
import { NotificationListener } from './listener.js';
import { connectionSettings, PgExecutor } from './pg-executor.js';

const OPTION_KEYS = [
  'connectionString',
  'pool',
  'max',
  'schema',
  'notifyChannel',
  'connectTimeoutMs',
  'queryTimeoutMs',
  'keepAliveDelayMs',
];

export interface PostgresJobStoreOptions {
  /** A `postgres://` URL; the store opens (and closes) its own pool. */
  connectionString?: string;
  /** Your pool; the store uses it and leaves closing it to you. */
  pool?: pg.Pool;
  /** Pool size when the store opens its own pool. Default 10. */
  max?: number;
  /** Schema holding the tables. Default `jobs`. */
  schema?: string;
  /** LISTEN/NOTIFY channel. Default `<schema>_jobs`. */
  notifyChannel?: string;
  /**
   * Opening a connection, or waiting for a free one in the pool, fails after this. Default
   * 10 000. On your own `pool` set pg's `connectionTimeoutMillis` too: the store gives up
   * waiting, your pool decides when to give up connecting.
   */
  connectTimeoutMs?: number;
  /**
   * Deadline of each statement, kept by the client (a silent network never answers the
   * server's): past it the call fails and its connection is destroyed. The store's own
   * connections also get it as `statement_timeout` and `idle_in_transaction_session_timeout`,
   * so the server lets go of the locks of a client that went away. `migrate()` is not bounded.
   * Default 30 000.
   */
  queryTimeoutMs?: number;
  /** Idle time before TCP keepalive probes on the store's own connections. Default 10 000. */
  keepAliveDelayMs?: number;
}

/**
 * A `JobStore` on PostgreSQL (10+) through `pg`: batch acquisition with `FOR UPDATE SKIP LOCKED`,
 * fencing tokens, leases on the database clock, wake-ups by LISTEN/NOTIFY sent inside the
 * enqueuing transaction, and enqueue inside your own transaction. The SQL is
 * `@jobs/core/sql`'s PostgreSQL dialect; this package adds the pools, prepared statements and
 * the listening connection. Tables: `<schema>.jobs`, `<schema>.schedules`,
 * `<schema>.jobs_migrations`.
 *
 * @example
 * import { JobEngine } from '@jobs/core';
 * import { PostgresJobStore } from '@jobs/postgres';
 *
 * const store = new PostgresJobStore({ connectionString: process.env.DATABASE_URL });
 * await store.migrate();
 * const engine = new JobEngine({ store, handlers: { email: async (job) => send(job.payload) } });
 * await engine.start();
 *
 * // enqueue inside your transaction: the job exists only if you commit
 * const client = await pool.connect();
 * await client.query('BEGIN');
 * await client.query('INSERT INTO orders ...');
 * await engine.enqueue('email', { order: 1 }, { tx: client });
 * await client.query('COMMIT');
 */
export class PostgresJobStore extends SqlJobStore {
  /** The validated schema name. */
  readonly schema: string;
  /** The LISTEN/NOTIFY channel. */
  readonly channel: string;
  /** The pool the store queries through. */
  readonly pool: pg.Pool;
  private readonly listener: NotificationListener;

  constructor(options: PostgresJobStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ValidationError(
        'options',
        '[@jobs/postgres] give { connectionString } or { pool }',
      );
    }
    assertKnownOptions(options, OPTION_KEYS, '@jobs/postgres');
    if (!options.pool === !options.connectionString) {
      throw new ValidationError(
        'connectionString',
        '[@jobs/postgres] give a connectionString or a pool (one of them)',
      );
    }
    if (options.max !== undefined) assertPositiveInteger(options.max, 'max', '@jobs/postgres');
    const timeouts = resolveConnectionTimeouts(options, '@jobs/postgres');
    const settings = connectionSettings(timeouts);
    const schema = assertIdentifier(options.schema ?? 'jobs', 'schema', { max: 48 });
    const channel = assertIdentifier(options.notifyChannel ?? `${schema}_jobs`, 'notifyChannel', {
      max: 63,
    });
    const pool =
      options.pool ??
      new pg.Pool({
        connectionString: options.connectionString,
        max: options.max ?? 10,
        ...settings,
      });
    // A pool emits 'error' when an idle client dies (server restart); without a listener that
    // would crash the process. The next query simply gets a fresh connection.
    if (!options.pool) pool.on('error', () => {});
    // The pool's own settings (pg keeps them as `options`), with the store's timeouts, open
    // the extra connections (heartbeat, LISTEN): they are the store's even on your pool.
    const connection = {
      ...(pool as unknown as { options: pg.ClientConfig }).options,
      ...settings,
    };
    const dialect = postgresDialect({ tablePrefix: '', schema });
    super({
      label: '@jobs/postgres',
      name: 'postgres',
      dialect,
      executor: new PgExecutor(pool, connection, !options.pool, dialect, timeouts),
      capabilities: {
        notifications: true,
        skipLocked: true,
        transactionalEnqueue: true,
        multiProcess: true,
      },
      notify: { sql: "SELECT pg_notify(?, '')", params: [channel] },
    });
    this.schema = schema;
    this.channel = channel;
    this.pool = pool;
    this.listener = new NotificationListener(connection, channel, timeouts.queryTimeoutMs);
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    // Side by side: each gives a silent server about a second before it destroys sockets.
    await Promise.all([this.listener.stop(), super.close()]);
  }

  subscribe(listener: () => void): () => void {
    if (this.closed) throw new StoreError('[@jobs/postgres] subscribe: the store is closed');
    return this.listener.add(listener);
  }

  /**
   * Resolves when the listening connection is up, so a notification sent after this is heard.
   * Useful in tests and before measuring pickup latency.
   */
  async listening(): Promise<void> {
    await this.listener.ready();
  }

  /** Backend pid of the listening connection, or null when nobody subscribed. */
  listenerBackendPid(): Promise<number | null> {
    return this.listener.backendPid();
  }
}
