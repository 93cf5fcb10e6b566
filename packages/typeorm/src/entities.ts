/**
 * TypeORM `EntitySchema`s of the store's tables, for apps that list every table in their
 * DataSource (`synchronize`, `migration:generate`, repositories). They mirror the schema
 * `store.migrate()` makes (`@jobs/core/sql`'s migrations, the native stores' too) column for
 * column and index for index, so TypeORM's schema diff finds nothing to change; a migration
 * that changes the schema changes these too (`test/entities.test.ts` compares them).
 */
import {
  type EntitySchemaColumnOptions as Col,
  type ColumnType,
  EntitySchema,
  type EntitySchemaIndexOptions as Index,
} from 'typeorm';
import { dialectFor, MYSQL_GENERATED_COLUMNS } from './migration.js';
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

type Kind = 'postgres' | 'mysql' | 'sqlite';

/**
 * Each database's tables as its migrations leave them. Columns in table order: `name:type`,
 * `(n)` a length or precision, `?` nullable, `=value` a default; the first is the key, generated
 * as `key` says. Indexes and CHECKs as they are declared, `{p}` the table prefix. SQLite reports a PRIMARY KEY without NOT NULL (it has none) as nullable, and
 * TypeORM reads neither DESC in an index nor a CHECK without a name from it: these have none.
 */
const TABLES = {
  postgres: {
    jobs: `id:bigint type:text payload:jsonb state:text priority:integer=0 due_at:timestamptz(3)
      retries_left:integer attempts:integer=0 scope:text? exclusive:boolean=false job_key:text?
      tenant_id:text? queue:text='default' last_error_message:text? last_error_stack:text?
      created_at:timestamptz(3)=now() lock_owner:text? lock_expires_at:timestamptz(3)?
      lock_token:text? retry_policy:jsonb? suspended_from:text? schedule_name:text?
      occurrence:timestamptz(3)? shard_index:integer? shard_count:integer? meta:jsonb?
      progress:jsonb? cancel_requested:boolean=false scope_limit:integer?`,
    schedules: `name:text spec:jsonb next_at:timestamptz(3)? paused:boolean=false
      pending_misfire:boolean=false skipped:integer=0 fired:integer=0 version:integer=1
      created_at:timestamptz(3)=now() updated_at:timestamptz(3)=now()`,
    // EntitySchema passes 'identity' on, though its type leaves it out.
    key: { generated: 'identity' as 'increment' },
    jobConstraints: [
      'UNIQUE {p}jobs_key (job_key) WHERE job_key IS NOT NULL',
      "{p}jobs_acquire (priority, due_at, id) WHERE state IN ('timer', 'async')",
      "{p}jobs_lease (lock_expires_at) WHERE state = 'running'",
      '{p}jobs_schedule (schedule_name) WHERE schedule_name IS NOT NULL',
      "{p}jobs_scope_head (scope, priority, due_at, id) WHERE exclusive AND scope IS NOT NULL AND state IN ('timer', 'async')",
      "{p}jobs_scope_running (scope) WHERE exclusive AND scope IS NOT NULL AND state = 'running'",
      "{p}jobs_due (due_at) WHERE state IN ('timer', 'async')",
      "{p}jobs_state_check CHECK (state IN ('timer', 'async', 'running', 'deadletter', 'suspended'))",
      "{p}jobs_suspended_from_check CHECK (suspended_from IN ('timer', 'async'))",
    ],
    scheduleConstraints: [],
  },
  mysql: {
    jobs: `id:bigint type:varchar(255) payload:longtext state:varchar(16) priority:int=0
      due_at:datetime(3) retries_left:int attempts:int=0 scope:varchar(255)? exclusive:tinyint=0
      job_key:varchar(255)? tenant_id:varchar(255)? queue:varchar(255) last_error_message:text?
      last_error_stack:mediumtext? created_at:datetime(3) lock_owner:varchar(255)?
      lock_expires_at:datetime(3)? lock_token:char(36)? retry_policy:text?
      suspended_from:varchar(16)? schedule_name:varchar(255)? occurrence:datetime(3)?
      shard_index:int? shard_count:int? waiting:tinyint? neg_priority:int? meta:longtext?
      progress:longtext? cancel_requested:tinyint=0 scope_limit:int?`,
    schedules: `name:varchar(255) spec:longtext next_at:datetime(3)? paused:tinyint=0
      pending_misfire:tinyint=0 skipped:int=0 fired:int=0 version:int=1 created_at:datetime(3)
      updated_at:datetime(3)`,
    key: { generated: 'increment', unsigned: true },
    jobConstraints: [
      'UNIQUE uq_jobs_key (job_key)',
      'ix_jobs_acquire (waiting, neg_priority, due_at, id)',
      'ix_jobs_due (waiting, due_at)',
      'ix_jobs_scope (scope)',
      'ix_jobs_lease (state, lock_expires_at)',
      'ix_jobs_schedule (schedule_name)',
    ],
    scheduleConstraints: ['ix_schedules_due (paused, next_at)'],
  },
  sqlite: {
    jobs: `id:integer? type:text payload:text state:text priority:integer=0 due_at:integer
      retries_left:integer attempts:integer=0 scope:text? exclusive:integer=0 job_key:text?
      tenant_id:text? queue:text last_error_message:text? last_error_stack:text?
      created_at:integer lock_owner:text? lock_expires_at:integer? lock_token:text?
      retry_policy:text? suspended_from:text? schedule_name:text? occurrence:integer?
      shard_index:integer? shard_count:integer? meta:text? progress:text?
      cancel_requested:integer=0 scope_limit:integer?`,
    schedules: `name:text? spec:text next_at:integer? paused:integer=0 pending_misfire:integer=0
      skipped:integer=0 fired:integer=0 version:integer=1 created_at:integer updated_at:integer`,
    key: { generated: 'increment' },
    jobConstraints: [
      "{p}jobs_acquire_idx (priority, due_at, id) WHERE state IN ('timer', 'async')",
      "{p}jobs_due_idx (due_at) WHERE state IN ('timer', 'async')",
      '{p}jobs_scope_idx (scope, state, priority, due_at, id) WHERE exclusive = 1 AND scope IS NOT NULL',
      'UNIQUE {p}jobs_key_idx (job_key) WHERE job_key IS NOT NULL',
      "{p}jobs_lease_idx (lock_expires_at) WHERE state = 'running'",
      '{p}jobs_schedule_idx (schedule_name, state) WHERE schedule_name IS NOT NULL',
      "{p}jobs_scope_head_idx (scope, priority, due_at, id) WHERE exclusive = 1 AND scope IS NOT NULL AND state IN ('timer', 'async')",
    ],
    scheduleConstraints: ['{p}schedules_next_idx (next_at) WHERE paused = 0'],
  },
} as const;
const GENERATED = { generatedType: 'STORED', insert: false, update: false } as const;

/** Reads a column listing of TABLES; the first column is the primary key, with `key`. */
function columns(listing: string, key: Partial<Col> = {}): Record<string, Col> {
  const parse = (spec: string, i: number): [string, Col] => {
    const [, name = '', type = '', size, nullable, value] =
      /^(\w+):(\w+)(?:\((\d+)\))?(\?)?(?:=(.+))?$/.exec(spec) ?? [];
    const col: Col = { type: type as ColumnType, ...(i === 0 ? { primary: true, ...key } : {}) };
    if (size) col[/char/.test(type) ? 'length' : 'precision'] = Number(size);
    if (nullable) col.nullable = true;
    if (value === 'now()') col.default = () => value;
    else if (value?.startsWith("'")) col.default = value.slice(1, -1);
    else if (value) col.default = value === 'false' ? false : Number(value);
    const asExpression = MYSQL_GENERATED_COLUMNS[name as keyof typeof MYSQL_GENERATED_COLUMNS];
    if (asExpression) Object.assign(col, GENERATED, { asExpression });
    return [name, col];
  };
  return Object.fromEntries(listing.trim().split(/\s+/).map(parse));
}

/** Reads an index (`UNIQUE name (a, b) WHERE …`) or a CHECK (`name CHECK (…)`) of TABLES. */
function constraint(definition: string): Index & { expression?: string } {
  const [, unique, name, list = '', where, expression] =
    /^(UNIQUE )?(\S+) (?:\(([^)]+)\)(?: WHERE (.+))?|CHECK \((.+)\))$/.exec(definition) ?? [];
  if (expression) return { name, expression };
  return { name, columns: list.split(', '), unique: !!unique, ...(where ? { where } : {}) };
}

/**
 * The store's tables as TypeORM entities, for the DataSource's `entities`. Give the store's
 * `tablePrefix` and `schema`, if it has them: the defaults are the store's (`jobs_jobs` and
 * `jobs_schedules` on MySQL/MariaDB and SQLite, `jobs.jobs` and `jobs.schedules` on
 * PostgreSQL); a store whose DataSource names a `schema` uses that schema: pass it here.
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
): [EntitySchema<JobRow>, EntitySchema<ScheduleRow>] {
  const layout = dialectFor({ type: driver }, { tablePrefix, schema });
  const prefix = layout.prefix;
  const t = TABLES[layout.dialect.name as Kind];
  const entity = <T>(
    name: string,
    listing: string,
    constraints: readonly string[],
    key?: Partial<Col>,
  ) => {
    const [indices, checks] = [[], []] as [Index[], { name?: string; expression: string }[]];
    for (const text of constraints) {
      const c = constraint(text.replace('{p}', prefix));
      if (c.expression) checks.push({ name: c.name, expression: c.expression });
      else indices.push(c);
    }
    const table = `${prefix}${name}`;
    const where = layout.schema ? { schema: layout.schema } : {};
    return new EntitySchema<T>({
      ...where,
      name: table,
      tableName: table,
      columns: columns(listing, key),
      indices,
      checks,
    });
  };
  return [
    entity<JobRow>('jobs', t.jobs, t.jobConstraints, t.key),
    entity<ScheduleRow>('schedules', t.schedules, t.scheduleConstraints),
  ];
}
