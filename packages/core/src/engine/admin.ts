/**
 * The operator's API: look at jobs, retry dead ones, suspend and activate, count.
 *
 * @example
 * const dead = await engine.admin.listJobs({ state: 'deadletter' });
 * for (const job of dead) await engine.admin.retry(job.id);
 */

import type { Clock } from '../clock.js';
import { InvalidStateError, NotFoundError, ValidationError } from '../errors.js';
import { DEFAULT_RETRIES } from '../retry.js';
import { historyCursor, readHistoryCursor } from '../rules.js';
import {
  type CancelOutcome,
  canCancel,
  HISTORY_OUTCOMES,
  type HistoryOutcome,
  JOB_STATES,
  type Job,
  type JobFilter,
  type JobHistoryRecord,
  type JobState,
  type JobStore,
  type OverdueType,
  type QueueStatsRow,
  type ScheduleRecord,
} from '../store.js';
import { FLOW_TYPE } from './flow-model.js';
import { type FlowView, readFlow } from './flow-view.js';
import { cancelTree } from './settlement.js';
import {
  assertDate,
  assertInteger,
  assertKnownKeys,
  assertText,
  checkFilter,
  EARLIEST_DUE,
  FILTER_KEYS,
  HISTORY_KEYS,
  LATEST_DUE,
  LIST_KEYS,
} from './validate.js';

export interface ListJobsOptions extends JobFilter {
  /** Page size, default 50, at most 1000. */
  limit?: number;
  /** Jobs to skip, default 0. */
  offset?: number;
  /**
   * Keyset paging: only jobs after this id, in id order. A store without keyset paging ignores
   * it (its first job is then not after `afterId`): read by `offset` instead.
   */
  afterId?: string | null;
}

/** `listJobs` takes a filter's keys, `key`, and its paging. */
const LIST_JOBS_KEYS = new Set([...LIST_KEYS, 'key', 'afterId']);

export interface JobStats {
  total: number;
  byState: Record<JobState, number>;
  byType: Record<string, Record<JobState, number>>;
  /**
   * Types of jobs due for over a minute that this engine has no handler for, oldest first: if
   * no other engine runs them, they wait for ever. Empty when the store cannot tell.
   */
  unhandled: OverdueType[];
}

export interface ListHistoryOptions {
  type?: string;
  outcome?: HistoryOutcome;
  /** Finished at or after this time. */
  since?: Date;
  /** Finished before this time. */
  until?: Date;
  /** Page size, default 50, at most 1000. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string | null;
}

export interface HistoryPage {
  /** Newest first (by finish time, then id). */
  records: JobHistoryRecord[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** A bulk action's filter: the jobs to act on, and `dryRun` to only count them. */
export interface BulkOptions extends Omit<JobFilter, 'state'> {
  /** Count what would be touched, change nothing. */
  dryRun?: boolean;
}

/** Jobs per store call of a bulk action: each call is one short transaction. */
export const BULK_BATCH = 500;

/** How long a due job may wait before `unhandled` names its type. */
export const UNHANDLED_AFTER_MS = 30_000;

function emptyCounts(): Record<JobState, number> {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
}

/**
 * The admin API over a store. An engine builds one (`engine.admin`); a tool that administers a
 * store without running jobs builds its own: `new JobAdmin(store)` (as `@jobs/dashboard` does).
 */
export class JobAdmin {
  constructor(
    private readonly store: JobStore,
    /** Called after a change that makes jobs due (retry, activate): an engine polls at once. */
    private readonly onChange: () => void = () => {},
    /** The job types this engine has handlers for, and its clock (synced with the store). */
    private readonly engine: { types: readonly string[]; clock: Clock } | null = null,
  ) {}

  /**
   * The store can cancel jobs (it has the `cancellation` ability): `cancel` works, and
   * `deleteJob` of a running job gives it a cancel request instead of deleting it under its worker.
   */
  get canCancel(): boolean {
    return canCancel(this.store);
  }

  /** Jobs matching the filter, oldest first, paged with `limit` / `offset` (or `afterId`). */
  async listJobs(options: ListJobsOptions = {}): Promise<Job[]> {
    checkFilter(options, LIST_JOBS_KEYS, 'listJobs');
    const { limit = 50, offset = 0, afterId, key, ...filter } = options;
    return this.store.listJobs({
      ...filter,
      ...(key === undefined ? {} : { key: assertText(key, 'listJobs.key') }),
      ...(afterId === undefined || afterId === null
        ? {}
        : { afterId: assertText(afterId, 'listJobs.afterId') }),
      limit: assertInteger(limit, 'listJobs.limit', 1, 1000),
      offset: assertInteger(offset, 'listJobs.offset', 0, Number.MAX_SAFE_INTEGER),
    });
  }

  /**
   * One job: the live job, else its history record (`state: 'finished'`, with `outcome`,
   * `result`, `finishedAt`, `durationMs`), else null.
   */
  async getJob(id: string): Promise<Job | JobHistoryRecord | null> {
    const live = await this.store.getJob(assertText(id, 'id'));
    if (live || !this.store.history) return live;
    return this.store.history.get(id);
  }

  /**
   * Finished jobs kept by history, newest first, a page at a time (keyset paging: stable
   * while jobs finish). Empty when the store keeps no history.
   *
   * @example
   * let page = await engine.admin.listHistory({ outcome: 'deadletter', limit: 100 });
   * while (page.nextCursor) page = await engine.admin.listHistory({ cursor: page.nextCursor });
   */
  async listHistory(options: ListHistoryOptions = {}): Promise<HistoryPage> {
    if (options === null || typeof options !== 'object') {
      throw new ValidationError('listHistory', 'must be an object');
    }
    assertKnownKeys(options, HISTORY_KEYS, 'listHistory');
    const limit = assertInteger(options.limit ?? 50, 'listHistory.limit', 1, 1000);
    if (options.type !== undefined) assertText(options.type, 'listHistory.type');
    if (options.outcome !== undefined && !HISTORY_OUTCOMES.includes(options.outcome)) {
      throw new ValidationError(
        'listHistory.outcome',
        `unknown outcome ${JSON.stringify(options.outcome)} (expected ${HISTORY_OUTCOMES.join(', ')})`,
      );
    }
    const after =
      options.cursor === undefined || options.cursor === null
        ? null
        : readHistoryCursor(options.cursor, 'listHistory.cursor');
    if (!this.store.history) return { records: [], nextCursor: null };
    const records = await this.store.history.list({
      ...(options.type === undefined ? {} : { type: options.type }),
      ...(options.outcome === undefined ? {} : { outcome: options.outcome }),
      ...(options.since === undefined
        ? {}
        : { since: storedTimeBound(assertDate(options.since, 'listHistory.since')) }),
      ...(options.until === undefined
        ? {}
        : { until: storedTimeBound(assertDate(options.until, 'listHistory.until')) }),
      limit,
      after,
    });
    const last = records[records.length - 1];
    return { records, nextCursor: records.length === limit && last ? historyCursor(last) : null };
  }

  /**
   * Retries every dead-letter job matching the filter (fresh `retries`, default 3), in batches
   * of 500; returns how many. With `dryRun`, only counts them.
   *
   * @example
   * await engine.admin.retryMany({ type: 'send-email', dryRun: true }); // 42
   */
  async retryMany(options: BulkOptions & { retries?: number } = {}): Promise<number> {
    const { dryRun = false, retries: given, ...rest } = options;
    const filter = checkFilter(rest, FILTER_KEYS, 'retryMany');
    if ('state' in filter)
      throw new ValidationError('retryMany.state', 'retryMany acts on deadletter jobs only');
    const retries = assertInteger(given ?? DEFAULT_RETRIES, 'retryMany.retries', 0, 1000);
    const dead: JobFilter = { ...filter, state: 'deadletter' };
    if (dryRun) return this.count(dead);
    const bulk = this.store.bulk;
    const total = await this.inBatches(
      bulk
        ? () => bulk.retryDeadletterMany(filter, retries, BULK_BATCH)
        : () => this.oneByOne(dead, (id) => this.store.retryDeadletter(id, retries)),
    );
    if (total > 0) this.onChange();
    return total;
  }

  /**
   * Deletes every job matching the filter (at least one of state, type, scope, tenantId,
   * queue, schedule), in batches of 500, as `deleteJob` does: dead-letter jobs go to history
   * while it keeps them. Returns how many; with `dryRun`, only counts them.
   */
  async deleteMany(options: BulkOptions & { state?: JobFilter['state'] }): Promise<number> {
    const { dryRun = false, ...rest } = options ?? {};
    const filter = checkFilter(rest, FILTER_KEYS, 'deleteMany');
    if (Object.keys(filter).length === 0) {
      throw new ValidationError(
        'deleteMany',
        'give at least one of state, type, scope, tenantId, queue, schedule',
      );
    }
    if (dryRun) return this.count(filter);
    const bulk = this.store.bulk;
    return this.inBatches(
      bulk
        ? () => bulk.deleteMany(filter, BULK_BATCH)
        : () => this.oneByOne(filter, (id) => this.store.deleteJob(id)),
    );
  }

  private async count(filter: JobFilter): Promise<number> {
    if (this.store.bulk) return this.store.bulk.countJobs(filter);
    let count = 0;
    for (let offset = 0; ; offset += 1000) {
      const page = await this.store.listJobs({ ...filter, limit: 1000, offset });
      count += page.length;
      if (page.length < 1000) return count;
    }
  }

  /** Runs `batch` until it does fewer than `BULK_BATCH`; returns the total. */
  private async inBatches(batch: () => Promise<number>): Promise<number> {
    let total = 0;
    for (;;) {
      const done = await batch();
      total += done;
      if (done < BULK_BATCH) return total;
    }
  }

  /** For a store without bulk calls: one batch of ids read by `listJobs`, acted on one by one. */
  private async oneByOne(
    filter: JobFilter,
    act: (id: string) => Promise<unknown>,
  ): Promise<number> {
    const page = await this.store.listJobs({ ...filter, limit: BULK_BATCH, offset: 0 });
    let done = 0;
    for (const job of page) if (await act(job.id)) done += 1;
    // Jobs it could not act on stay in the list: stop rather than read them again.
    return done < page.length ? Math.min(done, BULK_BATCH - 1) : done;
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

  /**
   * Cancels job `id` (invariant 20): a job that is not running (waiting, suspended, dead) is
   * removed at once, `'cancelled'`; a running one is flagged, `'requested'`: its owner learns it
   * from its next lease renewal (within `leaseMs / 3`, on every store), aborts `ctx.signal`
   * with a `CancelledError`, and the job ends `cancelled` — unless its completion committed
   * first. `'finished'`: the job already ended (history has it). Throws `NotFoundError` for
   * an unknown id, and a `JobsError` (`STORE`) when the store cannot cancel. A workflow's
   * unfinished child jobs (`ctx.run`) are cancelled with it (and theirs); a cancelled child's
   * parent gets a `ChildJobError` from its `ctx.run`.
   *
   * @example
   * const outcome = await engine.admin.cancel(job.id); // 'cancelled' | 'requested' | 'finished'
   */
  async cancel(id: string): Promise<Exclude<CancelOutcome, 'not-found'>> {
    assertText(id, 'id');
    const outcome = await cancelTree(this.store, id, true);
    if (outcome === 'not-found') {
      throw new NotFoundError(`job ${id} does not exist (and no history record says it finished)`);
    }
    return outcome;
  }

  /**
   * A flow (`engine.flow`, `engine.batch`) with its status and nodes — each node's job id once
   * started, its state or outcome, a completed node's result, a skipped node's reason — from
   * the flow job, live or in history; null when there is no flow of that id. One read per node
   * still running, by id.
   */
  async getFlow(id: string): Promise<FlowView | null> {
    return readFlow(this.store, assertText(id, 'id'));
  }

  /**
   * Cancels a flow: its flow job and its unfinished nodes (as `cancel` does); nodes not started
   * yet never start. Throws `NotFoundError` when there is no flow of that id.
   */
  async cancelFlow(id: string): Promise<Exclude<CancelOutcome, 'not-found'>> {
    const job = await this.store.getJob(assertText(id, 'id'));
    const record = job ?? (await this.store.history?.get(id)) ?? null;
    if (record === null || record.type !== FLOW_TYPE) {
      throw new NotFoundError(`flow ${id} does not exist (and no history record says it finished)`);
    }
    return this.cancel(id);
  }

  /**
   * Deletes a job; false when it did not exist. A running job is not deleted under its worker:
   * it gets a cancel request (see `cancel`), and true is returned; a store that cannot cancel
   * (`canCancel` false) refuses it with an error.
   */
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

  /** The store keeps history (it has `history`); without it `listHistory` is always empty. */
  get keepsHistory(): boolean {
    return this.store.history !== undefined;
  }

  /**
   * How many jobs match the filter, counting at most `cap` when given (a larger count may be
   * any number from `cap` up); null when the store cannot count (it has no `bulk`).
   */
  async countJobs(filter: JobFilter = {}, cap?: number): Promise<number | null> {
    const bulk = this.store.bulk;
    if (!bulk) return null;
    const checked = checkFilter(filter, FILTER_KEYS, 'countJobs');
    if (cap === undefined) return bulk.countJobs(checked);
    return bulk.countJobs(checked, assertInteger(cap, 'countJobs.cap', 1, Number.MAX_SAFE_INTEGER));
  }

  /** The database's estimate of how many live jobs there are, without counting; null when none. */
  async estimateJobs(): Promise<number | null> {
    return this.store.views ? this.store.views.estimateJobs() : null;
  }

  /**
   * Live jobs grouped by queue, type and state, with due counts (`newest`: group only the newest
   * that many jobs); null when the store cannot group by queue (it has no `views`).
   */
  async queueStats(options: { newest?: number } = {}): Promise<QueueStatsRow[] | null> {
    const views = this.store.views;
    if (!views) return null;
    if (options.newest === undefined) return views.queueStats();
    const newest = assertInteger(options.newest, 'queueStats.newest', 1, Number.MAX_SAFE_INTEGER);
    return views.queueStats({ newest });
  }

  /** The stored schedules, as the store keeps them (next fire time, paused), in no set order. */
  async scheduleRecords(): Promise<ScheduleRecord[]> {
    return this.store.listSchedules();
  }

  /** Pauses (or, with `paused: false`, resumes) schedule `name`; null when there is none. */
  async setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.store.setSchedulePaused(assertText(name, 'name'), paused);
  }

  /** Counts of jobs by state and by type. */
  async stats(): Promise<JobStats> {
    const rows = await this.store.stats();
    const stats: JobStats = { total: 0, byState: emptyCounts(), byType: {}, unhandled: [] };
    for (const row of rows) {
      stats.total += row.count;
      stats.byState[row.state] += row.count;
      const perType = stats.byType[row.type] ?? emptyCounts();
      perType[row.state] += row.count;
      stats.byType[row.type] = perType;
    }
    stats.unhandled = await this.unhandled();
    return stats;
  }

  /** See `JobStats.unhandled`. */
  async unhandled(limit = 20): Promise<OverdueType[]> {
    const views = this.store.views;
    if (!views) return [];
    const now = this.engine?.clock.now() ?? (await this.store.now()).getTime();
    return views.overdueTypes({
      excludeTypes: this.engine?.types ?? [],
      dueBefore: new Date(now - UNHANDLED_AFTER_MS),
      limit,
    });
  }
}

/**
 * A time bound of a filter, moved into the years every store holds (1970–9999): every stored
 * time is inside them, so the answer is the same, and not every database can be sent a time
 * outside them (PostgreSQL refuses the year 100000 that memory and SQLite compare with).
 */
function storedTimeBound(date: Date): Date {
  const at = date.getTime();
  return at < EARLIEST_DUE ? new Date(EARLIEST_DUE) : at > LATEST_DUE ? new Date(LATEST_DUE) : date;
}
