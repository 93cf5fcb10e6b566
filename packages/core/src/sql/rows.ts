/**
 * Rows to objects and back: the SQL core's row mapper for jobs, schedules and history records
 * (`rowToJob`, `rowToHistory`, the readers of times, JSON, booleans and integers as each driver
 * returns them), and the column lists the statements select.
 *
 * Each section below keeps its own header.
 */
import {
  dueTime,
  payloadJson,
  readLogs,
  readSteps,
  readStoredJson,
  takeCheckedPayload,
  type WrittenJobFacts,
  writtenJob,
} from '../rules.js';
import type { HistoryOutcome, JobCompletion, JobHistoryRecord } from '../store.js';

// ─── job rows ────────────────────────────────────────────────────────────────────────────────────
/*
 * What every SQL store shares: the column names of the jobs and schedules tables, and the
 * mapping between rows and `Job` / `ScheduleRecord`. Dialects keep only their SQL text and
 * driver glue.
 *
 * Table `<prefix>jobs`:
 *   id (auto-increment, insertion order), type, payload (JSON text or jsonb), state, priority,
 *   due_at, retries_left, attempts, scope, exclusive, job_key (unique among rows), tenant_id,
 *   queue, last_error_message, last_error_stack, created_at, lock_owner, lock_expires_at,
 *   lock_token, retry_policy (JSON text), suspended_from, schedule_name, occurrence,
 *   shard_index, shard_count, meta (JSON text or jsonb: the enqueuer's string headers),
 *   scope_limit (a limited job's limit N; null: 1 — `exclusive` marks every limited job, see
 *   `scope-rule.ts`), progress (JSON text or jsonb: the handler's latest `ctx.progress`, written
 *   by lease renewals), cancel_requested (an operator cancelled the running job), started_at
 *   (when the handler of the current lease started; null while leased but not started),
 *   timeout_ms (the job's own time limit), logs (JSON: its `ctx.log` lines, written by lease
 *   renewals), steps (JSON: its durable steps, written by fenced checkpoints, `saveSteps`)
 * Table `<prefix>schedules`:
 *   name (primary key), spec (JSON text), next_at, paused, pending_misfire, skipped, fired,
 *   version, created_at, updated_at
 * A finished job's row is deleted.
 */

// The rules the row mapping and the operations use, where the SQL core's code imports them.
export { assertIdentifier, dueTime, LEASE_EXPIRED_MESSAGE, readLogs } from '../rules.js';

import type {
  Job,
  JobState,
  NewJob,
  RecoverResult,
  RetryPolicy,
  ScheduleRecord,
} from '../store.js';

export type SqlValue = string | number | bigint | boolean | Date | null | Buffer | object;
export type SqlRow = Record<string, unknown>;

/** Columns an INSERT of a new job writes, in this order (see `newJobValues`). */
export const INSERT_JOB_COLUMNS = [
  'type',
  'payload',
  'state',
  'priority',
  'due_at',
  'retries_left',
  'attempts',
  'scope',
  'exclusive',
  'job_key',
  'tenant_id',
  'queue',
  'created_at',
  'retry_policy',
  'schedule_name',
  'occurrence',
  'shard_index',
  'shard_count',
  'meta',
  'scope_limit',
  'timeout_ms',
] as const;

/** Every column of the jobs table, in `rowToJob` names: the inserted ones and those a lease or a failure writes. */
export const JOB_COLUMN_NAMES = [
  'id',
  ...INSERT_JOB_COLUMNS,
  'last_error_message',
  'last_error_stack',
  'lock_owner',
  'lock_expires_at',
  'lock_token',
  'suspended_from',
  'progress',
  'cancel_requested',
  'started_at',
  'logs',
  'steps',
] as const;

type JobColumn = (typeof JOB_COLUMN_NAMES)[number];

/** Where each jobs-table column stands in a select list (-1: not in it). */
export type JobRowLayout = Readonly<Record<JobColumn, number>>;

/** The layout of a select list of jobs-table columns, in the given order. */
export function jobRowLayout(names: readonly JobColumn[]): JobRowLayout {
  return Object.fromEntries(JOB_COLUMN_NAMES.map((name) => [name, names.indexOf(name)])) as Record<
    JobColumn,
    number
  >;
}

/** Every column, in `JOB_COLUMN_NAMES` order. */
const ALL_COLUMNS = jobRowLayout(JOB_COLUMN_NAMES);

/** Columns a lease writes and so knows without reading them back (see `jobRowAt`'s `lease`). */
export const LEASE_KNOWN_COLUMNS = ['state', 'lock_owner', 'lock_token'] as const;

/** The columns a lease returns: all but `LEASE_KNOWN_COLUMNS`, in `JOB_COLUMN_NAMES` order. */
export const LEASED_COLUMN_NAMES: readonly JobColumn[] = JOB_COLUMN_NAMES.filter(
  (name) => !(LEASE_KNOWN_COLUMNS as readonly string[]).includes(name),
);

/**
 * The jobs-table row of a select list laid out as `layout` (default: `JOB_COLUMN_NAMES` in
 * order), from an array of values (a driver's array row mode, see `Query.arrayRows`) starting
 * at `at`. One object of one shape, where a driver's named rows cost a store by column name per
 * column (~2 µs a job on the hot path, measured). With `lease`, the row is a job just leased
 * to that owner and token, running: those columns need not be in the select list.
 */
export function jobRowAt(
  values: readonly unknown[],
  at = 0,
  layout: JobRowLayout = ALL_COLUMNS,
  lease?: { owner: string; token: string },
): SqlRow {
  return {
    id: values[at + layout.id],
    type: values[at + layout.type],
    payload: values[at + layout.payload],
    state: lease ? 'running' : values[at + layout.state],
    priority: values[at + layout.priority],
    due_at: values[at + layout.due_at],
    retries_left: values[at + layout.retries_left],
    attempts: values[at + layout.attempts],
    scope: values[at + layout.scope],
    exclusive: values[at + layout.exclusive],
    job_key: values[at + layout.job_key],
    tenant_id: values[at + layout.tenant_id],
    queue: values[at + layout.queue],
    created_at: values[at + layout.created_at],
    retry_policy: values[at + layout.retry_policy],
    schedule_name: values[at + layout.schedule_name],
    occurrence: values[at + layout.occurrence],
    shard_index: values[at + layout.shard_index],
    shard_count: values[at + layout.shard_count],
    meta: values[at + layout.meta],
    scope_limit: values[at + layout.scope_limit],
    timeout_ms: values[at + layout.timeout_ms],
    last_error_message: values[at + layout.last_error_message],
    last_error_stack: values[at + layout.last_error_stack],
    lock_owner: lease ? lease.owner : values[at + layout.lock_owner],
    lock_expires_at: values[at + layout.lock_expires_at],
    lock_token: lease ? lease.token : values[at + layout.lock_token],
    suspended_from: values[at + layout.suspended_from],
    progress: values[at + layout.progress],
    cancel_requested: values[at + layout.cancel_requested],
    started_at: values[at + layout.started_at],
    logs: values[at + layout.logs],
    steps: values[at + layout.steps],
  };
}

/**
 * The job an enqueue just inserted for `job` (`writtenJob`, given what the store decided): its
 * payload is the engine's checked copy itself when it is one (exactly what the JSON text
 * written reads back as), else a copy made through that text. Every SQL store's enqueue.
 */
export function insertedJob(job: NewJob, facts: Omit<WrittenJobFacts, 'payload'>): Job {
  // One literal, not `{ ...facts, payload }`: V8 builds a spread with a property added on its
  // slow path, ~2 µs a job (a tenth of a bulk enqueue's client CPU).
  return writtenJob(job, {
    id: facts.id,
    createdAt: facts.createdAt,
    dueAt: facts.dueAt,
    state: facts.state,
    payload: takeCheckedPayload(job.payload) ? job.payload : JSON.parse(payloadJson(job.payload)),
  });
}

/**
 * Values for `INSERT_JOB_COLUMNS`, given the store's `now` and how the dialect writes times and
 * booleans. The state is `timer` when the job is due later than now, `async` otherwise.
 */
export function newJobValues(
  job: NewJob,
  now: Date,
  encode: {
    time: (d: Date) => SqlValue;
    bool: (b: boolean) => SqlValue;
  },
): SqlValue[] {
  const due = dueTime(job, now);
  return [
    job.type,
    // An undefined payload is stored as JSON null, as the memory store keeps it.
    payloadJson(job.payload),
    due.getTime() > now.getTime() ? 'timer' : 'async',
    job.priority,
    encode.time(due),
    job.retries,
    0,
    job.scope,
    encode.bool(isLimited(job)),
    job.key,
    job.tenantId,
    job.queue,
    encode.time(now),
    job.retryPolicy ? JSON.stringify(job.retryPolicy) : null,
    job.schedule,
    job.occurrence ? encode.time(job.occurrence) : null,
    job.shard ? job.shard.index : null,
    job.shard ? job.shard.count : null,
    job.meta ? JSON.stringify(job.meta) : null,
    storedScopeLimit(job),
    job.timeoutMs ?? null,
  ];
}

/** A new job takes part in its scope's limit: exclusive, or with a `scopeLimit`. */
export function isLimited(job: Pick<NewJob, 'exclusive' | 'scopeLimit'>): boolean {
  return job.exclusive || (job.scopeLimit ?? null) !== null;
}

/** The `scope_limit` column of a new job: its limit above 1, else null (a limit of 1). */
export function storedScopeLimit(job: Pick<NewJob, 'exclusive' | 'scopeLimit'>): number | null {
  return !job.exclusive && (job.scopeLimit ?? 1) > 1 ? (job.scopeLimit as number) : null;
}

/** What `readScopeLimit` reads. */
export type ScopeLimitColumns = Readonly<{ exclusive: boolean; scopeLimit: number | null }>;

/** A job that takes no part in a scope's limit (most): one object for all of them. */
const NOT_LIMITED: ScopeLimitColumns = Object.freeze({
  exclusive: false,
  scopeLimit: null,
});

/** `exclusive` and `scopeLimit` of a job from its `exclusive` (limited) and `scope_limit` columns. */
export function readScopeLimit(row: SqlRow): ScopeLimitColumns {
  if (!readBool(row.exclusive)) return NOT_LIMITED;
  const limit =
    row.scope_limit === null || row.scope_limit === undefined ? 1 : readInt(row.scope_limit);
  return { exclusive: limit === 1, scopeLimit: limit };
}

/** Reads a time column as written by any driver: Date, epoch ms (number/bigint) or ISO text. */
export function readTime(value: unknown): Date {
  if (value instanceof Date) return value;
  if (typeof value === 'number') return new Date(value);
  if (typeof value === 'bigint') return new Date(Number(value));
  if (typeof value === 'string') {
    // MySQL/SQLite text without a zone is UTC by our convention.
    const iso = /[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value.replace(' ', 'T')}Z`;
    const d = new Date(iso);
    if (!Number.isNaN(d.getTime())) return d;
  }
  throw new TypeError(`cannot read a time from ${String(value)}`);
}

export function readOptionalTime(value: unknown): Date | null {
  return value === null || value === undefined ? null : readTime(value);
}

export function readBool(value: unknown): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return Number(value) !== 0;
  if (typeof value === 'string') return value === '1' || value === 'true' || value === 't';
  if (Buffer.isBuffer(value)) return value[0] === 1;
  return false;
}

function readInt(value: unknown): number {
  return typeof value === 'number' ? value : Number(value);
}

function readString(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  return typeof value === 'string' ? value : String(value);
}

/** Maps a row of the jobs table (any driver) to a `Job`. */
export function rowToJob(row: SqlRow): Job {
  const message = readString(row.last_error_message);
  const shardIndex = row.shard_index;
  const limit = readScopeLimit(row);
  return {
    id: String(row.id),
    type: String(row.type),
    payload: readStoredJson(row.payload),
    state: String(row.state) as JobState,
    priority: readInt(row.priority),
    dueAt: readTime(row.due_at),
    retriesLeft: readInt(row.retries_left),
    attempts: readInt(row.attempts),
    scope: readString(row.scope),
    exclusive: limit.exclusive,
    scopeLimit: limit.scopeLimit,
    key: readString(row.job_key),
    tenantId: readString(row.tenant_id),
    queue: String(row.queue),
    lastError:
      message === null ? null : { message, stack: readString(row.last_error_stack) ?? null },
    createdAt: readTime(row.created_at),
    lockOwner: readString(row.lock_owner),
    lockExpiresAt: readOptionalTime(row.lock_expires_at),
    lockToken: readString(row.lock_token),
    retryPolicy:
      row.retry_policy === null || row.retry_policy === undefined
        ? null
        : (readStoredJson(row.retry_policy) as RetryPolicy),
    suspendedFrom: readString(row.suspended_from) as Job['suspendedFrom'],
    schedule: readString(row.schedule_name),
    occurrence: readOptionalTime(row.occurrence),
    shard:
      shardIndex === null || shardIndex === undefined
        ? null
        : { index: readInt(shardIndex), count: readInt(row.shard_count) },
    meta:
      row.meta === null || row.meta === undefined
        ? null
        : (readStoredJson(row.meta) as Record<string, string>),
    progress:
      row.progress === null || row.progress === undefined ? null : readStoredJson(row.progress),
    cancelRequested: readBool(row.cancel_requested),
    // Written by acquisitions and renewals; meaningful only while the job is running.
    startedAt: row.state === 'running' ? readOptionalTime(row.started_at) : null,
    logs: row.logs === null || row.logs === undefined ? [] : readLogs(row.logs),
    steps: readSteps(row.steps),
    timeoutMs:
      row.timeout_ms === null || row.timeout_ms === undefined ? null : readInt(row.timeout_ms),
  };
}

/** Maps a row of the schedules table (any driver) to a `ScheduleRecord`. */
export function rowToSchedule(row: SqlRow): ScheduleRecord {
  return {
    name: String(row.name),
    spec: readStoredJson(row.spec),
    nextAt: readOptionalTime(row.next_at),
    paused: readBool(row.paused),
    pendingMisfire: readBool(row.pending_misfire),
    skipped: readInt(row.skipped),
    fired: readInt(row.fired),
    version: readInt(row.version),
    createdAt: readTime(row.created_at),
    updatedAt: readTime(row.updated_at),
  };
}

/** A recovery's result: `released` (leases lapsed before their handler started) only when any. */
export function recoverResult(
  requeued: string[],
  deadlettered: string[],
  released: string[],
): RecoverResult {
  return released.length > 0 ? { requeued, deadlettered, released } : { requeued, deadlettered };
}

// ─── history rows ────────────────────────────────────────────────────────────────────────────────
/*
 * The history table's columns and row mapping, shared by the operations and the dialects that
 * write history in their own statements (PostgreSQL's completion CTEs).
 *
 * Table `<prefix>jobs_history` (migration 0004): the job's own columns as they were when it
 * finished (`id` is the job's id, `owner` its last `lock_owner`), plus `outcome`, `result`
 * (JSON), `duration_ms` and `finished_at` (the store's clock).
 */

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
