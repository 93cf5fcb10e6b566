/**
 * Schedules: cron and ISO-8601 repeating triggers whose occurrences each fire exactly once
 * across all nodes. (`parseDuration` / `parseRepeat` are exported from `./iso8601.js`.)
 */
export {
  MAX_CATCH_UP,
  MAX_SCHEDULE_NAME_LENGTH,
  MAX_SHARDS,
  type NormalizedScheduleOptions,
  type ScheduleOptions,
  type ScheduleOverlap,
  validateScheduleName,
  validateScheduleOptions,
  validateTimezone,
} from './options.js';
export {
  occurrenceKey,
  type ScheduleInfo,
  ScheduleRunner,
  type ScheduleRunnerOptions,
} from './runner.js';
export { createTrigger, latestOccurrences, type Trigger } from './trigger.js';
