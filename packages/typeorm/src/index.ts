export type { HistoryRow, JobRow, RateLimitRow, ScheduleRow } from './entities.js';
export { jobsEntities } from './entities.js';
export { jobsMigration } from './migration.js';
export { TypeormJobStore, type TypeormJobStoreOptions, type TypeormJobsDriver } from './store.js';
