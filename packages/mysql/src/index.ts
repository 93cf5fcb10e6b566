export {
  assertSupportedServer,
  type LockRetryEvent as MysqlRetryEvent,
  type LockRetryStats as MysqlRetryStats,
  parseServerVersion,
  type ServerVersion,
  supportsExactNames,
  supportsSkipLocked,
} from '@jobs/core/sql';
export { MysqlJobStore, type MysqlJobStoreOptions } from './mysql-store.js';
