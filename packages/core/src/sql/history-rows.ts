/**
 * The history table's columns and row mapping, shared by the operations and the dialects that
 * write history in their own statements (PostgreSQL's completion CTEs).
 *
 * Table `<prefix>jobs_history` (migration 0004): the job's own columns as they were when it
 * finished (`id` is the job's id, `owner` its last `lock_owner`), plus `outcome`, `result`
 * (JSON), `duration_ms` and `finished_at` (the store's clock).
 */
import type { HistoryOutcome, JobCompletion, JobHistoryRecord } from '../store.js';
import { readOptionalTime, readTime, rowToJob, type SqlRow } from './rows.js';

/** History columns copied from the jobs table: [history column, jobs column]. */
const COPIED: readonly (readonly [string, string])[] = [
  ['id', 'id'],
  ['type', 'type'],
  ['payload', 'payload'],
  ['priority', 'priority'],
  ['due_at', 'due_at'],
  ['retries_left', 'retries_left'],
  ['attempts', 'attempts'],
  ['scope', 'scope'],
  ['exclusive', 'exclusive'],
  ['job_key', 'job_key'],
  ['tenant_id', 'tenant_id'],
  ['queue', 'queue'],
  ['last_error_message', 'last_error_message'],
  ['last_error_stack', 'last_error_stack'],
  ['created_at', 'created_at'],
  ['owner', 'lock_owner'],
  ['retry_policy', 'retry_policy'],
  ['schedule_name', 'schedule_name'],
  ['occurrence', 'occurrence'],
  ['shard_index', 'shard_index'],
  ['shard_count', 'shard_count'],
  ['meta', 'meta'],
  ['progress', 'progress'],
  ['scope_limit', 'scope_limit'],
  ['started_at', 'started_at'],
  ['timeout_ms', 'timeout_ms'],
  ['logs', 'logs'],
  ['steps', 'steps'],
];

/** One partition of history where the database keeps it in partitions (migration 0018): a day. */
export const HISTORY_PARTITION_MS = 86_400_000;

/** Every column of the history table, in the order the copying INSERT writes them. */
export const HISTORY_COLUMN_NAMES = [
  ...COPIED.map(([history]) => history),
  'outcome',
  'result',
  'duration_ms',
  'finished_at',
] as const;

export const HISTORY_TIME_COLUMNS: ReadonlySet<string> = new Set([
  'due_at',
  'created_at',
  'occurrence',
  'finished_at',
  'started_at',
]);
export const HISTORY_JSON_COLUMNS: ReadonlySet<string> = new Set([
  'payload',
  'retry_policy',
  'meta',
  'result',
  'progress',
  'logs',
  'steps',
]);

/**
 * `INSERT INTO <history> (…) SELECT <source>.<job columns>, <outcome>, <result>, <duration>,
 * <now>` (`"quoted"` shared SQL, every value an SQL expression); the caller appends the FROM.
 */
export function historyInsert(
  history: string,
  source: string,
  outcome: string,
  result: string,
  duration: string,
  now: string,
): string {
  const columns = HISTORY_COLUMN_NAMES.map((name) => `"${name}"`).join(', ');
  const copied = COPIED.map(([, jobs]) => `${source}."${jobs}"`).join(', ');
  return `INSERT INTO ${history} (${columns}) SELECT ${copied}, ${outcome}, ${result}, ${duration}, ${now}`;
}

/** Maps a row of the history table (any driver) to a `JobHistoryRecord`. */
export function rowToHistory(row: SqlRow): JobHistoryRecord {
  const job = rowToJob({
    ...row,
    state: 'async',
    lock_owner: row.owner,
    lock_expires_at: null,
    lock_token: null,
    suspended_from: null,
  });
  const duration = row.duration_ms;
  return {
    ...job,
    state: 'finished',
    outcome: String(row.outcome) as HistoryOutcome,
    result:
      row.result === null || row.result === undefined
        ? null
        : typeof row.result === 'string'
          ? JSON.parse(row.result)
          : Buffer.isBuffer(row.result)
            ? JSON.parse(row.result.toString('utf8'))
            : row.result,
    finishedAt: readTime(row.finished_at),
    durationMs: duration === null || duration === undefined ? null : Number(duration),
    // When its last run started: only for a job that ended by running (see `toHistoryRecord`).
    startedAt:
      duration === null || duration === undefined ? null : readOptionalTime(row.started_at),
    lockExpiresAt: null,
    lockToken: null,
    suspendedFrom: null,
  };
}

/** A completion's duration as stored: whole ms, never negative; null when not measured. */
export function durationOf(ref: JobCompletion | undefined): number | null {
  const ms = ref?.durationMs;
  return typeof ms === 'number' && Number.isFinite(ms) ? Math.max(0, Math.round(ms)) : null;
}
