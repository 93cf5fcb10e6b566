/**
 * What differs between the databases a TypeORM DataSource can point at. The store's operations
 * (`../operations.ts`) are written once against this interface; each dialect file holds only its
 * SQL text: DDL, time arithmetic, and the acquisition statement.
 */
import type { AcquireRequest, SqlRow, SqlValue } from '@jobs/core';

/** One statement. `?` marks parameters; the dialect rewrites them (`$1` on PostgreSQL). */
export interface Query {
  sql: string;
  params: readonly unknown[];
}

/** What a statement returned, the same shape for every driver. */
export interface QueryOutcome {
  rows: SqlRow[];
  affected: number;
  /** AUTO_INCREMENT id of the inserted row (MySQL), or null. */
  insertId: string | null;
}

/**
 * A store operation: a generator that yields statements and gets their outcomes back. Written
 * once, it runs synchronously inside one SQLite transaction (nothing can interleave on the
 * DataSource's single connection) or asynchronously on a TypeORM QueryRunner.
 */
export type Operation<T> = Generator<Query, T, QueryOutcome>;

export type DialectKind = 'postgres' | 'mysql' | 'sqlite';

export interface Dialect {
  readonly kind: DialectKind;
  /** Quoted, schema-qualified name of one of the store's tables. */
  table(name: 'jobs' | 'schedules' | 'migrations'): string;
  /** Quotes an identifier (index names). */
  quote(identifier: string): string;
  /** Turns `?` placeholders into the driver's. */
  placeholders(sql: string): string;
  /** SQL expression for the database's now. */
  readonly now: string;
  /** SQL expression for now + `?` milliseconds (one parameter). */
  readonly nowPlusMs: string;
  /** SQL literals for booleans. */
  readonly TRUE: string;
  readonly FALSE: string;
  /** How a time parameter is written. */
  time(date: Date): SqlValue;
  /** How a boolean parameter is written. */
  bool(value: boolean): SqlValue;
  /** Select list for job rows with the column names `rowToJob` reads (columns of `alias`). */
  jobColumns(alias?: string): string;
  /** Select list for schedule rows with the column names `rowToSchedule` reads. */
  readonly scheduleColumns: string;
  /** Suffix of a read that must see the latest committed rows inside any transaction. */
  readonly latestRead: string;
  /** `UPDATE/DELETE … RETURNING` works (PostgreSQL, SQLite; not MySQL/MariaDB). */
  readonly returning: boolean;
  /** Statements run before anything else by every migrate (e.g. `CREATE SCHEMA IF NOT EXISTS`). */
  readonly setup: readonly string[];
  /** Numbered schema migrations: the statements of version 1, 2, … */
  readonly migrations: readonly (readonly string[])[];
  /**
   * Statements that take (and, for MySQL, release) the cross-process migration lock.
   * `lock` runs first inside the migration; `unlock` after it, also when it failed.
   */
  readonly migrateLock: { lock: Query[]; unlock: Query[]; transactional: boolean };
  /** Leases due jobs (see `JobStore.acquire`); rows may carry `old_state`. */
  acquire(request: AcquireRequest, token: string): Operation<SqlRow[]>;
  /**
   * Completes `done` (all valid ids, at most 1,000) and acquires in ONE statement, where the
   * database can (PostgreSQL). Returns the ids it deleted and the acquired rows.
   */
  completeAndAcquire?(
    done: readonly { id: string; token: string }[],
    request: AcquireRequest,
    token: string,
  ): Operation<{ completed: string[]; rows: SqlRow[] }>;
  /** `acquire` needs a transaction (it locks, then updates). */
  readonly acquireInTransaction: boolean;
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
  lockKeys(keys: readonly string[]): Query | null;
  /** Inserts keyless job rows in one statement where it can; returns them in input order. */
  insertJobs(rows: readonly (readonly unknown[])[]): Operation<SqlRow[]>;
  /** Inserts one job row unless its key is taken; returns the row, or null on a key conflict. */
  insertJob(values: readonly unknown[]): Operation<SqlRow | null>;
}

/** The columns every job select returns, in `rowToJob` names. */
export const JOB_COLUMN_NAMES = [
  'id',
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
  'last_error_message',
  'last_error_stack',
  'created_at',
  'lock_owner',
  'lock_expires_at',
  'lock_token',
  'retry_policy',
  'suspended_from',
  'schedule_name',
  'occurrence',
  'shard_index',
  'shard_count',
] as const;

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

/**
 * The WHERE clause that makes a row an acquisition candidate (alias `j`), shared by every
 * dialect: due, waiting, matching types/queues/tenants, and for exclusive rows the head of its
 * scope with no live exclusive holder. Params are returned in order.
 */
export function candidateWhere(
  d: Pick<Dialect, 'now' | 'TRUE' | 'table' | 'quote'>,
  request: AcquireRequest,
): { sql: string; params: unknown[] } {
  const jobs = d.table('jobs');
  const params: unknown[] = [...request.types];
  let sql = `j.state IN ('timer', 'async') AND j.due_at <= ${d.now} AND j.type IN (${marks(request.types.length)})`;
  if (request.queues) {
    if (request.queues.length === 0) return { sql: '1 = 0', params: [] };
    sql += ` AND j.queue IN (${marks(request.queues.length)})`;
    params.push(...request.queues);
  }
  if (request.tenants) {
    if (request.tenants.length === 0) return { sql: '1 = 0', params: [] };
    sql += ` AND j.tenant_id IN (${marks(request.tenants.length)})`;
    params.push(...request.tenants);
  }
  const ex = d.quote('exclusive');
  // An exclusive job goes only when no exclusive job of its scope runs with a live lease, and no
  // waiting due exclusive job of the scope comes before it (priority, due time, insertion).
  sql += ` AND (j.${ex} <> ${d.TRUE} OR j.scope IS NULL OR (
    NOT EXISTS (SELECT 1 FROM ${jobs} r WHERE r.scope = j.scope AND r.${ex} = ${d.TRUE}
      AND r.state = 'running' AND r.lock_expires_at > ${d.now})
    AND NOT EXISTS (SELECT 1 FROM ${jobs} w WHERE w.scope = j.scope AND w.${ex} = ${d.TRUE}
      AND w.state IN ('timer', 'async') AND w.due_at <= ${d.now}
      AND (w.priority > j.priority OR (w.priority = j.priority AND (w.due_at < j.due_at
        OR (w.due_at = j.due_at AND w.id < j.id)))))))`;
  return { sql, params };
}

export const ACQUIRE_ORDER = 'ORDER BY j.priority DESC, j.due_at ASC, j.id ASC';
