/**
 * What differs between the databases the SQL core runs on. The operations (`operations/*.ts`)
 * are written once against this interface; a dialect holds only SQL text, how values are
 * written, capability flags, and the statements a database does best its own way (PostgreSQL's
 * one-statement `completeAndAcquire`, MySQL's lock-then-update acquisition, SQLite's
 * `BEGIN IMMEDIATE`) as members — never as branches on a database name.
 *
 * Shared SQL is written with `"double-quoted"` identifiers and `?` parameters; `sql()` and
 * `placeholders()` turn it into the dialect's own.
 */
import type {
  AcquireRequest,
  EnqueueResult,
  JobCompletion,
  JobFailure,
  JobRef,
  LeaseRenewalRef,
  NewJob,
  RecoverResult,
} from '../store.js';
import type { Operation, Query } from './executor.js';
import type { LockRetries } from './lock-retries.js';
import type { Migration } from './migrate.js';
import type { SqlRow, SqlValue } from './rows.js';

export type TableName = 'jobs' | 'schedules' | 'migrations' | 'history' | 'rate_limits';

export interface Dialect {
  /** The database, for messages and store names: `postgres`, `mysql`, `sqlite`. */
  readonly name: string;
  /** Quoted, schema-qualified name of one of the store's tables. */
  table(name: TableName): string;
  /** Quotes an identifier. */
  quote(identifier: string): string;
  /** Rewrites shared SQL (written with `"identifiers"`) into the dialect's quoting. */
  sql(text: string): string;
  /** Turns `?` placeholders into the driver's (`$1` on PostgreSQL). */
  placeholders(sql: string): string;

  // ---- values and time ----
  /** SQL expression for the database's now. */
  readonly now: string;
  /** SQL expression for now + `?` milliseconds (one parameter). */
  readonly nowPlusMs: string;
  /**
   * The database's now without a statement, where the store knows its clock in this process
   * (SQLite runs in-process: the machine's clock, or the store's injected one). `now()` and
   * enqueue then send no `SELECT now`.
   */
  clockNow?(): Date;
  /** SQL literals for booleans. */
  readonly TRUE: string;
  readonly FALSE: string;
  /** How a time parameter is written. */
  time(date: Date): SqlValue;
  /** How a boolean parameter is written. */
  bool(value: boolean): SqlValue;
  /** A time expression (a column, `now`) as a value the driver returns without shifting it. */
  timeText(expression: string): string;
  /**
   * A JSON column as text, where the driver would parse it itself (PostgreSQL `jsonb`: a JSON
   * string would come back bare). Absent: the column is read as it is.
   */
  jsonText?(expression: string): string;

  // ---- reading rows ----
  /** Select list for job rows with the column names `rowToJob` reads (columns of `alias`). */
  jobColumns(alias?: string): string;
  /** Select list for schedule rows with the column names `rowToSchedule` reads. */
  readonly scheduleColumns: string;
  /** Suffix of a read that must see the latest committed rows inside any transaction. */
  readonly latestRead: string;
  /**
   * A read of the jobs table's row count from the database's statistics, one row with column
   * `n` (null, or no row, when there is none). Absent where the database keeps none (SQLite).
   */
  readonly estimateJobs?: Query;

  // ---- capabilities ----
  /** `UPDATE/DELETE … RETURNING` works (PostgreSQL, SQLite; not MySQL/MariaDB). */
  readonly returning: boolean;
  /** The store's `StoreCapabilities.batchLimit` unless the store says otherwise. */
  readonly batchLimit?: number;
  /**
   * Suffix of a read that locks the rows it returns, skipping rows other transactions hold
   * (`FOR UPDATE SKIP LOCKED`); empty where writers are serialised anyway (SQLite).
   */
  readonly lockSkipLocked: string;
  /** `(?, ?), (?, ?)` row values for `("id", "lock_token") IN (…)` of `n` pairs. */
  pairs(n: number): string;
  /**
   * The clause that turns a duplicate primary or unique key of an INSERT into "nothing
   * inserted" (`ON CONFLICT (col) DO NOTHING`), or `''` where the duplicate-key error is caught
   * instead (MySQL: `INSERT IGNORE` would also hide values the column cannot hold).
   */
  onConflictDoNothing(column: string): string;
  /** True for the database's duplicate-key error, however a driver wrapped it. */
  isDuplicateKey(error: unknown): boolean;
  /** True for errors after which a whole operation may be run again (deadlock, lock wait). */
  isRetryable(error: unknown): boolean;
  /**
   * A store's policy for those retries: jittered backoff, bounded in count and time, counted
   * (MySQL/MariaDB, where InnoDB deadlocks are routine). Absent: retried at once, a few times.
   */
  lockRetries?(): LockRetries;
  /**
   * The statement that wakes engines elsewhere, sent in the transaction that made jobs due
   * (`SqlJobStoreOptions.notify`): PostgreSQL's `pg_notify(channel)`, SQLite's local wake-up
   * (other connections see `PRAGMA data_version` change); absent or null where engines poll a
   * wake signal instead (MySQL).
   */
  wakeQuery?(channel: string): Query | null;
  /**
   * Acquisition takes the database's one write lock (SQLite): a plain read first says whether
   * anything is due, so an idle poll never takes or waits for the lock.
   */
  readonly probeBeforeAcquire: boolean;
  /**
   * A subquery's `LIMIT` may read the outer row (PostgreSQL): the scope rule then asks "is this
   * row among the scope's first `N - running`" as one ordered probe (see `scope-rule.ts`).
   */
  readonly correlatedLimit?: boolean;
  /**
   * Rows have the generated `neg_priority` (`-priority`) that ascending indexes order by
   * (MySQL/MariaDB): the scope rule compares priorities through it, so its probes are ranges.
   */
  readonly negPriority?: boolean;
  /**
   * A parameter that takes a whole array of `type` (PostgreSQL: `?::text[]`): shared statements
   * over lists then keep one text, prepared once, whatever the list's length.
   */
  arrayParam?(type: 'text' | 'bigint'): string;
  /**
   * A recursive CTE whose step probes an index for the first entry after the row before
   * (`WHERE scope > s.scope ORDER BY scope LIMIT 1`) reads only that entry: a skip scan over a
   * scope index (PostgreSQL, SQLite; MariaDB reads the range from its start on each step).
   */
  readonly recursiveSkipScan?: boolean;
  /**
   * Written after the jobs table's alias where a read asks for one scope's rows of one state
   * (MySQL/MariaDB: `FORCE INDEX (ix_jobs_scope_blocked)`, whose `(scope, state, …)` the
   * optimizer otherwise passes over for `(scope)`, reading the scope's whole backlog).
   */
  readonly scopeIndexHint?: string;

  // ---- schema ----
  /** Numbered schema migrations, oldest first (see `migrate.ts`). */
  readonly migrations: readonly Migration[];
  /** Statements run before anything else by every migrate (e.g. `CREATE SCHEMA IF NOT EXISTS`). */
  readonly setup: readonly string[];
  /** DDL of the version table, `IF NOT EXISTS`. */
  readonly versionTable: string;
  /** The INSERT that records an applied migration in the version table. */
  recordVersion(migration: Migration): Query;
  /**
   * Statements that take (and, for MySQL, release) the cross-process migration lock. `lock`
   * runs first; `unlock` after the migration, also when it failed. `transactional`: the
   * migration runs in one transaction (DDL is transactional there).
   */
  readonly migrateLock: { lock: Query[]; unlock: Query[]; transactional: boolean };
  /**
   * Runs under the migration lock before the applied versions are read: adopts tables an older
   * release named otherwise (renames them), so they are migrated, not created anew beside them.
   */
  beforeMigrate?(): Operation<void>;

  // ---- the hot path, each database its own way ----
  /**
   * Leases due jobs (see `JobStore.acquire`); rows may carry `old_state`. It is the last step of
   * its run, and may end the transaction itself (COMMIT) to release session locks after the
   * commit (MySQL's per-scope `GET_LOCK`); the executor's COMMIT then finds nothing to do.
   */
  acquire(request: AcquireRequest, token: string): Operation<SqlRow[]>;
  /** `acquire` needs a transaction (it locks, then updates). */
  readonly acquireInTransaction: boolean;
  /**
   * How `nextDueAt` reads waiting rows (alias `j`) in due order where the shared
   * `MIN(due_at) … WHERE state IN (…)` would not use an index (MySQL: the index is on the
   * generated `waiting` column): the table with its index named, and the waiting predicate. The
   * read is then `ORDER BY j.due_at LIMIT 1`, one index entry for the first matching row.
   */
  readonly dueOrder?: { from: string; waiting: string };
  /**
   * Where the database cannot notify (MySQL): one cheap read, column `v`, whose value changes
   * when another connection adds jobs. A store's `subscribe` reads it every few milliseconds
   * (`ChangeWatcher`) and wakes its engines on a change, instead of each idle engine polling
   * with acquisitions.
   */
  readonly wakeSignal?: Query;
  /**
   * Where exclusive jobs need a lock before they are decided (PostgreSQL): `acquire` and
   * `completeAndAcquire` take only non-exclusive jobs, and when an exclusive job could start
   * they take nothing and return one row with `needs_exclusive: true` (and no `id`). This
   * member, run in its own transaction, then acquires under per-scope locks.
   */
  acquireExclusive?(request: AcquireRequest, token: string): Operation<SqlRow[]>;
  /**
   * Completes `done` (all valid ids, at most 1,000) and acquires in ONE statement, where the
   * database can (PostgreSQL). Returns the ids it deleted and the acquired rows. `history`:
   * the same statement writes each deleted job's history record (outcome `completed`).
   */
  completeAndAcquire?(
    done: readonly JobCompletion[],
    request: AcquireRequest,
    token: string,
    history?: boolean,
  ): Operation<{ completed: string[]; rows: SqlRow[] }>;
  /**
   * Run in its own transaction after an autocommitted `acquire` returned exclusive rows: gives
   * back those whose scope turned out to have another live holder, returns the rows kept.
   */
  recheckExclusive?(rows: SqlRow[], token: string): Operation<SqlRow[]>;
  /**
   * Locks the given job keys (sorted, deduplicated) until the transaction ends, so two batches
   * holding keys in opposite orders queue up instead of deadlocking. Null where the database
   * resolves such deadlocks at once anyway (InnoDB) or writers are serialised (SQLite).
   */
  lockKeys?(keys: readonly string[]): Query | null;
  /** Inserts keyless job rows in one statement where it can; returns them in input order. */
  insertJobs?(rows: readonly (readonly unknown[])[]): Operation<SqlRow[]>;
  /** Inserts one job row unless its key is taken; returns the row, or null on a key conflict. */
  insertJob?(values: readonly unknown[]): Operation<SqlRow | null>;
  /**
   * The whole of `JobStore.enqueue` where the database does it best its own way (PostgreSQL:
   * every job, keyed or not, and the wake-up `notify` in one statement, no transaction needed).
   * A dialect has this or `insertJobs` + `insertJob` (+ `lockKeys`).
   */
  enqueueJobs?(jobs: readonly NewJob[], notify: Query | null): Operation<EnqueueResult[]>;
  /**
   * `enqueueJobs` needs a transaction for these jobs (MySQL: keys, or more than one INSERT).
   * Absent: it never does.
   */
  enqueueNeedsTransaction?(jobs: readonly NewJob[]): boolean;

  // ---- settlement in one statement, any batch size (optional) ----
  // Each takes refs with valid ids and returns the ids it changed (held with that token, and
  // for `renewHeld` by `owner`). Where absent, the shared statements run in chunks.
  /**
   * Deletes finished jobs; one statement, so `complete` runs it without a transaction (MySQL:
   * present only once the dialect knows the server has `DELETE … RETURNING`, i.e. MariaDB).
   */
  completeHeld?(refs: readonly JobRef[]): Operation<string[]>;
  /**
   * `completeHeld` plus each deleted job's history record (outcome `completed`, its result and
   * duration), in one statement (PostgreSQL) or in the store's transaction (SQLite; see
   * `historyCompleteAtomic`). Absent: the shared lock-then-copy-then-delete (MySQL/MariaDB).
   */
  completeHeldWithHistory?(done: readonly JobCompletion[]): Operation<string[]>;
  /** `completeHeldWithHistory` is one statement, atomic by itself (PostgreSQL). */
  readonly historyCompleteAtomic?: boolean;
  /**
   * A non-blocking lock so that one process at a time prunes history: `take` returns one row
   * whose column `got` is 1/true when this session got it; `release` runs after the batch
   * (PostgreSQL: a transaction-level advisory lock, none; MySQL: `RELEASE_LOCK`). Absent where
   * the pruning transaction holds the database's one write lock anyway (SQLite).
   */
  readonly historyLock?: { take: Query; release: readonly Query[] };
  /**
   * Failed attempts: `timer` after the delay with one retry fewer, or `deadletter` (MySQL: one
   * fenced UPDATE per job, in the store's transaction).
   */
  failHeld?(failures: readonly JobFailure[]): Operation<string[]>;
  /** `failHeld` is one statement, atomic by itself: `fail` needs no transaction (PostgreSQL). */
  readonly failHeldAtomic?: boolean;
  /** Gives jobs back unstarted and sends `notify` when any was released. */
  releaseHeld?(refs: readonly JobRef[], notify: Query | null): Operation<string[]>;
  /**
   * Extends leases to now + `leaseMs`, writes each ref's `progressJson` (when given) in the same
   * statement, and answers the renewed ids and those of them with a cancel request. (A plain
   * array of renewed ids, as dialects written before cancellation answer, means none.)
   */
  renewHeld?(
    owner: string,
    leaseMs: number,
    refs: readonly LeaseRenewalRef[],
  ): Operation<string[] | { renewed: string[]; cancelRequested: string[] }>;
  /**
   * `JobStore.recoverExpiredLeases` in one statement (no transaction needed), sending `notify`
   * when jobs were requeued.
   */
  recoverExpiredLeases?(limit: number, notify: Query | null): Operation<RecoverResult>;
}

/**
 * A table's name without the prefix: `jobs`, `schedules`, `jobs_migrations`, `jobs_history`,
 * `jobs_rate_limits`.
 */
export function tableBaseName(name: TableName): string {
  return name === 'jobs' || name === 'schedules' ? name : `jobs_${name}`;
}

/** The columns every job select returns, in `rowToJob` names (the one list is in `rows.ts`). */
export { JOB_COLUMN_NAMES } from './rows.js';

export const SCHEDULE_COLUMN_NAMES = [
  'name',
  'spec',
  'next_at',
  'paused',
  'pending_misfire',
  'skipped',
  'fired',
  'version',
  'created_at',
  'updated_at',
] as const;

/** Builds a select list, letting a dialect wrap some columns (casts) and keep the name. */
export function selectList(
  names: readonly string[],
  quote: (identifier: string) => string,
  wrap: Record<string, (column: string) => string> = {},
  alias = '',
): string {
  const prefix = alias ? `${alias}.` : '';
  return names
    .map((name) => {
      const column = `${prefix}${quote(name)}`;
      const wrapper = wrap[name];
      return wrapper ? `${wrapper(column)} AS ${quote(name)}` : column;
    })
    .join(', ');
}

/** `?, ?, ?` for n parameters. */
export function marks(n: number): string {
  return Array.from({ length: n }, () => '?').join(', ');
}

/** `(?, ?), (?, ?)` for n pairs. */
export function pairMarks(n: number): string {
  return Array.from({ length: n }, () => '(?, ?)').join(', ');
}

/**
 * Ids are canonical decimal strings of the auto-increment column (`'7'`, not `'07'`), within a
 * signed 64-bit integer; anything else names no job rather than being coerced to one. The one
 * id check of every SQL store.
 */
export function isJobId(id: string): boolean {
  return (
    typeof id === 'string' &&
    /^(0|[1-9][0-9]{0,18})$/.test(id) &&
    (id.length < 19 || BigInt(id) <= 9_223_372_036_854_775_807n)
  );
}
