/**
 * Numbered SQL migrations (`migrations/0001_init.sql`, …) shipped with the package, applied in
 * one transaction under an advisory lock, recorded in `<schema>.migrations`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { StoreError } from '@jobs/core';
import type { Pool } from 'pg';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/**
 * The migrations folder sits next to `src/` and `dist/` alike (`<package>/migrations`), so the
 * same relative path works from the sources (tests) and the build.
 */
function migrationsDir(): string {
  return fileURLToPath(new URL('../migrations/', import.meta.url));
}

/**
 * Reads the migrations, in version order, with `{{schema}}` replaced by the quoted schema — for
 * running them with your own migration tool instead of `store.migrate()`.
 *
 * @example
 * for (const m of loadMigrations('jobs')) console.log(`-- ${m.name}\n${m.sql}`);
 */
export function loadMigrations(schema: string): Migration[] {
  const dir = migrationsDir();
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f));
  } catch (error) {
    throw new StoreError(`[@jobs/postgres] migrate: cannot read migrations from ${dir}`, {
      cause: error,
    });
  }
  return files.sort().map((file) => ({
    version: Number(file.slice(0, 4)),
    name: file.replace(/\.sql$/, ''),
    sql: readFileSync(`${dir}${file}`, 'utf8').replaceAll('{{schema}}', `"${schema}"`),
  }));
}

/**
 * Brings `schema` up to the newest migration. Several processes may call this at once: the
 * transaction-scoped advisory lock makes them take turns, and the later ones find nothing to do.
 */
export async function migrateSchema(pool: Pool, schema: string): Promise<void> {
  const migrations = loadMigrations(schema);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1), 0)', [
        `@jobs/postgres:${schema}`,
      ]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS "${schema}".migrations (
           version integer PRIMARY KEY,
           name text NOT NULL,
           applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const { rows } = await client.query<{ version: number }>(
        `SELECT version FROM "${schema}".migrations`,
      );
      const applied = new Set(rows.map((r) => r.version));
      for (const migration of migrations) {
        if (applied.has(migration.version)) continue;
        await client.query(migration.sql);
        await client.query(`INSERT INTO "${schema}".migrations (version, name) VALUES ($1, $2)`, [
          migration.version,
          migration.name,
        ]);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {
        // The original error is what matters; the connection is discarded below.
      });
      throw error;
    }
  } catch (error) {
    client.release(true);
    throw new StoreError(
      `[@jobs/postgres] migrate: schema "${schema}": ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  client.release();
}
