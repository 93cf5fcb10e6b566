export { type JobRow, jobsEntities, type ScheduleRow } from './entities.js';
export { jobsMigration } from './migration.js';
export { TypeormJobStore, type TypeormJobStoreOptions, type TypeormJobsDriver } from './store.js';
