/**
 * Numbered SQL migrations shipped in `packages/mysql/migrations/NNNN_name.sql`. The files are
 * found next to the package's `src/` and `dist/` alike (both sit one level below the package
 * root), so a built package and in-repo tests read the same files.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { StoreError } from '@jobs/core';

export interface Migration {
  version: number;
  name: string;
  /** Statements with `{{prefix}}` still in them. */
  statements: string[];
}

/** The directory holding the migration files. */
export function migrationsDirectory(): string {
  return fileURLToPath(new URL('../migrations/', import.meta.url));
}

/** Splits a migration file into statements: `--` comment lines dropped, `;` at line end ends one. */
export function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let current: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (/^\s*--/.test(line) || line.trim() === '') continue;
    current.push(line);
    if (/;\s*$/.test(line)) {
      statements.push(current.join('\n').replace(/;\s*$/, ''));
      current = [];
    }
  }
  if (current.length > 0) statements.push(current.join('\n'));
  return statements;
}

/** Reads every `NNNN_name.sql` file in order. */
export function loadMigrations(directory: string = migrationsDirectory()): Migration[] {
  let files: string[];
  try {
    files = readdirSync(directory).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f));
  } catch (error) {
    throw new StoreError(`[@jobs/mysql] migrate: cannot read migrations in ${directory}`, {
      cause: error,
    });
  }
  files.sort();
  if (files.length === 0) {
    throw new StoreError(`[@jobs/mysql] migrate: no migration files in ${directory}`);
  }
  return files.map((file) => ({
    version: Number(file.slice(0, 4)),
    name: file.slice(5, -4),
    statements: splitStatements(readFileSync(`${directory}${file}`, 'utf8')),
  }));
}
