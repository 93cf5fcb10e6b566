/**
 * History: finished jobs kept in `<prefix>jobs_history`, written in the same statement or
 * transaction that finishes them (`settle.ts` for completions, `admin.ts` for deletions from
 * the dead-letter area), read by operators, pruned in small batches by one process at a time.
 * The table's columns: `history-rows.ts`.
 */
import { keepsOutcome } from '../../history.js';
import type { HistoryOutcome, JobHistoryRecord, ListHistoryRequest } from '../../store.js';
import { isJobId } from '../dialect.js';
import type { Operation } from '../executor.js';
import {
  HISTORY_COLUMN_NAMES,
  HISTORY_JSON_COLUMNS,
  HISTORY_TIME_COLUMNS,
  historyInsert,
  rowToHistory,
} from '../history-rows.js';
import { readBool } from '../rows.js';
import type { SqlEnv } from './env.js';

/** History keeps completed jobs: completions write records. */
export function keepsCompleted(c: SqlEnv): boolean {
  return keepsOutcome(c.historySettings.keep, 'completed');
}

/** History keeps jobs deleted from the dead-letter area. */
export function keepsDeadletter(c: SqlEnv): boolean {
  return keepsOutcome(c.historySettings.keep, 'deadletter');
}

/**
 * `INSERT INTO history (…) SELECT <job columns of alias j>, <outcome>, <result>, <duration>,
 * now` in shared SQL; the caller appends `FROM … j …`. `result`/`duration` are SQL expressions.
 */
export function copyToHistory(
  c: SqlEnv,
  outcome: HistoryOutcome,
  result = 'NULL',
  duration = 'NULL',
): string {
  return historyInsert(c.history, 'j', `'${outcome}'`, result, duration, c.d.now);
}

/** Select list of history rows, as `rowToHistory` reads them. */
function historyColumns(c: SqlEnv): string {
  return HISTORY_COLUMN_NAMES.map((name) => {
    const column = `"${name}"`;
    if (HISTORY_TIME_COLUMNS.has(name)) return `${c.d.timeText(column)} AS "${name}"`;
    if (HISTORY_JSON_COLUMNS.has(name) && c.d.jsonText)
      return `${c.d.jsonText(column)} AS "${name}"`;
    return column;
  }).join(', ');
}

export function* getHistory(c: SqlEnv, id: string): Operation<JobHistoryRecord | null> {
  if (!isJobId(id)) return null;
  const row = (yield {
    sql: c.d.sql(`SELECT ${historyColumns(c)} FROM ${c.history} WHERE "id" = ?`),
    params: [id],
  }).rows[0];
  return row ? rowToHistory(row) : null;
}

/** See `JobStore.amendHistory`: the final result and duration of a job completed in a handler's transaction. */
export function* amendHistory(
  c: SqlEnv,
  id: string,
  resultJson: string | null,
  durationMs: number,
): Operation<boolean> {
  if (!isJobId(id)) return false;
  const result = yield {
    sql: c.d.sql(
      `UPDATE ${c.history} SET "result" = ?, "duration_ms" = ? WHERE "id" = ? AND "outcome" = 'completed'`,
    ),
    params: [resultJson, Math.max(0, Math.round(durationMs)), id],
  };
  return result.affected > 0;
}

/** Newest first by (finished_at, id), after the keyset position; see `JobStore.listHistory`. */
export function* listHistory(
  c: SqlEnv,
  request: ListHistoryRequest,
): Operation<JobHistoryRecord[]> {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (request.type !== undefined) {
    parts.push(`"type" = ?`);
    params.push(request.type);
  }
  if (request.outcome !== undefined) {
    parts.push(`"outcome" = ?`);
    params.push(request.outcome);
  }
  if (request.since !== undefined) {
    parts.push(`"finished_at" >= ?`);
    params.push(c.d.time(request.since));
  }
  if (request.until !== undefined) {
    parts.push(`"finished_at" < ?`);
    params.push(c.d.time(request.until));
  }
  const after = request.after ?? null;
  if (after !== null) {
    if (!isJobId(after.id)) return [];
    const at = c.d.time(after.finishedAt);
    parts.push(`("finished_at" < ? OR ("finished_at" = ? AND "id" < ?))`);
    params.push(at, at, after.id);
  }
  const where = parts.length > 0 ? `WHERE ${parts.join(' AND ')}` : '';
  const rows = (yield {
    sql: c.d.sql(
      `SELECT ${historyColumns(c)} FROM ${c.history} ${where}
        ORDER BY "finished_at" DESC, "id" DESC LIMIT ?`,
    ),
    params: [...params, request.limit],
  }).rows;
  return rows.map(rowToHistory);
}

/**
 * Deletes at most `limit` records older than `retentionMs` on the store's clock, oldest
 * first, under the dialect's pruning lock; null when another process holds it. With history in
 * partitions, whole partitions past the retention are dropped first (their records counted, not
 * limited: dropping one costs the same for any number).
 */
export function* pruneHistory(
  c: SqlEnv,
  retentionMs: number,
  limit: number,
): Operation<number | null> {
  const lock = c.d.historyLock;
  if (lock) {
    const got = (yield lock.take).rows[0]?.got;
    if (!readBool(got)) return null;
  }
  try {
    const partitions = c.d.historyPartitions;
    const dropped = partitions ? yield* partitions.dropBefore(retentionMs) : 0;
    // The inner derived table: MySQL takes no LIMIT in an IN subquery, but does in a derived one.
    const result = yield {
      sql: c.d.sql(
        `DELETE FROM ${c.history} WHERE "id" IN (SELECT "id" FROM (
          SELECT "id" FROM ${c.history} WHERE "finished_at" < ${c.d.nowPlusMs}
          ORDER BY "finished_at", "id" LIMIT ?) expired)`,
      ),
      params: [-retentionMs, limit],
    };
    return dropped + result.affected;
  } finally {
    if (lock) for (const query of lock.release) yield query;
  }
}
