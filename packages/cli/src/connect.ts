/**
 * Opens the store `--db` names, and an engine without handlers on it (a client: it administers
 * and runs nothing). Store packages are optional peer dependencies, imported on demand: an app
 * installs the one it uses (a PostgreSQL user never installs better-sqlite3's native module), and
 * a missing one is named in the error.
 */
import { existsSync } from 'node:fs';
import { consoleLogger, JobEngine } from '@jobs/core';
import type { SqlJobStore } from '@jobs/core/sql';
import { CLI_NAME } from './cli-name.js';
import { CliError } from './errors.js';
import { migrateHint } from './explain.js';
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
    const { PostgresJobStore } = await importStore('@jobs/postgres', target);
    const url = new URL(target.url);
    // Names the command's sessions in pg_stat_activity.
    if (!url.searchParams.has('application_name')) {
      url.searchParams.set('application_name', CLI_NAME);
    }
    // The connect timeout: without one, a server that never answers would keep the command
    // waiting for ever.
    const store = new PostgresJobStore({
      connectionString: url.toString(),
      max: POOL_SIZE,
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      ...(target.schema === undefined ? {} : { schema: target.schema }),
    });
    return { store, close: () => store.close() };
  }
  if (target.kind === 'mysql') {
    const { MysqlJobStore } = await importStore('@jobs/mysql', target);
    const store = new MysqlJobStore({
      uri: target.url,
      connectionLimit: POOL_SIZE,
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      ...(target.tablePrefix === undefined ? {} : { tablePrefix: target.tablePrefix }),
    });
    return { store, close: () => store.close() };
  }
  const { SqliteJobStore } = await importStore('@jobs/sqlite', target);
  if (mode === 'existing' && !existsSync(target.filename)) {
    throw new CliError(
      `no SQLite database at ${target.where}: run \`${migrateHint(target)}\` to create it`,
    );
  }
  const store = new SqliteJobStore({
    filename: mode === 'offline' ? ':memory:' : target.filename,
    ...(target.tablePrefix === undefined ? {} : { tablePrefix: target.tablePrefix }),
  });
  return { store, close: () => store.close() };
}

const STORE_PACKAGES = {
  '@jobs/postgres': () => import('@jobs/postgres'),
  '@jobs/mysql': () => import('@jobs/mysql'),
  '@jobs/sqlite': () => import('@jobs/sqlite'),
};

/**
 * The store package `name`, which the CLI declares as an optional peer dependency: the app
 * installs the one it uses. Missing, the command says which package to install.
 */
async function importStore<K extends keyof typeof STORE_PACKAGES>(
  name: K,
  target: Target,
): Promise<Awaited<ReturnType<(typeof STORE_PACKAGES)[K]>>> {
  try {
    return (await STORE_PACKAGES[name]()) as Awaited<ReturnType<(typeof STORE_PACKAGES)[K]>>;
  } catch (error) {
    const { code, message } = error as { code?: unknown; message?: unknown };
    // Only the store package itself missing; one of its own imports failing is its error.
    const missing =
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
      typeof message === 'string' &&
      new RegExp(`['"]${name}['"]`).test(message);
    if (!missing) throw error;
    throw new CliError(
      `${target.display} needs ${name}, which is not installed: install it beside @jobs/cli (npm install ${name}, or pnpm add ${name})`,
    );
  }
}

/** The store of `target` and a client engine on it. */
export async function openSession(target: Target, mode: 'existing' | 'create'): Promise<Session> {
  const opened = await openStore(target, mode);
  // Warnings (a schedule with an unreadable spec…) go to stderr; normal work logs nothing.
  const engine = new JobEngine({ store: opened.store, logger: consoleLogger('warn') });
  return { ...opened, target, engine };
}
