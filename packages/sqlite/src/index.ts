export {
  applyMigrations,
  loadMigrations,
  migrationsDirectory,
  type SqliteMigration,
} from './migrations.js';
export {
  type SqliteDatabase,
  SqliteJobStore,
  type SqliteJobStoreOptions,
  type SqliteStoreCounters,
} from './sqlite-store.js';
