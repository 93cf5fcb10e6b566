export type {
  FollowupRow,
  HistoryRow,
  JobRow,
  RateLimitRow,
  ScheduleRow,
} from '@jobs/core/sql';
export { jobsEntities } from './entities.js';
export { jobsMigration } from './migration.js';
export { TypeormJobStore, type TypeormJobStoreOptions, type TypeormJobsDriver } from './store.js';
