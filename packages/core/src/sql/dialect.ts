/**
 * What differs between the databases the SQL core runs on. The shared operations
 * (`operations/*.ts`) are written once against this interface; a dialect holds SQL syntax,
 * traits, its schema, and its hot-path operations (`DialectOps`): every one required, each
 * the database's own statement (PostgreSQL's one-statement `completeAndAcquire`, MySQL's
 * lock-then-update acquisition) or a building block of `sql/portable/` it picks on purpose —
 * never a branch on a database name.
 *
 * Shared SQL is written with `"double-quoted"` identifiers and `?` parameters; `sql()` and
 * `placeholders()` turn it into the dialect's own.
 */
import type {
  AcquireRequest,
  EnqueueResult,
  HistorySettings,
  JobCompletion,
  JobFailure,
  JobRef,
  LeaseRenewalRef,
  NewJob,
  RecoverResult,
  StepSave,
} from '../store.js';
import type { Operation, Query } from './executor.js';
import type { LockRetries } from './lock-retries.js';
import type { Migration } from './migration.js';
import type { SqlRow, SqlValue } from './rows.js';

export type TableName =
  | 'jobs'
  | 'schedules'
  | 'migrations'
  | 'history'
  | 'rate_limits'
  | 'followups'
  | 'signals';

/**
 * How a dialect writes SQL: names, values, time, and the fragments every shared statement is
 * built from (`forUpdate`, `acquisitionOrder`, …).
 */
export interface SqlSyntax {
  /** Quoted, schema-qualified name of one of the store's tables. */
  table(name: TableName): string;
  /** Quotes an identifier. */
  quote(identifier: string): string;
  /** Rewrites shared SQL (written with `"identifiers"`) into the dialect's quoting. */
  sql(text: string): string;
  /** Turns `?` placeholders into the driver's (`$1` on PostgreSQL). */
  placeholders(sql: string): string;

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

  /**
   * Suffix of a read that locks the rows it returns, skipping rows other transactions hold
   * (`FOR UPDATE SKIP LOCKED`); empty where writers are serialised anyway (SQLite).
   */
  readonly lockSkipLocked: string;
  /**
   * Suffix of a read that locks the rows it returns until the transaction ends (` FOR UPDATE`);
   * empty where the database has no row locks and writers are serialised anyway (SQLite).
   */
  readonly forUpdate: string;
  /**
   * The acquisition order (invariant 9, `rules.ts`) as an `ORDER BY` list over the rows
   * of `alias` (`''`: unqualified), in the terms the dialect's indexes are ordered by; `last`
   * reverses it. Every statement that orders by acquisition writes it through this.
   */
  acquisitionOrder(alias: string, dir?: 'first' | 'last'): string;
  /** `(?, ?), (?, ?)` row values for `("id", "lock_token") IN (…)` of `n` pairs. */
  pairs(n: number): string;
  /**
   * The clause that turns a duplicate primary or unique key of an INSERT into "nothing
   * inserted" (`ON CONFLICT (col) DO NOTHING`), or `''` where the duplicate-key error is caught
   * instead (MySQL: `INSERT IGNORE` would also hide values the column cannot hold).
   */
  onConflictDoNothing(column: string): string;
  /**
   * A parameter that takes a whole array of `type` (PostgreSQL: `?::text[]`): shared statements
   * over lists then keep one text, prepared once, whatever the list's length.
   */
  arrayParam?(type: 'text' | 'bigint'): string;
  /**
   * Written after the jobs table's alias where a read asks for one scope's rows of one state
   * (MySQL/MariaDB: `FORCE INDEX (ix_jobs_scope_blocked)`, whose `(scope, state, …)` the
   * optimizer otherwise passes over for `(scope)`, reading the scope's whole backlog).
   */
  readonly scopeIndexHint?: string;
}

/** Facts about the database that shared code reads to pick its way (capabilities, errors). */
export interface SqlTraits {
  /** `UPDATE/DELETE … RETURNING` works (PostgreSQL, SQLite; not MySQL/MariaDB). */
  readonly returning: boolean;
  /**
   * A single-table `DELETE … LIMIT ?` works, and beats deleting by ids read in a
   * derived table (MySQL/MariaDB, which answer that by scanning the whole table). Absent: no
   * such statement (PostgreSQL; SQLite without its compile option).
   */
  readonly deleteLimit?: boolean;
  /** The store's `StoreCapabilities.batchLimit` unless the store says otherwise. */
  readonly batchLimit?: number;
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
   * A recursive CTE whose step probes an index for the first entry after the row before
   * (`WHERE scope > s.scope ORDER BY scope LIMIT 1`) reads only that entry: a skip scan over a
   * scope index (PostgreSQL, SQLite; MariaDB reads the range from its start on each step).
   */
  readonly recursiveSkipScan?: boolean;
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
   * A non-blocking lock so that one process at a time prunes history: `take` returns one row
   * whose column `got` is 1/true when this session got it; `release` runs after the batch
   * (PostgreSQL: a transaction-level advisory lock, none; MySQL: `RELEASE_LOCK`). Absent where
   * the pruning transaction holds the database's one write lock anyway (SQLite).
   */
  readonly historyLock?: { take: Query; release: readonly Query[] };
  /**
   * History kept in partitions of `partitionMs` (one a UTC day, migration 0018): pruning first
   * runs `dropBefore(retentionMs)`, which creates the coming days' partitions and drops each
   * partition whose every record finished more than `retentionMs` ago, returning how many records
   * went with them; what is left past the retention is deleted row by row. A partition whose
   * lock a long transaction holds is left for the next call. Absent where history is one table.
   */
  readonly historyPartitions?: {
    partitionMs: number;
    dropBefore: (retentionMs: number) => Operation<number>;
  };
}

/** The schema: numbered migrations, the version table, the migration lock. */
export interface SqlSchema {
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
}

/**
 * A hot-path operation as a dialect runs it, and whether the store opens a transaction for it
 * (a function: it depends on the arguments or on settings). The transaction need is said here
 * and nowhere else; a caller's own transaction (`{ tx }`) is used as it is.
 */
export interface OpSpec<A extends unknown[], R> {
  run(c: SqlEnv, ...args: A): Operation<R>;
  readonly transaction: boolean | ((c: SqlEnv, ...args: A) => boolean);
}

/** What a renewal answers: the renewed ids, and those of them with a cancel request. */
export interface RenewAnswer {
  renewed: string[];
  cancelRequested: string[];
}

/**
 * The hot path: every operation required of every dialect, each the database's own statement
 * or a building block of `sql/portable/` picked on purpose. Settling operations (`complete`,
 * `completeWithHistory`, `fail`, `release`, `renew`) get refs with valid ids only, at least
 * one, and answer the ids they changed — held with the ref's token (and for `renew`, by
 * `owner`); every other ref is lost. `complete` and `fail` leave cancel-requested jobs alone
 * (invariant 20: they are their owner's `cancelHeld`).
 */
export interface DialectOps {
  /**
   * Inserts jobs (at least one) in input order: a job whose key an unfinished job holds is
   * not inserted, its holder comes back with `created: false` (`operations/jobs.ts`).
   * Sends `c.notify` when any was created. Key modes (`replace`, `debounce`) are shared code
   * around this (`operations/jobs.ts`), in a transaction of their own.
   */
  readonly enqueue: OpSpec<[readonly NewJob[]], EnqueueResult[]>;
  /**
   * Leases due jobs (`JobStore.acquire`; a request with a limit and types). It is the last step
   * of its run, and may end the transaction itself (COMMIT) to release session locks after the
   * commit (MySQL's per-scope `GET_LOCK`); the executor's COMMIT then finds nothing to do.
   */
  readonly acquire: OpSpec<[AcquireRequest, string], SqlRow[]>;
  /**
   * Where exclusive jobs need a lock before they are decided (PostgreSQL): `acquire` and
   * `completeAndAcquire` take only non-exclusive jobs, and when an exclusive job could start
   * they take nothing and return one row with `needs_exclusive: true` (and no `id`). This
   * then acquires under per-scope locks. `null`: `acquire` decides exclusive jobs itself.
   */
  readonly acquireLocked: OpSpec<[AcquireRequest, string], SqlRow[]> | null;
  /**
   * Completes `done` (valid ids, at most 1,000) and acquires in ONE statement (PostgreSQL);
   * `history`: the same statement writes each deleted job's history record. Answers the ids
   * it deleted and the acquired rows. `null`: the store runs `complete` (or
   * `completeWithHistory`) and `acquire` one after the other, in one transaction if either
   * needs one.
   */
  readonly completeAndAcquire: OpSpec<
    [readonly JobCompletion[], AcquireRequest, string, boolean],
    { completed: string[]; rows: SqlRow[] }
  > | null;
  /** Deletes finished jobs (while history keeps no completed jobs). */
  readonly complete: OpSpec<[readonly JobCompletion[]], string[]>;
  /** `complete` plus each deleted job's history record (outcome `completed`, result, duration). */
  readonly completeWithHistory: OpSpec<[readonly JobCompletion[]], string[]>;
  /** Failed attempts: `timer` after the delay with one retry fewer, or `deadletter`. */
  readonly fail: OpSpec<[readonly JobFailure[]], string[]>;
  /** Gives jobs back unstarted (the attempt not counted); sends `c.notify` when any was. */
  readonly release: OpSpec<[readonly JobRef[]], string[]>;
  /**
   * Extends `owner`'s leases to now + `leaseMs`, writes each ref's progress, logs and start
   * mark (when given) in the same statement, and answers which renewed jobs have a cancel
   * request (renewed too: their owner needs a full lease to stop them).
   */
  readonly renew: OpSpec<[string, number, readonly LeaseRenewalRef[]], RenewAnswer>;
  /**
   * Several jobs' step checkpoints (`StoreSteps.saveMany`: valid ids, one per job, at most
   * 1,000), each fenced by its own token as `operations/steps.ts`'s `saveSteps` is; answers the
   * ids whose checkpoint was refused. `null`: the store writes each checkpoint alone and has no
   * `saveMany`.
   */
  readonly saveSteps: OpSpec<[readonly StepSave[]], string[]> | null;
  /**
   * `JobStore.recoverExpiredLeases` for jobs without a cancel request (those are
   * `operations/recover.ts`'s), sending `c.notify` when jobs were requeued.
   */
  readonly recover: OpSpec<[number], RecoverResult>;
}

/**
 * What differs between the databases the SQL core runs on, in four roles: `SqlSyntax` (how SQL
 * is written), `SqlTraits` (facts shared code reads), `SqlSchema` (migrations) and `ops` (the
 * hot path, every operation required, each with its transaction need).
 */
export interface Dialect extends SqlSyntax, SqlTraits, SqlSchema {
  /** The database, for messages and store names: `postgres`, `mysql`, `sqlite`. */
  readonly name: string;
  /** The hot-path operations (`DialectOps`). */
  readonly ops: DialectOps;
}

/** What every operation works with: the dialect, its tables, and how to wake other engines. */
export interface SqlEnv {
  readonly d: Dialect;
  /** Quoted names of the store's tables. */
  readonly jobs: string;
  readonly schedules: string;
  /** The history table (finished jobs). */
  readonly history: string;
  /** Changes queued for running holders of keys (`operations/followups.ts`). */
  readonly followups: string;
  /** What history keeps; `SqlJobStore.configureHistory` changes it in place. */
  readonly historySettings: HistorySettings;
  /**
   * A statement that wakes engines elsewhere (PostgreSQL `pg_notify`), sent in the same
   * transaction as the writes that made jobs acquirable, so it is delivered on commit.
   */
  readonly notify: Query | null;
  /** The package that speaks in error messages, e.g. `@jobs/postgres`. */
  readonly label: string;
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

/**
 * `Dialect.acquisitionOrder` for a database whose rows order by `priority DESC, due_at, id`
 * or, with `negPriority`, by the generated `neg_priority` ascending (MySQL/MariaDB's indexes).
 */
export function acquisitionOrderBy(
  negPriority: boolean,
): (alias: string, dir?: 'first' | 'last') => string {
  return (alias, dir = 'first') => {
    const a = alias ? `${alias}.` : '';
    const [up, down] = dir === 'last' ? [' DESC', ''] : ['', ' DESC'];
    return negPriority
      ? `${a}neg_priority${up}, ${a}due_at${up}, ${a}id${up}`
      : `${a}priority${down}, ${a}due_at${up}, ${a}id${up}`;
  };
}

/** `?, ?, ?` for n parameters. */
export function marks(n: number): string {
  return Array.from({ length: n }, () => '?').join(', ');
}

/** `(?, ?), (?, ?)` for n pairs. */
export function pairMarks(n: number): string {
  return Array.from({ length: n }, () => '(?, ?)').join(', ');
}

export { isJobId } from '../rules.js';
