/** Operator reads and writes: look up, list, retry from the dead-letter area, delete, suspend. */
import {
  JOB_STATES,
  type Job,
  type JobFilter,
  type JobState,
  type ListJobsRequest,
  type OverdueType,
  type QueueStatsRow,
  type StatsRow,
} from '../../store.js';
import { isJobId, marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import { readTime, rowToJob } from '../rows.js';
import type { SqlEnv } from './env.js';
import { copyToHistory, keepsDeadletter } from './jobs.js';

/** SET clause of a retry from the dead-letter area; parameters: 0 (ms from now), retries. */
const REVIVE = (c: SqlEnv): string =>
  // Due now as the dialect writes due times (`nowPlusMs`: PostgreSQL cuts it to the ms, so
  // the very next statement already sees the job due).
  // A retry starts afresh: it drops a cancel request left from a run whose owner died.
  `"state" = 'async', "due_at" = ${c.d.nowPlusMs}, "retries_left" = ?,
          "lock_owner" = NULL, "lock_expires_at" = NULL, "lock_token" = NULL,
          "cancel_requested" = ${c.d.FALSE}`;

/** WHERE of an admin filter, in shared (`"quoted"`) SQL. */
export function filterWhere(filter: JobFilter): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (filter.state !== undefined) {
    const states = (Array.isArray(filter.state) ? filter.state : [filter.state]) as JobState[];
    if (states.length === 0) return { sql: '1 = 0', params: [] };
    const [only] = states;
    if (states.length === 1 && only !== undefined && JOB_STATES.includes(only)) {
      // A literal, not a parameter: only then can SQLite read a partial index on the state
      // (`jobs_lease_idx`, running jobs), instead of scanning the table for a rare state.
      parts.push(`"state" = '${only}'`);
    } else {
      parts.push(`"state" IN (${marks(states.length)})`);
      params.push(...states);
    }
  }
  const eq: [keyof JobFilter, string][] = [
    ['type', 'type'],
    ['scope', 'scope'],
    ['tenantId', 'tenant_id'],
    ['queue', 'queue'],
    ['schedule', 'schedule_name'],
    ['key', 'job_key'],
  ];
  for (const [field, column] of eq) {
    if (filter[field] !== undefined) {
      parts.push(`"${column}" = ?`);
      params.push(filter[field]);
    }
  }
  return { sql: parts.length === 0 ? '1 = 1' : parts.join(' AND '), params };
}

export function* getJob(c: SqlEnv, id: string): Operation<Job | null> {
  if (!isJobId(id)) return null;
  const row = (yield {
    sql: c.d.sql(`SELECT ${c.d.jobColumns()} FROM ${c.jobs} WHERE "id" = ?`),
    params: [id],
  }).rows[0];
  return row ? rowToJob(row) : null;
}

export function* listJobs(c: SqlEnv, request: ListJobsRequest): Operation<Job[]> {
  const where = filterWhere(request);
  const after = request.afterId != null && isJobId(request.afterId) ? ' AND "id" > ?' : '';
  const rows = (yield {
    sql: c.d.sql(
      `SELECT ${c.d.jobColumns()} FROM ${c.jobs} WHERE ${where.sql}${after} ORDER BY "id" ASC LIMIT ? OFFSET ?`,
    ),
    params: [...where.params, ...(after ? [request.afterId] : []), request.limit, request.offset],
  }).rows;
  return rows.map(rowToJob);
}

export function* retryDeadletter(c: SqlEnv, id: string, retries: number): Operation<Job | null> {
  if (!isJobId(id)) return null;
  const result = yield {
    sql: c.d.sql(`UPDATE ${c.jobs} SET ${REVIVE(c)} WHERE "id" = ? AND "state" = 'deadletter'`),
    params: [0, retries, id],
  };
  if (result.affected === 0) return null;
  if (c.notify) yield c.notify;
  return yield* getJob(c, id);
}

/**
 * Deletes a job; a dead-letter job is copied to history first while history keeps it (run in
 * a transaction then: see `deleteNeedsTransaction`). A running job is not deleted: it gets a
 * cancel request (its handler may still run, and its scope slot stays taken until its owner
 * lets go; recovery ends it cancelled if the owner died).
 */
export function* deleteJob(c: SqlEnv, id: string): Operation<boolean> {
  if (!isJobId(id)) return false;
  if (keepsDeadletter(c)) {
    yield {
      sql: c.d.sql(
        `${copyToHistory(c, 'deadletter')} FROM ${c.jobs} j WHERE j."id" = ? AND j."state" = 'deadletter'`,
      ),
      params: [id],
    };
  }
  const result = yield {
    sql: c.d.sql(`DELETE FROM ${c.jobs} WHERE "id" = ? AND "state" <> 'running'`),
    params: [id],
  };
  if (result.affected > 0) return true;
  yield* requestCancel(c, { sql: '"id" = ?', params: [id] });
  const running = yield {
    sql: c.d.sql(`SELECT "id" FROM ${c.jobs} WHERE "id" = ? AND "state" = 'running'`),
    params: [id],
  };
  return running.rows.length > 0;
}

/** Flags the running jobs matching `where` as cancel-requested (see `deleteJob`). */
function* requestCancel(c: SqlEnv, where: { sql: string; params: unknown[] }): Operation<void> {
  yield {
    sql: c.d.sql(
      `UPDATE ${c.jobs} SET "cancel_requested" = ${c.d.TRUE}
        WHERE ${where.sql} AND "state" = 'running' AND "cancel_requested" = ${c.d.FALSE}`,
    ),
    params: where.params,
  };
}

/** Deleting jobs writes history as well: one transaction. */
export function deleteNeedsTransaction(c: SqlEnv): boolean {
  return keepsDeadletter(c);
}

/** Ids of at most `limit` jobs matching `where`, in id order (a bulk operation's batch). */
function* batchIds(
  c: SqlEnv,
  where: { sql: string; params: unknown[] },
  limit: number,
): Operation<string[]> {
  const rows = (yield {
    sql: c.d.sql(`SELECT "id" FROM ${c.jobs} WHERE ${where.sql} ORDER BY "id" LIMIT ?`),
    params: [...where.params, limit],
  }).rows;
  return rows.map((row) => String(row.id));
}

/** See `JobStore.countJobs`: with a cap, a LIMITed subquery stops counting at `cap` rows. */
export function* countJobs(c: SqlEnv, filter: JobFilter, cap?: number): Operation<number> {
  const where = filterWhere(filter);
  const capped = cap !== undefined && Number.isSafeInteger(cap) && cap >= 0;
  const row = (yield {
    sql: c.d.sql(
      capped
        ? `SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM ${c.jobs} WHERE ${where.sql} LIMIT ?) capped`
        : `SELECT COUNT(*) AS n FROM ${c.jobs} WHERE ${where.sql}`,
    ),
    params: capped ? [...where.params, cap] : where.params,
  }).rows[0];
  return Number(row?.n ?? 0);
}

/** See `JobStore.retryDeadletterMany`: one batch, read then revived (still dead-letter only). */
export function* retryDeadletterMany(
  c: SqlEnv,
  filter: JobFilter,
  retries: number,
  limit: number,
): Operation<number> {
  const ids = yield* batchIds(c, filterWhere({ ...filter, state: 'deadletter' }), limit);
  if (ids.length === 0) return 0;
  const result = yield {
    sql: c.d.sql(
      `UPDATE ${c.jobs} SET ${REVIVE(c)} WHERE "id" IN (${marks(ids.length)}) AND "state" = 'deadletter'`,
    ),
    params: [0, retries, ...ids],
  };
  if (c.notify && result.affected > 0) yield c.notify;
  return result.affected;
}

/**
 * See `JobStore.deleteMany`: one batch, read then deleted (still matching the filter), its
 * dead-letter jobs copied to history first while history keeps them; matching running jobs
 * get a cancel request instead.
 */
export function* deleteMany(c: SqlEnv, filter: JobFilter, limit: number): Operation<number> {
  const matching = filterWhere(filter);
  // Running jobs are not deleted, nor counted: each gets a cancel request (see `deleteJob`).
  yield* requestCancel(c, matching);
  const where = { sql: `${matching.sql} AND "state" <> 'running'`, params: matching.params };
  const ids = yield* batchIds(c, where, limit);
  if (ids.length === 0) return 0;
  const batch = `"id" IN (${marks(ids.length)}) AND ${where.sql}`;
  if (keepsDeadletter(c)) {
    yield {
      sql: c.d.sql(
        `${copyToHistory(c, 'deadletter')} FROM ${c.jobs} j WHERE ${batch} AND "state" = 'deadletter'`,
      ),
      params: [...ids, ...where.params],
    };
  }
  const result = yield {
    sql: c.d.sql(`DELETE FROM ${c.jobs} WHERE ${batch}`),
    params: [...ids, ...where.params],
  };
  return result.affected;
}

export function* suspend(c: SqlEnv, filter: JobFilter): Operation<number> {
  const where = filterWhere(filter);
  const result = yield {
    sql: c.d.sql(
      `UPDATE ${c.jobs} SET "suspended_from" = "state", "state" = 'suspended'
          WHERE "state" IN ('timer', 'async', 'blocked') AND ${where.sql}`,
    ),
    params: where.params,
  };
  return result.affected;
}

export function* activate(c: SqlEnv, filter: JobFilter): Operation<number> {
  const where = filterWhere(filter);
  const result = yield {
    sql: c.d.sql(
      `UPDATE ${c.jobs} SET "state" = COALESCE("suspended_from", 'async'), "suspended_from" = NULL
          WHERE "state" = 'suspended' AND ${where.sql}`,
    ),
    params: where.params,
  };
  if (c.notify && result.affected > 0) yield c.notify;
  return result.affected;
}

export function* stats(c: SqlEnv): Operation<StatsRow[]> {
  const rows = (yield {
    sql: c.d.sql(
      `SELECT "type", "state", COUNT(*) AS n FROM ${c.jobs} GROUP BY "type", "state" ORDER BY "type", "state"`,
    ),
    params: [],
  }).rows;
  return rows.map((row) => ({
    type: String(row.type),
    state: row.state as JobState,
    count: Number(row.n),
  }));
}

/** See `JobStore.overdueTypes`. */
/** Due waiting rows `overdueTypes` looks at, oldest first. */
const OVERDUE_SCAN = 10_000;

export function* overdueTypes(
  c: SqlEnv,
  request: { excludeTypes: readonly string[]; dueBefore: Date; limit: number },
): Operation<OverdueType[]> {
  const exclude =
    request.excludeTypes.length > 0
      ? ` WHERE w."type" NOT IN (${marks(request.excludeTypes.length)})`
      : '';
  // Only the oldest due waiting rows are looked at (read in due order from the due index): the
  // check costs the same on a table of a million, and jobs nobody runs only grow older, so they
  // come to the front of that window.
  const order = c.d.dueOrder;
  const oldest = order
    ? `SELECT j."type", j."due_at" FROM ${order.from} WHERE ${order.waiting} AND j."due_at" <= ?
        ORDER BY j."due_at" LIMIT ${OVERDUE_SCAN}`
    : `SELECT "type", "due_at" FROM ${c.jobs} WHERE "state" IN ('timer', 'async') AND "due_at" <= ?
        ORDER BY "due_at" LIMIT ${OVERDUE_SCAN}`;
  const rows = (yield {
    sql: c.d.sql(
      `SELECT w."type", COUNT(*) AS n, MIN(${c.d.timeText('w."due_at"')}) AS oldest
          FROM (${oldest}) w${exclude}
          GROUP BY w."type" ORDER BY oldest LIMIT ?`,
    ),
    params: [c.d.time(request.dueBefore), ...request.excludeTypes, request.limit],
  }).rows;
  return rows.map((row) => ({
    type: String(row.type),
    count: Number(row.n),
    oldestDueAt: readTime(row.oldest),
  }));
}

/**
 * See `JobStore.queueStats`. With `newest`, a LIMITed subquery walks the primary key backwards
 * and groups only those rows: the cost is bounded whatever the table's size.
 */
export function* queueStats(
  c: SqlEnv,
  options: { newest?: number } = {},
): Operation<QueueStatsRow[]> {
  const newest = options.newest;
  const bounded = newest !== undefined && Number.isSafeInteger(newest) && newest >= 0;
  const from = bounded
    ? `(SELECT "queue", "type", "state", "due_at" FROM ${c.jobs} ORDER BY "id" DESC LIMIT ?) newest`
    : c.jobs;
  const rows = (yield {
    sql: c.d.sql(
      `SELECT "queue", "type", "state", COUNT(*) AS n,
          SUM(CASE WHEN "due_at" <= ${c.d.now} THEN 1 ELSE 0 END) AS due,
          MIN(${c.d.timeText('"due_at"')}) AS oldest
          FROM ${from} GROUP BY "queue", "type", "state"`,
    ),
    params: bounded ? [newest] : [],
  }).rows;
  return rows.map((row) => ({
    queue: String(row.queue),
    type: String(row.type),
    state: row.state as JobState,
    count: Number(row.n),
    due: Number(row.due),
    oldestDueAt: readTime(row.oldest),
  }));
}

/** See `JobStore.estimateJobs`: the dialect's statistics read, or null where it has none. */
export function* estimateJobs(c: SqlEnv): Operation<number | null> {
  if (!c.d.estimateJobs) return null;
  const n = (yield c.d.estimateJobs).rows[0]?.n;
  const estimate = n === null || n === undefined ? Number.NaN : Number(n);
  return Number.isFinite(estimate) && estimate > 0 ? Math.round(estimate) : null;
}
