/**
 * The lifecycle's pure rules — no I/O — that every store applies alike: when a job is due, the
 * acquisition order, what a failed attempt and a lapsed lease do, which ids are job ids. The memory store, the SQL
 * core's JavaScript parts and custom stores share them (`@jobs/core` exports them).
 */
export * from './due.js';
export * from './failure.js';
export * from './ids.js';
export * from './lease.js';
export * from './order.js';
