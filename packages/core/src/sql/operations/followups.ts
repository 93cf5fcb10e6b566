/**
 * Follow-ups of keyed jobs (see `NewJob.keyMode`): a `replace` or `debounce` change whose key a
 * *running* job holds is kept in `<prefix>jobs_followups` (one row per key, the latest change
 * wins — `queueFollowup` in `enqueue.ts`) and enqueued as the change it is once that holder is
 * gone (`releaseFollowups`): right after the settle that finished it, or by the sweep of a
 * recovery pass when that step did not happen (a crash, another process's settle). Enqueued
 * through `enqueue`, so a key that a new job holds by then is handled like any change.
 */
import type { EnqueueResult, NewJob } from '../../store.js';
import { marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import type { SqlEnv } from './env.js';
import { enqueue, fromFollowup } from './jobs.js';

/** Follow-ups at most released per call. */
export const FOLLOWUP_BATCH = 100;

/** `"holder_id" IN (…)` for `holderIds`, or every follow-up whose holder is gone. */
function gone(c: SqlEnv, holderIds: readonly string[] | null): { sql: string; params: unknown[] } {
  const orphan = `NOT EXISTS (SELECT 1 FROM ${c.jobs} j WHERE j."id" = f."holder_id")`;
  if (holderIds === null) return { sql: orphan, params: [] };
  return {
    sql: `f."holder_id" IN (${marks(holderIds.length)}) AND ${orphan}`,
    params: [...holderIds],
  };
}

/**
 * Whether any follow-up waits for one of `holderIds` (null: for any holder that is gone): one
 * cheap read, without a transaction, before `releaseFollowups` opens one.
 */
export function* hasFollowups(c: SqlEnv, holderIds: readonly string[] | null): Operation<boolean> {
  if (holderIds !== null && holderIds.length === 0) return false;
  const where =
    holderIds === null
      ? gone(c, null)
      : { sql: `f."holder_id" IN (${marks(holderIds.length)})`, params: [...holderIds] };
  const rows = (yield {
    sql: c.d.sql(`SELECT 1 AS one FROM ${c.followups} f WHERE ${where.sql} LIMIT 1`),
    params: where.params,
  }).rows;
  return rows.length > 0;
}

/**
 * Enqueues the follow-ups whose holder is gone (of `holderIds`, or any), at most
 * `FOLLOWUP_BATCH`, each taken out of the table first. Runs in a transaction.
 */
export function* releaseFollowups(
  c: SqlEnv,
  holderIds: readonly string[] | null,
): Operation<EnqueueResult[]> {
  const where = gone(c, holderIds);
  const rows = (yield {
    sql: c.d.sql(
      `SELECT f."job_key", f."job" FROM ${c.followups} f WHERE ${where.sql}
        ORDER BY f."created_at" LIMIT ?${c.d.lockSkipLocked}`,
    ),
    params: [...where.params, FOLLOWUP_BATCH],
  }).rows;
  if (rows.length === 0) return [];
  const jobs: NewJob[] = [];
  for (const row of rows) {
    yield {
      sql: c.d.sql(`DELETE FROM ${c.followups} WHERE "job_key" = ?`),
      params: [row.job_key],
    };
    jobs.push(fromFollowup(row.job));
  }
  return yield* enqueue(c, jobs);
}
