/**
 * SQLite (better-sqlite3), for `@jobs/sqlite` and `@jobs/typeorm`: times are INTEGER epoch ms,
 * booleans 0/1, JSON is TEXT. The database runs in this process and has one write lock, so
 * operations run synchronously and writers queue on `BEGIN IMMEDIATE` (no row locks to skip).
 * Batches — new rows, job refs, failures — travel as ONE JSON parameter read with `json_each`,
 * so a batch of any size is one prepared statement.
 */
import { type Clock, systemClock } from '../../clock.js';
import type {
  AcquireRequest,
  JobCompletion,
  JobFailure,
  JobRef,
  LeaseRenewalRef,
  RecoverResult,
} from '../../store.js';
import { ChangeWatcher } from '../change-watcher.js';
import {
  type Dialect,
  JOB_COLUMN_NAMES,
  marks,
  SCHEDULE_COLUMN_NAMES,
  selectList,
  type TableName,
  tableBaseName,
} from '../dialect.js';
import type { Operation, Query, QueryOutcome } from '../executor.js';
import { durationOf, historyInsert } from '../history-rows.js';
import { loadMigrations, type Migration } from '../migrate.js';
import init from '../migrations/sqlite/0001_init.sql';
import oneSchema from '../migrations/sqlite/0002_one_schema.sql';
import acquireIndexes from '../migrations/sqlite/0003_acquire_indexes.sql';
import history from '../migrations/sqlite/0004_history.sql';
import jobMeta from '../migrations/sqlite/0005_job_meta.sql';
import cancelProgress from '../migrations/sqlite/0006_cancel_progress.sql';
import flowLimits from '../migrations/sqlite/0007_flow_limits.sql';
import blockedSet from '../migrations/sqlite/0008_blocked_set.sql';
import { INSERT_JOB_COLUMNS, LEASE_EXPIRED_MESSAGE, type SqlRow } from '../rows.js';
import { ACQUIRE_ORDER, candidateWhere } from '../scope-rule.js';

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

export const SQLITE_MIGRATION_FILES: Readonly<Record<string, string>> = {
  '0001_init': init,
  '0002_one_schema': oneSchema,
  '0003_acquire_indexes': acquireIndexes,
  '0004_history': history,
  '0005_job_meta': jobMeta,
  '0006_cancel_progress': cancelProgress,
  '0007_flow_limits': flowLimits,
  '0008_blocked_set': blockedSet,
};

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
const PAYLOAD = INSERT_JOB_COLUMNS.indexOf('payload');
/** A row with every job column null, the base of a row built from what was written. */
const EMPTY_ROW: SqlRow = Object.fromEntries(JOB_COLUMN_NAMES.map((c) => [c, null]));

const quote = (identifier: string): string => `"${identifier}"`;
const ids = (rows: SqlRow[]): string[] => rows.map((row) => String(row.id));

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
  const row = (values: readonly unknown[]): unknown[] =>
    values.map((v, i) => (i === PAYLOAD && v === undefined ? 'null' : v));

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
    *acquire(request: AcquireRequest, token: string): Operation<SqlRow[]> {
      const where = candidateWhere(d, request);
      return (yield {
        sql: `UPDATE ${jobs} SET "state" = 'running', "lock_owner" = ?, "lock_expires_at" = ${d.nowPlusMs},
            "lock_token" = ?, "attempts" = "attempts" + 1
          WHERE "id" IN (SELECT j."id" FROM ${jobs} j WHERE ${where.sql} ${ACQUIRE_ORDER} LIMIT ?)
          ${returning}`,
        params: [request.owner, request.leaseMs, token, ...where.params, request.limit],
      }).rows;
    },
    // The write lock up front, and complete + acquire in one commit (as `@jobs/sqlite` always did).
    acquireInTransaction: true,
    lockKeys: () => null,
    *insertJobs(rows: readonly (readonly unknown[])[]): Operation<SqlRow[]> {
      // One prepared INSERT per row, in the operation's transaction, without RETURNING (about a
      // fifth of an insert's cost): in-process calls cost less than a multi-row INSERT … SELECT
      // from a JSON document, which parses each row's JSON once per column. The rows are what
      // was written, plus their ids (in input order, so ids follow it).
      const inserted: SqlRow[] = [];
      for (const values of rows) {
        const params = row(values);
        const { insertId } = yield { sql: insertOne, params };
        if (insertId === null) {
          // A driver that does not report the id (TypeORM's query runner): read the row back.
          const read = yield {
            sql: `SELECT * FROM ${jobs} WHERE "id" = last_insert_rowid()`,
            params: [],
          };
          inserted.push(...read.rows);
          continue;
        }
        const written: SqlRow = { ...EMPTY_ROW, id: insertId };
        for (let i = 0; i < INSERT_JOB_COLUMNS.length; i++) {
          written[INSERT_JOB_COLUMNS[i] as string] = params[i];
        }
        inserted.push(written);
      }
      return inserted;
    },
    *insertJob(values: readonly unknown[]): Operation<SqlRow | null> {
      return (yield { sql: insertKeyed, params: row(values) }).rows[0] ?? null;
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
    *renewHeld(owner: string, leaseMs: number, refs: readonly LeaseRenewalRef[]) {
      const rows = (yield {
        sql: `UPDATE ${jobs} SET "lock_expires_at" = ${d.nowPlusMs},
            "progress" = coalesce(r.progress, ${jobs}."progress")
          FROM (SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS id,
              json_extract(value, '$[1]') AS token, json_extract(value, '$[2]') AS progress
            FROM json_each(?)) r
          WHERE ${held('r')} AND ${jobs}."lock_owner" = ? RETURNING "id", "cancel_requested"`,
        params: [
          leaseMs,
          JSON.stringify(refs.map((ref) => [ref.id, ref.token, ref.progressJson ?? null])),
          owner,
        ],
      }).rows;
      return {
        renewed: ids(rows),
        cancelRequested: ids(rows.filter((row) => Number(row.cancel_requested) === 1)),
      };
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
    *recoverExpiredLeases(limit: number, notify: Query | null): Operation<RecoverResult> {
      const expired = `"state" = 'running' AND "lock_expires_at" <= ${NOW}`;
      const rows = (yield {
        sql: `UPDATE ${jobs}
          SET "state" = CASE WHEN "retries_left" > 0 THEN 'async' ELSE 'deadletter' END,
            "retries_left" = "retries_left" - CASE WHEN "retries_left" > 0 THEN 1 ELSE 0 END,
            ${CLEAR_LOCK},
            "last_error_message" = ?, "last_error_stack" = NULL
          WHERE "id" IN (SELECT "id" FROM ${jobs} WHERE ${expired}
              ORDER BY "lock_expires_at", "id" LIMIT ?) AND ${expired}
          RETURNING "id", "state"`,
        params: [LEASE_EXPIRED_MESSAGE, limit],
      }).rows.sort((a, b) => Number(a.id) - Number(b.id));
      const result: RecoverResult = { requeued: [], deadlettered: [] };
      for (const row of rows) {
        (row.state === 'deadletter' ? result.deadlettered : result.requeued).push(String(row.id));
      }
      if (notify && result.requeued.length > 0) yield notify;
      return result;
    },
  };
  return d;
}

/**
 * Wakes subscribers when ANOTHER connection or process commits to the file: `PRAGMA
 * data_version` changes then (never for the connection's own commits). It is a counter in
 * shared memory, so checking it every few ms reads no pages; a wake-up that finds nothing due
 * costs one read, never the write lock.
 */
export class SqliteCommitWatcher extends ChangeWatcher<number> {
  /** `dataVersion` reads `PRAGMA data_version`, or returns null once the connection is gone. */
  constructor(dataVersion: () => number | null, intervalMs: number) {
    super(dataVersion, intervalMs);
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
      const rows = toRow ? (found as unknown[][]).map(toRow) : (found as SqlRow[]);
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
