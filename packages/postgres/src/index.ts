/**
 * `@jobs/postgres`: a PostgreSQL store for @jobs on `pg`.
 *
 * @example
 * import { PostgresJobStore } from '@jobs/postgres';
 * const store = new PostgresJobStore({ connectionString: 'postgres://localhost/app' });
 * await store.migrate();
 */

export { loadMigrations, type Migration } from './migrate.js';
export type { Pooler } from './postgres-store.js';
export {
  PostgresJobStore,
  type PostgresJobStoreOptions,
  type WakeUps,
} from './postgres-store.js';
