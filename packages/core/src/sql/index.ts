/**
 * `@jobs/core/sql`: the `JobStore` contract implemented once for SQL databases, over a
 * `Dialect` (SQL text, capability flags) and an `Executor` (a driver). A custom SQL store is a
 * dialect and an executor; see `SqlJobStore`.
 */
export * from './change-watcher.js';
export * from './client-listener.js';
export * from './deadline.js';
export * from './dialect.js';
export * from './dialects/mysql.js';
export * from './dialects/postgres.js';
export * from './dialects/sqlite.js';
export { driverCode, driverErrno } from './dialects/support.js';
export * from './dialects/walk-resume.js';
export * from './executor.js';
export * from './listen-loop.js';
export * from './lock-retries.js';
export * from './migrate.js';
export * from './mysql-server.js';
export * from './network-executor.js';
export * from './notifying-store.js';
export * from './operations/env.js';
export * from './pool-lifecycle.js';
export * from './pool-size.js';
// The building blocks a custom dialect picks for its `ops`.
export * from './portable/enqueue-row-by-row.js';
export * from './portable/keyed-insert.js';
export * from './portable/lock-then-write.js';
export * from './rows.js';
export * from './scope-rule.js';
export * from './sql-store.js';
export * from './sqlite-executor.js';
export * from './store-options.js';
export * from './tables.js';
export * from './wake-waiter.js';
