/**
 * The operator's API: look at jobs, retry dead ones, suspend and activate, count.
 *
 * @example
 * const dead = await engine.admin.listJobs({ state: 'deadletter' });
 * for (const job of dead) await engine.admin.retry(job.id);
 */
import { InvalidStateError, NotFoundError, ValidationError } from '../errors.js';
import { DEFAULT_RETRIES } from '../retry.js';
import { JOB_STATES, type Job, type JobFilter, type JobState, type JobStore } from '../store.js';
import { assertInteger, assertKnownKeys, assertText } from './validate.js';

export interface ListJobsOptions extends JobFilter {
  /** Page size, default 50, at most 1000. */
  limit?: number;
  /** Jobs to skip, default 0. */
  offset?: number;
}

export interface JobStats {
  total: number;
  byState: Record<JobState, number>;
  byType: Record<string, Record<JobState, number>>;
}

const FILTER_KEYS = new Set(['state', 'type', 'scope', 'tenantId', 'queue', 'schedule']);
const LIST_KEYS = new Set([...FILTER_KEYS, 'limit', 'offset']);

function emptyCounts(): Record<JobState, number> {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
}

function checkFilter(filter: JobFilter, keys: ReadonlySet<string>, where: string): JobFilter {
  if (filter === null || typeof filter !== 'object') {
    throw new ValidationError(where, 'must be an object');
  }
  assertKnownKeys(filter, keys, where);
  const states =
    filter.state === undefined ? [] : Array.isArray(filter.state) ? filter.state : [filter.state];
  for (const state of states) {
    if (!JOB_STATES.includes(state as JobState)) {
      throw new ValidationError(
        `${where}.state`,
        `unknown state ${JSON.stringify(state)} (expected ${JOB_STATES.join(', ')})`,
      );
    }
  }
  for (const key of ['type', 'scope', 'tenantId', 'queue', 'schedule'] as const) {
    if (filter[key] !== undefined) assertText(filter[key], `${where}.${key}`);
  }
  return filter;
}

export class JobAdmin {
  constructor(
    private readonly store: JobStore,
    private readonly onChange: () => void,
  ) {}

  /** Jobs matching the filter, oldest first, paged with `limit` / `offset`. */
  async listJobs(options: ListJobsOptions = {}): Promise<Job[]> {
    checkFilter(options, LIST_KEYS, 'listJobs');
    const { limit = 50, offset = 0, ...filter } = options;
    return this.store.listJobs({
      ...filter,
      limit: assertInteger(limit, 'listJobs.limit', 1, 1000),
      offset: assertInteger(offset, 'listJobs.offset', 0, Number.MAX_SAFE_INTEGER),
    });
  }

  /** One job, or null when it does not exist (finished jobs are deleted). */
  async getJob(id: string): Promise<Job | null> {
    return this.store.getJob(assertText(id, 'id'));
  }

  /**
   * Moves a dead-letter job back to `async` with fresh retries (default 3), so it runs again.
   * Throws `NotFoundError` if the job does not exist and `InvalidStateError` if it is not dead.
   */
  async retry(id: string, options: { retries?: number } = {}): Promise<Job> {
    assertKnownKeys(options, new Set(['retries']), 'retry');
    const retries = assertInteger(options.retries ?? DEFAULT_RETRIES, 'retries', 0, 1000);
    const job = await this.store.retryDeadletter(assertText(id, 'id'), retries);
    if (job) {
      this.onChange();
      return job;
    }
    const existing = await this.store.getJob(id);
    if (!existing) throw new NotFoundError(`job ${id} does not exist`);
    throw new InvalidStateError(
      `job ${id} is ${existing.state}; only deadletter jobs can be retried`,
    );
  }

  /** Deletes a job in any state. A running job's holder finds its lease lost. */
  async deleteJob(id: string): Promise<boolean> {
    return this.store.deleteJob(assertText(id, 'id'));
  }

  /** Parks waiting jobs matching the filter (by scope, type, tenant…). Returns how many. */
  async suspend(filter: JobFilter): Promise<number> {
    const checked = checkFilter(filter, FILTER_KEYS, 'suspend');
    if (Object.keys(checked).length === 0) {
      throw new ValidationError(
        'suspend',
        'give at least one of scope, type, tenantId, queue, schedule',
      );
    }
    return this.store.suspend(checked);
  }

  /** Returns suspended jobs matching the filter to where they were. Returns how many. */
  async activate(filter: JobFilter): Promise<number> {
    const checked = checkFilter(filter, FILTER_KEYS, 'activate');
    const count = await this.store.activate(checked);
    if (count > 0) this.onChange();
    return count;
  }

  /** Counts of jobs by state and by type. */
  async stats(): Promise<JobStats> {
    const rows = await this.store.stats();
    const stats: JobStats = { total: 0, byState: emptyCounts(), byType: {} };
    for (const row of rows) {
      stats.total += row.count;
      stats.byState[row.state] += row.count;
      const perType = stats.byType[row.type] ?? emptyCounts();
      perType[row.state] += row.count;
      stats.byType[row.type] = perType;
    }
    return stats;
  }
}
