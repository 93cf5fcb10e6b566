/**
 * Opens the store `--db` names, and an engine without handlers on it (a client: it administers
 * and runs nothing). Store packages are imported on demand, so a PostgreSQL user never loads
 * better-sqlite3's native module and a SQLite user never loads pg.
 */
import { existsSync } from 'node:fs';
import { consoleLogger, JobEngine } from '@jobs/core';
import type { SqlJobStore } from '@jobs/core/sql';
import { CliError, migrateHint } from './errors.js';
import type { Target } from './target.js';

/** How long connecting to a server may take before the command says it cannot reach it. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** Connections per command: bulk actions run a few calls at once, nothing more. */
const POOL_SIZE = 4;

export interface OpenedStore {
  store: SqlJobStore;
  /** Closes the store and whatever the command opened for it. */
  close(): Promise<void>;
}

export interface Session extends OpenedStore {
  target: Target;
  engine: JobEngine;
}

/**
 * The store of `target`, connecting to nothing yet (servers are reached on the first call).
 * @param mode `existing`: a SQLite file must exist (every command but `migrate`); `create`:
 * `migrate` may create it; `offline`: opens no file at all (`migrate --print-sql`).
 */
export async function openStore(
  target: Target,
  mode: 'existing' | 'create' | 'offline',
): Promise<OpenedStore> {
  if (target.kind === 'postgres') {
    const [{ PostgresJobStore }, { default: pg }] = await Promise.all([
      import('@jobs/postgres'),
      import('pg'),
    ]);
    // Our own pool, for its connect timeout: without one, a server that never answers would
    // keep the command waiting for ever.
    const pool = new pg.Pool({
      connectionString: target.url,
      max: POOL_SIZE,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      application_name: 'jobs-cli',
    });
    pool.on('error', () => {}); // an idle connection dying is not the command's failure
    const store = new PostgresJobStore({
      pool,
      ...(target.schema === undefined ? {} : { schema: target.schema }),
    });
    return {
      store,
      close: async () => {
        await store.close();
        await pool.end();
      },
    };
  }
  if (target.kind === 'mysql') {
    const { MysqlJobStore } = await import('@jobs/mysql');
    const store = new MysqlJobStore({
      uri: target.url,
      connectionLimit: POOL_SIZE,
      ...(target.tablePrefix === undefined ? {} : { tablePrefix: target.tablePrefix }),
    });
    return { store, close: () => store.close() };
  }
  if (mode === 'existing' && !existsSync(target.filename)) {
    throw new CliError(
      `no SQLite database at ${target.where}: run \`${migrateHint(target)}\` to create it`,
    );
  }
  const { SqliteJobStore } = await import('@jobs/sqlite');
  const store = new SqliteJobStore({
    filename: mode === 'offline' ? ':memory:' : target.filename,
    ...(target.tablePrefix === undefined ? {} : { tablePrefix: target.tablePrefix }),
  });
  return { store, close: () => store.close() };
}

/** The store of `target` and a client engine on it. */
export async function openSession(target: Target, mode: 'existing' | 'create'): Promise<Session> {
  const opened = await openStore(target, mode);
  // Warnings (a schedule with an unreadable spec…) go to stderr; normal work logs nothing.
  const engine = new JobEngine({ store: opened.store, logger: consoleLogger('warn') });
  return { ...opened, target, engine };
}
