/**
 * TypeORM `EntitySchema`s of the store's tables, made from `@jobs/core/sql`'s `describeTables`
 * (the schema the migrations make), so TypeORM's schema diff finds nothing to change.
 */
import { describeTables, type TableDatabase, type TableDescription } from '@jobs/core/sql';
import {
  type EntitySchemaColumnOptions as Col,
  type ColumnType,
  EntitySchema,
  type EntitySchemaIndexOptions as Index,
} from 'typeorm';
import { dialectFor } from './migration.js';
import type { TypeormJobsDriver } from './store.js';

type Time = Date | number;
type Nullable<K extends string, T> = Record<K, T | null>;

/**
 * A row of `<prefix>jobs` as TypeORM maps it: times are Dates (epoch ms on SQLite), JSON is
 * parsed on PostgreSQL (text elsewhere), booleans are 0/1 outside PostgreSQL, the id a bigint
 * (a decimal string on PostgreSQL and MySQL). MySQL adds the generated `waiting` (1 for a
 * waiting job, else null) and `neg_priority` (`-priority`) for its acquisition index.
 */
export type JobRow = Record<'type' | 'state' | 'queue', string> &
  Record<'priority' | 'retries_left' | 'attempts', number> &
  Record<'due_at' | 'created_at', Time> &
  Nullable<'scope' | 'job_key' | 'tenant_id' | 'lock_owner' | 'lock_token', string> &
  Nullable<'last_error_message' | 'last_error_stack' | 'suspended_from' | 'schedule_name', string> &
  Nullable<'lock_expires_at' | 'occurrence', Time> &
  Nullable<'shard_index' | 'shard_count' | 'scope_limit', number> & {
    id: string | number;
    payload: unknown;
    retry_policy: unknown;
    /** String headers given at enqueue (JSON). */
    meta: unknown;
    /** The handler's latest progress (JSON), written by lease renewals. */
    progress: unknown;
    cancel_requested: boolean | number;
    exclusive: boolean | number;
    waiting?: number | null;
    neg_priority?: number;
  };

/** A row of `<prefix>schedules` (see `JobRow` for the value types). */
export type ScheduleRow = Record<'skipped' | 'fired' | 'version', number> &
  Record<'created_at' | 'updated_at', Time> &
  Record<'paused' | 'pending_misfire', boolean | number> & {
    name: string;
    spec: unknown;
    next_at: Time | null;
  };

/** Columns of a live job that a finished one does not keep. */
type LiveOnly = 'state' | 'suspended_from' | 'cancel_requested' | 'waiting' | 'neg_priority';
type LockOnly = 'lock_owner' | 'lock_expires_at' | 'lock_token';

/** A row of `<prefix>jobs_history`: a finished job (`owner`: its last lock owner) and its outcome. */
export type HistoryRow = Omit<JobRow, LiveOnly | LockOnly> &
  Nullable<'owner', string> &
  Nullable<'duration_ms', string | number> & {
    outcome: string;
    result: unknown;
    finished_at: Time;
  };

/** A row of `<prefix>jobs_rate_limits`: one rate-limit key's window, times in epoch ms (bigints). */
export type RateLimitRow = Record<'start_ms' | 'per_ms', string | number> &
  Nullable<'blocked_until_ms', string | number> & { rate_key: string; used: number };

type JobsEntities = [
  EntitySchema<JobRow>,
  EntitySchema<ScheduleRow>,
  EntitySchema<HistoryRow>,
  EntitySchema<RateLimitRow>,
];

/** A described table as an entity (in `schema` on PostgreSQL). */
function entity(table: TableDescription, schema: string | null): EntitySchema {
  const columns = table.columns.map((column, i): [string, Col] => {
    const { type, length, precision, nullable, unsigned, default: value, generated } = column;
    const options: Col = { type: type as ColumnType, length, precision, nullable, unsigned };
    if (value === 'now()') options.default = () => value;
    else if (value?.startsWith("'")) options.default = value.slice(1, -1);
    else if (value !== undefined) options.default = value === 'false' ? false : Number(value);
    if (generated) Object.assign(options, { generatedType: 'STORED', asExpression: generated });
    if (generated) Object.assign(options, { insert: false, update: false });
    // EntitySchema passes 'identity' on, though its type leaves it out.
    const key = { primary: true, generated: table.keyGeneration ?? undefined } as Partial<Col>;
    return [column.name, i === 0 ? { ...options, ...key } : options];
  });
  return new EntitySchema({
    ...(schema ? { schema } : {}),
    name: table.name,
    tableName: table.name,
    columns: Object.fromEntries(columns),
    indices: table.indexes as Index[],
    checks: table.checks,
  });
}

/**
 * The store's tables as TypeORM entities, for the DataSource's `entities`: jobs, schedules,
 * history and rate-limit windows. Give the store's `tablePrefix` and `schema`, if it has them:
 * the defaults are the store's (`jobs_jobs`, `jobs_schedules`, … on MySQL/MariaDB and SQLite,
 * `jobs.jobs`, `jobs.schedules`, … on PostgreSQL); a store whose DataSource names a `schema`
 * uses that schema: pass it here.
 *
 * @example
 * const dataSource = new DataSource({
 *   type: 'postgres', url,
 *   entities: [Order, ...jobsEntities('postgres')],
 * });
 */
export function jobsEntities(
  driver: TypeormJobsDriver,
  tablePrefix?: string,
  schema?: string,
): JobsEntities {
  const layout = dialectFor({ type: driver }, { tablePrefix, schema });
  const tables = describeTables(layout.dialect.name as TableDatabase, layout.prefix);
  return tables.map((table) => entity(table, layout.schema)) as JobsEntities;
}
