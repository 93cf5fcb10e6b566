export { MysqlJobStore, type MysqlJobStoreOptions } from './mysql-store.js';
export type { MysqlRetryEvent, MysqlRetryStats } from './retry.js';
export {
  assertSupportedServer,
  parseServerVersion,
  type ServerVersion,
  supportsSkipLocked,
} from './server-version.js';
