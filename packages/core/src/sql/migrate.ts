/**
 * The one migration loader of every SQL store. Each database has numbered `.sql` files
 * (`migrations/<database>/0001_init.sql`, …) embedded in the build, so a bundled app needs no
 * migrations folder at run time. A file is never edited after release: a schema change is a new
 * file. Applied versions are recorded in the version table `<prefix>jobs_migrations`.
 *
 * File format: statements end with `;` at the end of a line (not inside a `$$ … $$` body, such
 * as PostgreSQL's `DO $$ … $$;`); a `CREATE TRIGGER` or `CREATE PROCEDURE` (SQLite's and MySQL's
 * bodies of `;`-ended statements) ends only at a line that is exactly `END;`, unindented — its
 * inner statements and blocks are indented; lines starting with `--` are comments; `{{name}}` is
 * replaced by the dialect's value for `name` (quoted table names, schema, prefix).
 */
import { StoreError } from '../errors.js';
import type { Operation } from './executor.js';
import type { Migration } from './migration.js';
import type { SqlEnv } from './operations/env.js';
import type { SqlRow } from './rows.js';

export type { Migration } from './migration.js';

/** Splits a migration file into statements and fills in `{{name}}` placeholders. */
export function parseMigration(
  file: string,
  text: string,
  vars: Readonly<Record<string, string>>,
): Migration {
  const match = /^(\d{4})_([a-z0-9_]+)$/.exec(file);
  if (!match) throw new StoreError(`migration file name ${file} is not NNNN_name`);
  const filled = text.replace(/\{\{(\w+)\}\}/g, (whole, name: string) => {
    const value = vars[name];
    if (value === undefined)
      throw new StoreError(`migration ${file}: unknown placeholder ${whole}`);
    return value;
  });
  const statements: string[] = [];
  let current: string[] = [];
  let inBody = false;
  for (const line of filled.split('\n')) {
    if (/^\s*--/.test(line)) continue;
    current.push(line);
    if ((line.match(/\$\$/g)?.length ?? 0) % 2 === 1) inBody = !inBody;
    const routine = /^\s*CREATE\s+(TRIGGER|PROCEDURE)\b/i.test(current.join('\n'));
    if (!inBody && (routine ? /^END;\s*$/.test(line) : /;\s*$/.test(line))) {
      const statement = current.join('\n').trim().replace(/;\s*$/, '');
      if (statement) statements.push(statement);
      current = [];
    }
  }
  const rest = current.join('\n').trim();
  if (rest) statements.push(rest);
  return { version: Number(match[1]), name: file, statements };
}

/** Builds the migrations of a database from its embedded files (`{ '0001_init': text }`). */
export function loadMigrations(
  files: Readonly<Record<string, string>>,
  vars: Readonly<Record<string, string>>,
): Migration[] {
  return Object.keys(files)
    .sort()
    .map((file) => parseMigration(file, files[file] as string, vars));
}

/**
 * Brings the schema to the newest version; returns the versions this call applied. The caller
 * holds the dialect's migration lock (`Dialect.migrateLock`).
 */
export function* migrate(c: SqlEnv): Operation<number[]> {
  const d = c.d;
  for (const sql of d.setup) yield { sql, params: [] };
  if (d.beforeMigrate) yield* d.beforeMigrate();
  yield { sql: d.versionTable, params: [] };
  const done = new Set(
    (yield { sql: d.sql(`SELECT "version" FROM ${d.table('migrations')}`), params: [] }).rows.map(
      (row) => Number(row.version),
    ),
  );
  const newest = Math.max(0, ...done);
  const known = Math.max(0, ...d.migrations.map((m) => m.version));
  if (newest > known) {
    throw new StoreError(
      `[${c.label}] migrate: the database is at schema version ${newest}, newer than this package knows (${known}); upgrade ${c.label}`,
    );
  }
  const applied: number[] = [];
  for (const migration of d.migrations) {
    if (done.has(migration.version)) continue;
    for (const sql of migration.statements) yield { sql, params: [] };
    yield d.recordVersion(migration);
    applied.push(migration.version);
  }
  return applied;
}

/** The statements `migrate` would run on an empty database, for DBAs who apply them by hand. */
export function migrationSql(c: SqlEnv): string {
  const d = c.d;
  const parts = [...d.setup, d.versionTable];
  for (const migration of d.migrations) {
    const record = d.recordVersion(migration);
    let n = 0;
    // Literal values: a version number and a name of [a-z0-9_].
    const values = record.params.map((p) => (typeof p === 'number' ? String(p) : `'${String(p)}'`));
    parts.push(
      `-- ${migration.name}`,
      ...migration.statements,
      d.placeholders(record.sql).replace(/\$\d+|\?/g, () => values[n++] ?? 'NULL'),
    );
  }
  return `${parts.map((sql) => (sql.startsWith('--') ? sql : `${sql};`)).join('\n\n')}\n`;
}

/**
 * True for a driver's "no such table" error: PostgreSQL 42P01 (or 3F000, no such schema), MySQL
 * and MariaDB 1146, SQLite's message. A database never migrated answers so; a timeout or a
 * refused connection does not.
 */
export function isMissingTableError(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false;
  const { code, errno, message } = error as { code?: unknown; errno?: unknown; message?: unknown };
  return (
    code === '42P01' ||
    code === '3F000' ||
    code === 'ER_NO_SUCH_TABLE' ||
    errno === 1146 ||
    (typeof message === 'string' && /no such table/i.test(message))
  );
}

/**
 * The schema's version (the newest applied migration), or null when the version table does not
 * exist; see `JobStore.verifySchema`. Any other error (the database unreachable, a timeout) is
 * thrown as it came.
 */
export function* schemaVersion(c: SqlEnv): Operation<number | null> {
  const d = c.d;
  let rows: SqlRow[];
  try {
    rows = (yield {
      sql: d.sql(`SELECT MAX("version") AS "version" FROM ${d.table('migrations')}`),
      params: [],
    }).rows;
  } catch (error) {
    if (isMissingTableError(error)) return null;
    throw error;
  }
  const version = rows[0]?.version;
  return version === null || version === undefined ? null : Number(version);
}
