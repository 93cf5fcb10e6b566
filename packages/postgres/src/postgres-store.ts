import { assertIdentifier } from '@jobs/core';
import {
  checkStoreOptions,
  NETWORK_TIMEOUT_OPTIONS,
  type NetworkTimeoutOptions,
  NotifyingSqlJobStore,
  postgresDialect,
  type ReconnectingListener,
  resolveConnectionTimeouts,
} from '@jobs/core/sql';
import pg from 'pg';
import { notificationListener } from './listener.js';
import { connectionSettings, PgExecutor } from './pg-executor.js';

const OPTION_KEYS = ['connectionString', 'pool', 'max', 'schema', 'notifyChannel'];

/**
 * The store's options; `connectTimeoutMs`, `queryTimeoutMs` and `keepAliveDelayMs` bound its
 * calls (`NetworkTimeoutOptions`). On your own `pool`, set pg's `connectionTimeoutMillis` too.
 */
export interface PostgresJobStoreOptions extends NetworkTimeoutOptions {
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
export class PostgresJobStore extends NotifyingSqlJobStore {
  /** The validated schema name. */
  readonly schema: string;
  /** The LISTEN/NOTIFY channel. */
  readonly channel: string;
  /** The pool the store queries through. */
  readonly pool: pg.Pool;
  protected readonly notifier: ReconnectingListener<pg.Client>;

  constructor(options: PostgresJobStoreOptions) {
    checkStoreOptions(options, '@jobs/postgres', [...OPTION_KEYS, ...NETWORK_TIMEOUT_OPTIONS], {
      oneOf: ['connectionString', 'pool'],
      positiveIntegers: ['max'],
    });
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
        // Completions beside acquisitions, on another pooled connection (not one fused call).
        concurrentCalls: ((pool as unknown as { options: { max?: number } }).options.max ?? 10) > 1,
      },
      notify: dialect.wakeQuery?.(channel),
    });
    this.schema = schema;
    this.channel = channel;
    this.pool = pool;
    this.notifier = notificationListener(connection, channel, timeouts.queryTimeoutMs);
  }

  /**
   * Resolves when the listening connection is up, so a notification sent after this is heard.
   * Useful in tests and before measuring pickup latency.
   */
  async listening(): Promise<void> {
    await this.notifier.ready();
  }

  /** Backend pid of the listening connection, or null when nobody subscribed. */
  async listenerBackendPid(): Promise<number | null> {
    const client = await this.notifier.ready();
    const result = await client?.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    return result?.rows[0]?.pid ?? null;
  }
}
