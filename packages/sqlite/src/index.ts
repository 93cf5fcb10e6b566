export type { SqliteStoreCounters } from '@jobs/core/sql';
export {
  applyMigrations,
  loadMigrations,
  migrationsDirectory,
  type SqliteMigration,
} from './migrations.js';
export { type SqliteDatabase, SqliteJobStore, type SqliteJobStoreOptions } from './sqlite-store.js';
