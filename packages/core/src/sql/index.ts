/**
 * `@jobs/core/sql`: the `JobStore` contract implemented once for SQL databases, over a
 * `Dialect` (SQL text, capability flags) and an `Executor` (a driver). A custom SQL store is a
 * dialect and an executor; see `SqlJobStore`.
 */
export * from './change-watcher.js';
export * from './client-listener.js';
export * from './dialect.js';
export * from './dialects/mysql.js';
export * from './dialects/postgres.js';
export * from './dialects/sqlite.js';
export { driverCode, driverErrno } from './dialects/support.js';
export * from './executor.js';
export * from './lock-retries.js';
export * from './migrate.js';
export * from './mysql-server.js';
export * from './operations/env.js';
// The building blocks a custom dialect picks for its `ops`.
export { insertKeyed, KEYED_INSERT_TRIES, KeyChangingHandsError } from './operations/jobs.js';
export * from './pool-size.js';
export * from './portable/enqueue-row-by-row.js';
export * from './portable/lock-then-write.js';
// Explicit: the history rows in rows.ts are the SQL core's own.
export {
  assertIdentifier,
  dueTime,
  INSERT_JOB_COLUMNS,
  insertedJob,
  isLimited,
  JOB_COLUMN_NAMES,
  type JobRowLayout,
  jobRowAt,
  jobRowLayout,
  LEASE_EXPIRED_MESSAGE,
  LEASE_KNOWN_COLUMNS,
  LEASED_COLUMN_NAMES,
  newJobValues,
  readBool,
  readLogs,
  readOptionalTime,
  readScopeLimit,
  readTime,
  recoverResult,
  rowToJob,
  rowToSchedule,
  type ScopeLimitColumns,
  type SqlRow,
  type SqlValue,
  storedScopeLimit,
} from './rows.js';
export * from './scope-rule.js';
export * from './sql-store.js';
export * from './sqlite-executor.js';
export * from './store-options.js';
export * from './tables.js';
export * from './wake-waiter.js';
