export {
  applyMigrations,
  loadMigrations,
  migrationsDirectory,
  type SqliteMigration,
} from './migrations.js';
export type { SqliteStoreCounters } from './sqlite-executor.js';
export { type SqliteDatabase, SqliteJobStore, type SqliteJobStoreOptions } from './sqlite-store.js';
