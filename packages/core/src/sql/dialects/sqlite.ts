/**
 * SQLite (better-sqlite3), for `@jobs/sqlite` and `@jobs/typeorm`: times are INTEGER epoch ms,
 * booleans 0/1, JSON is TEXT. The database runs in this process and has one write lock, so
 * operations run synchronously and writers queue on `BEGIN IMMEDIATE` (no row locks to skip).
 * Batches — new rows, job refs, failures — travel as ONE JSON parameter read with `json_each`,
 * so a batch of any size is one prepared statement.
 */
import { type FSWatcher, watch } from 'node:fs';
import { type Clock, systemClock } from '../../clock.js';
import { compareAcquisitionOrder, type LeaseStartRule, leaseStarts } from '../../rules.js';
import type {
  AcquireRequest,
  JobCompletion,
  JobFailure,
  JobRef,
  LeaseRenewalRef,
  RecoverResult,
  StepSave,
} from '../../store.js';
import { ChangeWatcher } from '../change-watcher.js';
import {
  acquisitionOrderBy,
  type Dialect,
  JOB_COLUMN_NAMES,
  marks,
  type RenewAnswer,
  SCHEDULE_COLUMN_NAMES,
  selectList,
  type TableName,
  tableBaseName,
} from '../dialect.js';
import type { Operation, Query, QueryOutcome } from '../executor.js';
import { loadMigrations } from '../migrate.js';
import type { Migration } from '../migration.js';
import { MIGRATION_FILES } from '../migrations/index.js';
import { enqueueRowByRow } from '../portable/enqueue-row-by-row.js';
import {
  durationOf,
  historyInsert,
  INSERT_JOB_COLUMNS,
  type JobRowLayout,
  jobRowAt,
  LEASE_EXPIRED_MESSAGE,
  LEASED_COLUMN_NAMES,
  recoverResult,
  type SqlRow,
} from '../rows.js';
import { candidateWhere } from '../scope-rule.js';

/** The numbered migration files (`{{prefix}}` placeholders), for tools that print or copy them. */
/**
 * A store's `notify` on SQLite: never sent to the database. An operation yields it where it
 * made jobs acquirable, and the executor's `onWake` runs once the operation succeeded (this
 * process's own subscribers; other connections see `PRAGMA data_version` change).
 */
export const SQLITE_LOCAL_WAKE: Query = Object.freeze({
  sql: '-- wake local subscribers',
  params: [],
});

export const SQLITE_MIGRATION_FILES: Readonly<Record<string, string>> = MIGRATION_FILES.sqlite;

/**
 * The SQL function that reads an injected clock (epoch ms). A store with a clock other than the
 * machine's registers it on its connection:
 * `db.function(SQLITE_CLOCK_FUNCTION, { deterministic: true }, () => clock.now())`.
 * `deterministic` lets SQLite read it once per statement, as it reads `julianday('now')`.
 */
export const SQLITE_CLOCK_FUNCTION = 'jobs_now';

/** Epoch ms on the machine's clock, SQLite's own: ms precision, fixed for one statement. */
const MACHINE_NOW = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`;

export interface SqliteDialectOptions {
  /** Prefix of the store's table names. */
  tablePrefix: string;
  /**
   * The clock due times and leases are compared on (tests inject a `FakeClock`). Default: the
   * machine's, which is the database's own (it runs in this process). Another clock is read in
   * SQL through `SQLITE_CLOCK_FUNCTION`, which the executor must register.
   */
  clock?: Clock;
  /**
   * A former default prefix: `migrate()` renames that prefix's tables to `tablePrefix` when only
   * they exist (its version table and jobs table, and no version table under `tablePrefix`).
   */
  adoptPrefix?: string;
}

/** SQLite's busy error: another connection held the write lock past the busy timeout. */
function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_SNAPSHOT';
}

/** `[[id, token], …]` of `refs` as rows (id, token); ids as text, so all 64 bits survive. */
const REFS = `(SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS id,
    json_extract(value, '$[1]') AS token FROM json_each(?))`;
const refsJson = (refs: readonly JobRef[]): string =>
  JSON.stringify(refs.map((ref) => [ref.id, ref.token]));
const CLEAR_LOCK = `"lock_owner" = NULL, "lock_expires_at" = NULL, "lock_token" = NULL`;
/**
 * Rows per multi-row INSERT: 128 × 21 values, far under SQLite's 32,766 variables; bigger
 * statements saved nothing measurable.
 */
const MAX_INSERT_ROWS = 128;
/**
 * Insert columns with no default but NULL (optional fields of a job), by position in
 * `INSERT_JOB_COLUMNS`: a multi-row INSERT leaves out those null in all its rows.
 */
const OPTIONAL_COLUMNS: readonly number[] = (
  [
    'scope',
    'job_key',
    'tenant_id',
    'retry_policy',
    'schedule_name',
    'occurrence',
    'shard_index',
    'shard_count',
    'meta',
    'scope_limit',
    'timeout_ms',
  ] as const
).map((name) => INSERT_JOB_COLUMNS.indexOf(name));
const ALL_OPTIONAL = (1 << OPTIONAL_COLUMNS.length) - 1;
/** Column `i` of `INSERT_JOB_COLUMNS` is among the `skipped` optional ones. */
const COLUMN_MASK: readonly number[] = INSERT_JOB_COLUMNS.map((_, i) =>
  OPTIONAL_COLUMNS.includes(i) ? 1 << OPTIONAL_COLUMNS.indexOf(i) : 0,
);
const isSkipped = (i: number, skipped: number): boolean =>
  ((COLUMN_MASK[i] as number) & skipped) !== 0;
/** Ids up to this are exact as JavaScript numbers. */
const MAX_SAFE_ID = BigInt(Number.MAX_SAFE_INTEGER);
/** A row with every job column null, the base of a row built from what was written. */
const EMPTY_ROW: SqlRow = Object.fromEntries(JOB_COLUMN_NAMES.map((c) => [c, null]));

const quote = (identifier: string): string => `"${identifier}"`;
const ids = (rows: SqlRow[]): string[] => rows.map((row) => String(row.id));

/** Which leased rows a lease records as started, whatever their order (see `acquire`). */
type LeaseStarts = 'all' | 'retries' | 'none';
/** `started_at` as a lease writes it for its whole batch, given the clock's SQL. */
const LEASE_STARTS: Readonly<Record<LeaseStarts, (now: string) => string>> = {
  all: (now) => now,
  retries: (now) => `CASE WHEN "retries_left" > 0 THEN ${now} END`,
  none: () => 'NULL',
};
/**
 * The columns a lease returns as they are (of `LEASED_COLUMN_NAMES`, the columns it did not
 * write): those nearly every job has, and those the lease itself writes or reads back.
 */
const LEASED_PLAIN = [
  'id',
  'type',
  'payload',
  'priority',
  'due_at',
  'retries_left',
  'attempts',
  'queue',
  'created_at',
  'exclusive',
  'cancel_requested',
  'lock_expires_at',
  'started_at',
  'steps',
] as const;
/**
 * The other leased columns, null in most jobs: returned packed in one column, a JSON array in
 * this order, or null when every one is null. Each column a statement returns costs about
 * 0.13 µs a row in SQLite and better-sqlite3 whether null or not, so a plain job's 16 nulls
 * cost more than the one test that finds them all null (a drain of 43,000 jobs: the lease
 * statement 410 → 315 ms). A job with any of them pays one `json_array` and one JSON.parse.
 */
const LEASED_PACKED = LEASED_COLUMN_NAMES.filter(
  (name) => !(LEASED_PLAIN as readonly string[]).includes(name),
);
/** Where the packed column stands in a leased row: after the plain ones. */
const PACKED_AT = LEASED_PLAIN.length;
/**
 * A leased row's layout: the plain columns where they stand, every packed one at the packed
 * column — null there when all are null; else `leasedRow` writes them from its JSON.
 */
const LEASED_LAYOUT: JobRowLayout = Object.fromEntries(
  JOB_COLUMN_NAMES.map((name) => {
    const at = (LEASED_PLAIN as readonly string[]).indexOf(name);
    return [name, at >= 0 ? at : PACKED_AT];
  }),
) as JobRowLayout;
const LEASED_RETURNING = `RETURNING ${LEASED_PLAIN.map(quote).join(', ')},
  CASE WHEN ${LEASED_PACKED.map((name) => `${quote(name)} IS NULL`).join(' AND ')} THEN NULL
    ELSE json_array(${LEASED_PACKED.map(quote).join(', ')}) END AS "packed"`;

/** A leased row (`LEASED_RETURNING`) as a job row held by `lease`, its packed columns unpacked. */
function leasedRow(found: unknown, lease: { owner: string; token: string }): SqlRow {
  let row: SqlRow;
  let packed: unknown;
  if (Array.isArray(found)) {
    row = jobRowAt(found, 0, LEASED_LAYOUT, lease);
    packed = found[PACKED_AT];
  } else {
    // A driver without an array mode names its columns.
    const { packed: named, ...rest } = found as SqlRow;
    row = {
      ...EMPTY_ROW,
      ...rest,
      state: 'running',
      lock_owner: lease.owner,
      lock_token: lease.token,
    };
    packed = named;
  }
  if (packed !== null && packed !== undefined) {
    const values = JSON.parse(String(packed)) as unknown[];
    for (let i = 0; i < LEASED_PACKED.length; i++) {
      row[LEASED_PACKED[i] as string] = values[i];
    }
  }
  return row;
}

/** Leased rows in acquisition order (`rules.ts`). */
function inAcquisitionOrder(rows: readonly SqlRow[]): SqlRow[] {
  return rows
    .map((row) => ({
      row,
      priority: Number(row.priority),
      dueAt: new Date(Number(row.due_at)),
      id: String(row.id),
    }))
    .sort(compareAcquisitionOrder)
    .map((ranked) => ranked.row);
}

export function sqliteDialect(options: SqliteDialectOptions): Dialect {
  const { tablePrefix, adoptPrefix } = options;
  const clock = options.clock ?? systemClock;
  const NOW = clock === systemClock ? MACHINE_NOW : `${SQLITE_CLOCK_FUNCTION}()`;
  const name = (table: TableName, prefix = tablePrefix): string =>
    `${prefix}${tableBaseName(table)}`;
  const table = (t: TableName): string => quote(name(t));
  const jobs = table('jobs');
  const jobColumns = (alias?: string): string => selectList(JOB_COLUMN_NAMES, quote, {}, alias);
  /** The running row held with the token of the joined ref row `r`. */
  const held = (r: string): string =>
    `${jobs}."id" = ${r}.id AND ${jobs}."lock_token" = ${r}.token AND ${jobs}."state" = 'running'`;
  // `*`: the table's columns are exactly the job columns, and `*` is the cheaper RETURNING.
  const returning = 'RETURNING *';
  // Built once: an enqueue costs one prepared-statement lookup, not a string build.
  const insert = `INSERT INTO ${jobs} (${INSERT_JOB_COLUMNS.map(quote).join(', ')})`;
  const insertOne = `${insert} VALUES (${marks(INSERT_JOB_COLUMNS.length)})`;
  const insertRowsSql = new Map<string, string>();
  /**
   * `INSERT … VALUES (…), …` of `n` rows (a power of two) without the optional columns in
   * `skipped` (a bit per `OPTIONAL_COLUMNS` entry: null in every row, so left to their NULL
   * default, which binds nothing), built once per shape.
   */
  const insertRows = (n: number, skipped: number): string => {
    const shape = `${n}:${skipped}`;
    let sql = insertRowsSql.get(shape);
    if (sql === undefined) {
      const columns = INSERT_JOB_COLUMNS.filter((_, i) => !isSkipped(i, skipped));
      const one = `(${marks(columns.length)})`;
      sql = `INSERT INTO ${jobs} (${columns.map(quote).join(', ')}) VALUES ${Array.from({ length: n }, () => one).join(', ')}`;
      insertRowsSql.set(shape, sql);
    }
    return sql;
  };
  const insertKeyed = `${insertOne} ON CONFLICT ("job_key") WHERE "job_key" IS NOT NULL DO NOTHING ${returning}`;
  // An undefined payload is stored as JSON null, as the memory store keeps it.
  const completeSql = `DELETE FROM ${jobs} WHERE "id" IN (SELECT j."id" FROM ${REFS} r JOIN ${jobs} j
      ON j."id" = r.id AND j."lock_token" = r.token
      WHERE j."state" = 'running' AND j."cancel_requested" = 0)
    RETURNING "id"`;
  const recordCompleted = `${historyInsert(table('history'), 'j', `'completed'`, 'r.result', 'r.duration_ms', NOW)}
    FROM (SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS id,
        json_extract(value, '$[1]') AS token, json_extract(value, '$[2]') AS result,
        json_extract(value, '$[3]') AS duration_ms FROM json_each(?)) r
      JOIN ${jobs} j ON j."id" = r.id AND j."lock_token" = r.token
      WHERE j."state" = 'running' AND j."cancel_requested" = 0`;
  const markStartedSql = `UPDATE ${jobs} SET "started_at" = ${NOW}
    WHERE "id" IN (SELECT CAST(value AS INTEGER) FROM json_each(?)) RETURNING "id", "started_at"`;
  /**
   * Records as started the leased `rows` (updated in place) that the lease's batch-wide
   * `started_at` left out, by `rule` (`leaseStarts`) on their rank in acquisition order.
   * Usually none: then no statement, and no sort.
   */
  function* markStarted(rows: SqlRow[], rule: LeaseStartRule): Operation<void> {
    if (rule.withRetriesLeft <= 0 || !rows.some((r) => r.started_at === null)) return;
    const ranked = rows.length <= rule.always ? rows : inAcquisitionOrder(rows);
    const wanted = ranked
      .filter((r, rank) => r.started_at === null && rule.records(rank, Number(r.retries_left)))
      .map((r) => String(r.id));
    if (wanted.length === 0) return;
    const marked = (yield { sql: markStartedSql, params: [JSON.stringify(wanted)] }).rows;
    const at = new Map(marked.map((r) => [String(r.id), r.started_at]));
    for (const r of rows) {
      const startedAt = at.get(String(r.id));
      if (startedAt !== undefined) r.started_at = startedAt;
    }
  }

  // ---- the hot path: the statements `ops` runs ----
  const own = {
    *acquire(request: AcquireRequest, token: string): Operation<SqlRow[]> {
      const where = candidateWhere(d, request);
      const rule = leaseStarts(request, request.limit);
      // Recorded as started (`leaseStarts`): the first `always` in acquisition order, and those
      // ranked before `withRetriesLeft` with retries left. The lease writes what holds for its
      // whole batch whatever the order — every row, those with retries left, or none — and
      // `markStarted` records the rest by primary key, in this transaction. Numbering the batch
      // in the lease itself (a window over a joined subquery) cost ~9 % more per leased row,
      // and returning the columns the lease wrote (owner, token, state) ~8 % (instructions
      // counted under callgrind).
      const marked: LeaseStarts =
        rule.always >= request.limit
          ? 'all'
          : rule.withRetriesLeft >= request.limit
            ? 'retries'
            : 'none';
      const found = (yield {
        sql: `UPDATE ${jobs} SET "state" = 'running', "lock_owner" = ?, "lock_expires_at" = ${d.nowPlusMs},
            "lock_token" = ?, "attempts" = "attempts" + 1, "started_at" = ${LEASE_STARTS[marked](NOW)}
          WHERE "id" IN (SELECT j."id" FROM ${jobs} j
            WHERE ${where.sql} ORDER BY ${d.acquisitionOrder('j')} LIMIT ?)
          ${LEASED_RETURNING}`,
        params: [request.owner, request.leaseMs, token, ...where.params, request.limit],
        arrayRows: true,
      }).rows;
      const lease = { owner: request.owner, token };
      const rows = found.map((r) => leasedRow(r, lease));
      if (marked !== 'all') yield* markStarted(rows, rule);
      return rows;
    },
    *insertJobs(rows: readonly (readonly unknown[])[]): Operation<string[]> {
      // Multi-row `INSERT … VALUES (…), (…)` without RETURNING (about a fifth of an insert's
      // cost), in runs of 2^k rows (at most `MAX_INSERT_ROWS`) so that a handful of prepared
      // statements serve every batch size: per row, binding its values costs less than a call
      // of its own (and far less than an INSERT … SELECT from a JSON document, which parses
      // each row's JSON once per column). The ids returned are those written: one statement's
      // rows get consecutive ids (AUTOINCREMENT: each is the largest so far plus one), the
      // last of them reported as the insert id.
      const inserted: string[] = [];
      let from = 0;
      while (from < rows.length) {
        let n = MAX_INSERT_ROWS;
        while (n > rows.length - from) n >>= 1;
        // Optional columns null in every row of the run are left out of its statement.
        let skipped = ALL_OPTIONAL;
        for (let k = from; k < from + n && skipped !== 0; k++) {
          const values = rows[k] as readonly unknown[];
          for (let bit = 0; bit < OPTIONAL_COLUMNS.length; bit++) {
            if (values[OPTIONAL_COLUMNS[bit] as number] !== null) skipped &= ~(1 << bit);
          }
        }
        const params: unknown[] = [];
        for (let k = from; k < from + n; k++) {
          const values = rows[k] as readonly unknown[];
          for (let i = 0; i < values.length; i++) {
            if (skipped !== 0 && isSkipped(i, skipped)) continue;
            params.push(values[i]);
          }
        }
        const outcome = yield { sql: insertRows(n, skipped), params };
        if (outcome.insertId === null) {
          // A driver that does not report the id (TypeORM's query runner): read the ids back.
          const read = yield {
            sql: `SELECT "id" FROM ${jobs} WHERE "id" > last_insert_rowid() - ? ORDER BY "id"`,
            params: [n],
          };
          for (const row of read.rows) inserted.push(String(row.id));
        } else {
          const last = BigInt(outcome.insertId);
          const exact = last <= MAX_SAFE_ID; // ids as numbers, no BigInt per row
          for (let k = 0; k < n; k++) {
            inserted.push(
              exact ? String(Number(last) - (n - 1 - k)) : String(last - BigInt(n - 1 - k)),
            );
          }
        }
        from += n;
      }
      return inserted;
    },
    *insertJob(values: readonly unknown[]): Operation<SqlRow | null> {
      return (yield { sql: insertKeyed, params: values }).rows[0] ?? null;
    },
    // ---- settlement: one statement for a batch of any size ----
    *completeHeld(refs: readonly JobRef[]): Operation<string[]> {
      return ids((yield { sql: completeSql, params: [refsJson(refs)] }).rows);
    },
    // Two statements in the store's transaction (the write lock): copy the held rows, each
    // with its result and duration, then delete them.
    *completeHeldWithHistory(done: readonly JobCompletion[]): Operation<string[]> {
      const records = JSON.stringify(
        done.map((ref) => [ref.id, ref.token, ref.resultJson ?? null, durationOf(ref)]),
      );
      yield { sql: recordCompleted, params: [records] };
      return ids((yield { sql: completeSql, params: [records] }).rows);
    },
    *releaseHeld(refs: readonly JobRef[], notify: Query | null): Operation<string[]> {
      const released = ids(
        (yield {
          sql: `UPDATE ${jobs} SET "state" = 'async', "attempts" = "attempts" - 1, ${CLEAR_LOCK}
            FROM ${REFS} r WHERE ${held('r')} RETURNING "id"`,
          params: [refsJson(refs)],
        }).rows,
      );
      if (notify && released.length > 0) yield notify;
      return released;
    },
    // Allowed after expiry while the token matches: nobody else has taken the job.
    // The progress (JSON text, null for unchanged) rides in the same statement.
    *renewHeld(
      owner: string,
      leaseMs: number,
      refs: readonly LeaseRenewalRef[],
    ): Operation<RenewAnswer> {
      const rows = (yield {
        sql: `UPDATE ${jobs} SET "lock_expires_at" = ${d.nowPlusMs},
            "progress" = coalesce(r.progress, ${jobs}."progress"),
            "logs" = coalesce(r.logs, ${jobs}."logs"),
            "started_at" = CASE WHEN r.start = 1 THEN coalesce(${jobs}."started_at", ${NOW})
              WHEN r.start = 0 THEN NULL ELSE ${jobs}."started_at" END
          FROM (SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS id,
              json_extract(value, '$[1]') AS token, json_extract(value, '$[2]') AS progress,
              json_extract(value, '$[3]') AS start, json_extract(value, '$[4]') AS logs
            FROM json_each(?)) r
          WHERE ${held('r')} AND ${jobs}."lock_owner" = ? RETURNING "id", "cancel_requested"`,
        params: [
          leaseMs,
          JSON.stringify(
            refs.map((ref) => [
              ref.id,
              ref.token,
              ref.progressJson ?? null,
              ref.start ?? null,
              ref.logsJson ?? null,
            ]),
          ),
          owner,
        ],
      }).rows;
      return {
        renewed: ids(rows),
        cancelRequested: ids(rows.filter((row) => Number(row.cancel_requested) === 1)),
      };
    },
    // Each checkpoint fenced by its own token, as `operations/steps.ts` writes one.
    *saveSteps(saves: readonly StepSave[]): Operation<string[]> {
      const saved = new Set(
        ids(
          (yield {
            sql: `UPDATE ${jobs} SET "steps" = s.steps
              FROM (SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS id,
                  json_extract(value, '$[1]') AS token, json_extract(value, '$[2]') AS steps
                FROM json_each(?)) s
              WHERE ${held('s')} RETURNING "id"`,
            params: [
              JSON.stringify(saves.map((save) => [save.ref.id, save.ref.token, save.stepsJson])),
            ],
          }).rows,
        ),
      );
      return saves.filter((save) => !saved.has(save.ref.id)).map((save) => save.ref.id);
    },
    *failHeld(failures: readonly JobFailure[]): Operation<string[]> {
      const rows = failures.map((f) => [
        f.id,
        f.token,
        f.deadletter ? 1 : 0,
        Math.max(0, Math.round(f.retryDelayMs)),
        f.error.message,
        f.error.stack,
      ]);
      return ids(
        (yield {
          sql: `UPDATE ${jobs}
            SET "state" = CASE WHEN f.dead THEN 'deadletter' ELSE 'timer' END,
              "due_at" = CASE WHEN f.dead THEN ${jobs}."due_at" ELSE ${NOW} + f.delay END,
              "retries_left" = ${jobs}."retries_left" - CASE WHEN f.dead THEN 0 ELSE 1 END,
              ${CLEAR_LOCK}, "last_error_message" = f.message, "last_error_stack" = f.stack
            FROM (SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS id,
                json_extract(value, '$[1]') AS token, json_extract(value, '$[2]') AS dead,
                json_extract(value, '$[3]') AS delay, json_extract(value, '$[4]') AS message,
                json_extract(value, '$[5]') AS stack FROM json_each(?)) f
            WHERE ${held('f')} AND ${jobs}."cancel_requested" = 0 RETURNING "id"`,
          params: [JSON.stringify(rows)],
        }).rows,
      );
    },
    // The expiry is checked again in the UPDATE itself: a renewal that won the race keeps its job.
    // A job whose handler never started goes back with its attempt given back, its retries and
    // last error untouched; cancel-requested jobs are `recoverCancelled`'s, never requeued here.
    *recoverExpiredLeases(limit: number, notify: Query | null): Operation<RecoverResult> {
      const expired = `"state" = 'running' AND "lock_expires_at" <= ${NOW} AND "cancel_requested" = 0`;
      const unstarted = '"started_at" IS NULL';
      const rows = (yield {
        sql: `UPDATE ${jobs}
          SET "state" = CASE WHEN ${unstarted} OR "retries_left" > 0 THEN 'async' ELSE 'deadletter' END,
            "retries_left" = "retries_left"
              - CASE WHEN NOT ${unstarted} AND "retries_left" > 0 THEN 1 ELSE 0 END,
            "attempts" = "attempts" - CASE WHEN ${unstarted} THEN 1 ELSE 0 END,
            ${CLEAR_LOCK},
            "last_error_message" = CASE WHEN ${unstarted} THEN "last_error_message" ELSE ? END,
            "last_error_stack" = CASE WHEN ${unstarted} THEN "last_error_stack" END
          WHERE "id" IN (SELECT "id" FROM ${jobs} WHERE ${expired}
              ORDER BY "lock_expires_at", "id" LIMIT ?) AND ${expired}
          RETURNING "id", "state", "started_at"`,
        params: [LEASE_EXPIRED_MESSAGE, limit],
      }).rows.sort((a, b) => Number(a.id) - Number(b.id));
      const requeued: string[] = [];
      const deadlettered: string[] = [];
      const released: string[] = [];
      for (const row of rows) {
        const out =
          row.started_at === null ? released : row.state === 'deadletter' ? deadlettered : requeued;
        out.push(String(row.id));
      }
      if (notify && requeued.length + released.length > 0) yield notify;
      return recoverResult(requeued, deadlettered, released);
    },
  };
  const d: Dialect = {
    name: 'sqlite',
    table,
    quote,
    sql: (text) => text,
    placeholders: (sql) => sql,
    now: NOW,
    nowPlusMs: `(${NOW} + CAST(ROUND(?) AS INTEGER))`,
    clockNow: () => new Date(clock.now()),
    TRUE: '1',
    FALSE: '0',
    time: (date) => date.getTime(),
    bool: (value) => (value ? 1 : 0),
    timeText: (expression) => expression,
    jobColumns,
    scheduleColumns: selectList(SCHEDULE_COLUMN_NAMES, quote),
    latestRead: '',
    setup: [],
    returning: true,
    lockSkipLocked: '',
    forUpdate: '',
    acquisitionOrder: acquisitionOrderBy(false),
    // SQLite takes row values only against a subquery.
    pairs: (n) => `VALUES ${Array.from({ length: n }, () => '(?, ?)').join(', ')}`,
    onConflictDoNothing: (column) => ` ON CONFLICT (${quote(column)}) DO NOTHING`,
    isDuplicateKey: (error) =>
      (error as { code?: unknown } | null)?.code === 'SQLITE_CONSTRAINT_UNIQUE' ||
      (error as { code?: unknown } | null)?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY',
    isRetryable: isBusy,
    wakeQuery: () => SQLITE_LOCAL_WAKE,
    probeBeforeAcquire: true,
    recursiveSkipScan: true,
    migrations: loadMigrations(SQLITE_MIGRATION_FILES, { prefix: tablePrefix }),
    versionTable: `CREATE TABLE IF NOT EXISTS ${table('migrations')} ("version" INTEGER PRIMARY KEY, "applied_at" INTEGER NOT NULL)`,
    recordVersion: (migration: Migration): Query => ({
      sql: `INSERT INTO ${table('migrations')} ("version", "applied_at") VALUES (?, ${NOW})`,
      params: [migration.version],
    }),
    // BEGIN IMMEDIATE around the migration is the lock.
    migrateLock: { lock: [], unlock: [], transactional: true },
    *beforeMigrate(): Operation<void> {
      if (adoptPrefix === undefined || adoptPrefix === tablePrefix) return;
      const tables = ['jobs', 'schedules', 'migrations'] as const;
      const old = (t: TableName): string => name(t, adoptPrefix);
      const found = new Set(
        (yield {
          sql: `SELECT "name" FROM sqlite_master WHERE "type" = 'table' AND "name" IN (?, ?, ?, ?)`,
          params: [name('migrations'), ...tables.map(old)],
        }).rows.map((r) => String(r.name)),
      );
      // Only the old names: their version and jobs tables, and no version table of our own.
      if (found.has(name('migrations')) || !found.has(old('jobs'))) return;
      if (!found.has(old('migrations'))) return;
      // Indexes follow their table and keep working; 0002 recreates them under the new prefix.
      for (const t of tables) {
        if (!found.has(old(t))) continue;
        yield { sql: `ALTER TABLE ${quote(old(t))} RENAME TO ${table(t)}`, params: [] };
      }
    },
    ops: {
      enqueue: enqueueRowByRow({
        insertJobs: own.insertJobs,
        insertJob: own.insertJob,
        // One keyless job is one INSERT statement, atomic without a transaction of its own
        // (`BEGIN IMMEDIATE` … `COMMIT` would cost two more statements and a lock round).
        oneStatement: (batch) => batch.length === 1 && (batch[0]?.key ?? null) === null,
      }),
      // The write lock up front, and complete + acquire in one commit (as `@jobs/sqlite` always did).
      acquire: { run: (_, request, token) => own.acquire(request, token), transaction: true },
      acquireLocked: null,
      completeAndAcquire: null,
      // ---- settlement: one statement for a batch of any size ----
      complete: { run: (_, refs) => own.completeHeld(refs), transaction: false },
      // Two statements: in the store's transaction (the write lock).
      completeWithHistory: {
        run: (_, done) => own.completeHeldWithHistory(done),
        transaction: true,
      },
      // One statement; several failures in one transaction, as they always were.
      fail: { run: (_, failures) => own.failHeld(failures), transaction: (_, f) => f.length > 1 },
      release: { run: (c, refs) => own.releaseHeld(refs, c.notify), transaction: false },
      renew: {
        run: (_, owner, leaseMs, refs) => own.renewHeld(owner, leaseMs, refs),
        transaction: false,
      },
      recover: { run: (c, limit) => own.recoverExpiredLeases(limit, c.notify), transaction: false },
      // One statement for the batch.
      saveSteps: { run: (_, saves) => own.saveSteps(saves), transaction: false },
    },
  };
  return d;
}

/**
 * Wakes subscribers when ANOTHER connection or process commits to the file: `PRAGMA
 * data_version` changes then (never for the connection's own commits). It is a counter in
 * shared memory, so checking it every few ms reads no pages; a wake-up that finds nothing due
 * costs one read, never the write lock.
 *
 * With `walFile` (the database's `-wal` file), a change of that file (inotify, FSEvents …) is an
 * early trigger besides: a commit writes it, so the counter is read at once instead of at the
 * next interval. An idle file sends no events, so this costs nothing while idle; the interval
 * stays the fallback (no WAL file yet, a platform without file events, a missed event).
 */
/**
 * Statements of this process in one watcher interval above which the `-wal` file is not
 * watched (its own commits would each raise a file event): an idle or moderately busy engine
 * runs a few per interval.
 */
const BUSY_STATEMENTS = 20;

export class SqliteCommitWatcher extends ChangeWatcher<number> {
  private fileWatcher: FSWatcher | null = null;
  private watching = false;
  private activityAtTick = 0;

  /**
   * `dataVersion` reads `PRAGMA data_version`, or returns null once the connection is gone.
   * `activity` counts the statements this process runs on the file: while it runs more than
   * `BUSY_STATEMENTS` an interval, its own commits would raise a file event each (a cost in
   * every write), so the file is not watched until an interval is quiet again; the poll
   * stands in meanwhile, as it did before there was a watch.
   */
  constructor(
    dataVersion: () => number | null,
    intervalMs: number,
    private readonly walFile: string | null = null,
    private readonly activity: () => number = () => 0,
  ) {
    super(dataVersion, intervalMs);
  }

  /** The `-wal` file is being watched now (for tests). */
  get watchingFile(): boolean {
    return this.fileWatcher !== null;
  }

  protected override started(): void {
    this.watching = true;
    this.activityAtTick = this.activity();
    this.watchFile();
  }

  protected override stopped(): void {
    this.watching = false;
    this.unwatchFile();
  }

  protected override tick(): void {
    const now = this.activity();
    const busy = now - this.activityAtTick > BUSY_STATEMENTS;
    this.activityAtTick = now;
    if (busy) this.unwatchFile();
    else if (this.watching && this.fileWatcher === null) this.watchFile();
  }

  private watchFile(): void {
    if (this.walFile === null || this.fileWatcher !== null) return;
    try {
      // Not persistent: watching never keeps the process alive.
      const watcher = watch(this.walFile, { persistent: false }, () => this.checkSoon());
      watcher.on('error', () => {
        watcher.close();
        if (this.fileWatcher === watcher) this.fileWatcher = null;
      });
      this.fileWatcher = watcher;
    } catch {
      // No WAL file (yet), or no file events here: the interval alone.
      this.fileWatcher = null;
    }
  }

  private unwatchFile(): void {
    this.fileWatcher?.close();
    this.fileWatcher = null;
  }
}

/** The parts of a better-sqlite3 `Database` the SQL core drives (core does not depend on it). */
export interface SqliteConnection {
  readonly inTransaction: boolean;
  prepare(sql: string): SqliteStatement;
}

/** The parts of a better-sqlite3 `Statement` the SQL core uses. */
export interface SqliteStatement {
  /** The statement returns rows (a SELECT, or a write with RETURNING). */
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  /** Rows as arrays (better-sqlite3): the runner builds the objects itself, faster. */
  raw?(on: boolean): unknown;
  columns?(): { name: string }[];
}

/** A prepared statement, with the function that makes a row object of its array rows. */
interface Prepared {
  statement: SqliteStatement;
  toRow: ((values: unknown[]) => SqlRow) | null;
}

/**
 * A function that makes a row object of a statement's array row. better-sqlite3 builds each
 * row object through V8's C++ API, ~4 µs for a 28-column job row, most of an acquisition's
 * cost per job; an object literal of fixed shape costs a tenth of that. Null when the
 * statement has no array mode, or code generation is off: the driver's rows are used then.
 */
function rowMaker(statement: SqliteStatement): Prepared['toRow'] {
  if (!statement.reader || !statement.raw || !statement.columns) return null;
  const names = statement.columns().map((column) => column.name);
  // A literal's `__proto__` key would set the prototype instead of a property.
  if (names.includes('__proto__')) return null;
  try {
    const make = new Function(
      'v',
      `return {${names.map((name, i) => `${JSON.stringify(name)}: v[${i}]`).join(', ')}};`,
    ) as Prepared['toRow'];
    statement.raw(true);
    return make;
  } catch {
    return null; // --disallow-code-generation-from-strings
  }
}

const BEGIN: Query = { sql: 'BEGIN IMMEDIATE', params: [] };
const COMMIT: Query = { sql: 'COMMIT', params: [] };
const ROLLBACK: Query = { sql: 'ROLLBACK', params: [] };
// Inside a transaction someone else opened (the caller's), the work is a savepoint in it.
const SAVEPOINT: Query = { sql: 'SAVEPOINT jobs_sql', params: [] };
const RELEASE: Query = { sql: 'RELEASE jobs_sql', params: [] };
const UNDO: Query = { sql: 'ROLLBACK TO jobs_sql', params: [] };

/**
 * Runs statements synchronously on a better-sqlite3 connection, for `@jobs/sqlite` and
 * `@jobs/typeorm`: statements of the store's own connection are prepared once and kept (the
 * texts vary only with list lengths); reads return rows, writes their change count and last
 * rowid. A transaction is `BEGIN IMMEDIATE` (the write lock up front: no reader upgrades into
 * a busy deadlock), and being synchronous, nothing else uses the connection until COMMIT.
 */
/** Texts of `Query.planEachTime` statements a runner keeps prepared. */
const PER_CALL_STATEMENTS = 200;

export class SqliteSyncRunner {
  private readonly statements = new Map<string, Prepared>();
  /** Statements whose text is made for one call's list (`Query.planEachTime`), kept apart. */
  private readonly perCall = new Map<string, Prepared>();
  private cachedFor: SqliteConnection | null = null;

  /** `own`: the store's connection (read on each use: an app may reconnect it). */
  constructor(
    private readonly own: () => SqliteConnection,
    private readonly maxStatements = 500,
  ) {}

  /** Runs one statement on `db` (default: the store's own connection). */
  execute(query: Query, db: SqliteConnection = this.own()): QueryOutcome {
    // Texts made for one call's list (`planEachTime`) are kept apart: in the one cache they
    // would push the hot path's statements out.
    const { statement, toRow } = this.prepare(db, query.sql, query.planEachTime === true);
    if (statement.reader) {
      const found = statement.all(...query.params);
      // In array mode already (see `rowMaker`): a query that asks for arrays gets them as they are.
      const rows =
        toRow && query.arrayRows !== true ? (found as unknown[][]).map(toRow) : (found as SqlRow[]);
      return { rows, affected: rows.length, insertId: null };
    }
    const info = statement.run(...query.params);
    return { rows: [], affected: info.changes, insertId: String(info.lastInsertRowid) };
  }

  /** Runs `work` between BEGIN IMMEDIATE and COMMIT (a savepoint when `db` is in one already). */
  transaction<T>(work: () => T, db: SqliteConnection = this.own()): T {
    const nested = db.inTransaction;
    this.execute(nested ? SAVEPOINT : BEGIN, db);
    try {
      const result = work();
      this.execute(nested ? RELEASE : COMMIT, db);
      return result;
    } catch (error) {
      // SQLite may have rolled back already (a busy COMMIT, a full disk).
      if (db.inTransaction) {
        if (nested) {
          this.execute(UNDO, db);
          this.execute(RELEASE, db);
        } else {
          this.execute(ROLLBACK, db);
        }
      }
      throw error;
    }
  }

  private prepare(db: SqliteConnection, sql: string, perCall = false): Prepared {
    const own = this.own();
    if (db !== own) return { statement: db.prepare(sql), toRow: null };
    if (this.cachedFor !== own) {
      this.statements.clear();
      this.perCall.clear();
      this.cachedFor = own;
    }
    const cache = perCall ? this.perCall : this.statements;
    let prepared = cache.get(sql);
    if (!prepared) {
      const statement = db.prepare(sql);
      prepared = { statement, toRow: rowMaker(statement) };
      cache.set(sql, prepared);
      if (cache.size > (perCall ? PER_CALL_STATEMENTS : this.maxStatements)) {
        cache.delete(cache.keys().next().value as string);
      }
    }
    return prepared;
  }
}
