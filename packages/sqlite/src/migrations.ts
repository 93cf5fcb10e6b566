/** Migration helpers of earlier releases, on `@jobs/core/sql`'s loader and embedded files. */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreError } from '@jobs/core';
import {
  migrate,
  parseMigration,
  SQLITE_MIGRATION_FILES,
  SqliteSyncExecutor,
  sqlEnv,
  sqliteDialect,
} from '@jobs/core/sql';
import type { Database } from 'better-sqlite3';

/** One numbered schema step, `NNNN_name.sql`. */
export interface SqliteMigration {
  version: number;
  name: string;
  /** SQL with `{{prefix}}` placeholders; each statement ends with `;` at the end of a line. */
  sql: string;
}

let folder: string | undefined;

/**
 * @deprecated The migrations are embedded in the build (the package ships no folder): this
 * writes them to a temporary folder, once per process, for tools that read `.sql` files.
 */
export function migrationsDirectory(): string {
  if (folder) return folder;
  const dir = mkdtempSync(join(tmpdir(), 'jobs-sqlite-migrations-'));
  for (const [file, sql] of Object.entries(SQLITE_MIGRATION_FILES)) {
    writeFileSync(join(dir, `${file}.sql`), sql);
  }
  folder = `${dir}/`;
  return folder;
}

/** The numbered migrations in version order: the embedded ones, or the files in `directory`. */
export function loadMigrations(directory?: string): SqliteMigration[] {
  const files = directory === undefined ? SQLITE_MIGRATION_FILES : readFolder(directory);
  const names = Object.keys(files).sort();
  if (names.length === 0) {
    throw new StoreError(`[@jobs/sqlite] migrate: no migrations found in ${directory}`);
  }
  return names.map((file, index) => {
    if (Number(file.slice(0, 4)) !== index + 1) {
      throw new StoreError(
        `[@jobs/sqlite] migrate: migrations must be numbered 0001, 0002, … without gaps; found ${file} at position ${index + 1} in ${directory}`,
      );
    }
    return { version: index + 1, name: file.slice(5), sql: files[file] as string };
  });
}

function readFolder(directory: string): Record<string, string> {
  try {
    const files = readdirSync(directory).filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file));
    return Object.fromEntries(
      files.map((file) => [file.slice(0, -4), readFileSync(join(directory, file), 'utf8')]),
    );
  } catch (error) {
    const message = `[@jobs/sqlite] migrate: cannot read the migrations folder ${directory}`;
    throw new StoreError(message, { cause: error });
  }
}

/**
 * Applies the migrations the database has not seen in ONE `BEGIN IMMEDIATE` transaction (the
 * write lock before the version table is read, so processes migrating at once queue up and each
 * later one finds the work done). Returns the versions this call applied.
 */
export function applyMigrations(
  db: Database,
  prefix: string,
  migrations: readonly SqliteMigration[] = loadMigrations(),
): number[] {
  const dialect = {
    ...sqliteDialect({ tablePrefix: prefix }),
    migrations: migrations.map((m) =>
      parseMigration(`${String(m.version).padStart(4, '0')}_${m.name}`, m.sql, { prefix }),
    ),
  };
  const op = migrate(sqlEnv(dialect, '@jobs/sqlite'));
  return new SqliteSyncExecutor({ connection: () => db }).runSync(op, { transaction: true });
}
