/**
 * `@jobs/core/sql`: the `JobStore` contract implemented once for SQL databases, over a
 * `Dialect` (SQL text, capability flags) and an `Executor` (a driver). A custom SQL store is a
 * dialect and an executor; see `SqlJobStore`.
 */
export * from './change-watcher.js';
export * from './deadline.js';
export * from './dialect.js';
export * from './dialects/mysql.js';
export * from './dialects/postgres.js';
export * from './dialects/sqlite.js';
export { driverCode, driverErrno } from './dialects/support.js';
export * from './executor.js';
export * from './migrate.js';
export * from './operations/context.js';
export * from './rows.js';
export * from './scope-rule.js';
export * from './sql-store.js';
