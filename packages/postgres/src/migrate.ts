/** The store's numbered schema migrations as SQL, for applying them with your own tool. */
import { assertIdentifier } from '@jobs/core';
import { postgresDialect } from '@jobs/core/sql';

export interface Migration {
  version: number;
  /** `0001_init`, … */
  name: string;
  /** Its statements, each ending with `;`. */
  sql: string;
}

/**
 * The migrations, in version order, for the tables in `schema` — for running them with your
 * own migration tool instead of `store.migrate()` (which also records each version in
 * `<schema>.jobs_migrations`; `store.migrationSql()` prints all of it).
 *
 * @example
 * for (const m of loadMigrations('jobs')) console.log(`-- ${m.name}\n${m.sql}`);
 */
export function loadMigrations(schema: string): Migration[] {
  const valid = assertIdentifier(schema, 'schema', { max: 48 });
  return postgresDialect({ tablePrefix: '', schema: valid }).migrations.map((m) => ({
    version: m.version,
    name: m.name,
    sql: m.statements.map((statement) => `${statement};`).join('\n\n'),
  }));
}
