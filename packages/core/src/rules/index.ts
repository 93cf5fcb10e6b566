/**
 * The lifecycle's pure rules — no I/O — applied alike everywhere: when a job is due, the job a
 * store writes for a new one, the acquisition order, what a failed attempt (the retry rule) and
 * a lapsed lease do, which ids are job ids. The memory store, the SQL core's JavaScript parts,
 * custom stores, the engine and `@jobs/http` share them (`@jobs/core` exports them).
 */
export * from './due.js';
export * from './failure.js';
export * from './ids.js';
export * from './lease.js';
export * from './new-job.js';
export * from './order.js';
