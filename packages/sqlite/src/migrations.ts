import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { StoreError } from '@jobs/core';
import type BetterSqlite3 from 'better-sqlite3';

/** One numbered schema step, read from `migrations/NNNN_name.sql`. */
export interface SqliteMigration {
  version: number;
  name: string;
  /** SQL text with `{{prefix}}` placeholders. */
  sql: string;
}

const FILE_PATTERN = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/**
 * The folder holding the numbered `.sql` files. The sources (`src/migrations.ts`) and the built
 * bundle (`dist/index.js`, `dist/index.cjs`) both sit one level below the package root, and the
 * package ships `migrations/` next to them, so one relative URL serves both. (tsup's `shims`
 * provide `import.meta.url` in the CommonJS build.)
 */
export function migrationsDirectory(): string {
  return fileURLToPath(new URL('../migrations/', import.meta.url));
}

/** Reads the numbered migrations in version order. */
export function loadMigrations(directory: string = migrationsDirectory()): SqliteMigration[] {
  let files: string[];
  try {
    files = readdirSync(directory);
  } catch (error) {
    throw new StoreError(`[@jobs/sqlite] migrate: cannot read the migrations folder ${directory}`, {
      cause: error,
    });
  }
  const migrations: SqliteMigration[] = [];
  for (const file of files.sort()) {
    const match = FILE_PATTERN.exec(file);
    if (!match) continue;
    migrations.push({
      version: Number(match[1]),
      name: match[2]!,
      sql: readFileSync(`${directory}/${file}`, 'utf8'),
    });
  }
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new StoreError(
        `[@jobs/sqlite] migrate: migrations must be numbered 0001, 0002, … without gaps; found ${String(migration.version).padStart(4, '0')} at position ${index + 1} in ${directory}`,
      );
    }
  });
  if (migrations.length === 0) {
    throw new StoreError(`[@jobs/sqlite] migrate: no migrations found in ${directory}`);
  }
  return migrations;
}

/**
 * Applies the migrations the database has not seen, all in ONE `BEGIN IMMEDIATE` transaction:
 * the write lock is taken before the version table is read, so processes migrating at once
 * queue up on the lock (busy timeout) and each later one finds the work done.
 * Returns the versions applied by this call.
 */
export function applyMigrations(
  db: BetterSqlite3.Database,
  prefix: string,
  migrations: readonly SqliteMigration[] = loadMigrations(),
): number[] {
  const table = `${prefix}jobs_migrations`;
  const run = db.transaction((): number[] => {
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${table} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
    );
    const done = new Set(
      db
        .prepare(`SELECT version FROM ${table}`)
        .pluck()
        .all()
        .map((v) => Number(v)),
    );
    const newest = Math.max(0, ...done);
    const known = migrations.length;
    if (newest > known) {
      throw new StoreError(
        `[@jobs/sqlite] migrate: the database is at schema version ${newest}, newer than this package knows (${known}); upgrade @jobs/sqlite`,
      );
    }
    const applied: number[] = [];
    const record = db.prepare(`INSERT INTO ${table} (version, name, applied_at) VALUES (?, ?, ?)`);
    for (const migration of migrations) {
      if (done.has(migration.version)) continue;
      db.exec(migration.sql.replaceAll('{{prefix}}', prefix));
      record.run(migration.version, migration.name, Date.now());
      applied.push(migration.version);
    }
    return applied;
  });
  return run.immediate();
}
