/**
 * The store's tables as each database's migrations leave them (`migrations/<database>/*.sql`):
 * columns in table order with their types, nullability and defaults, the indexes and the named
 * CHECKs. For code that must agree with the schema without reading it (`@jobs/typeorm`'s
 * entities) and for the tests that prove every path to a database makes exactly this. A
 * migration that changes the schema changes this description too.
 */
import { type TableName, tableBaseName } from './dialect.js';

/** The databases the migrations are written for (`Dialect.name`). */
export type TableDatabase = 'postgres' | 'mysql' | 'sqlite';

export interface ColumnDescription {
  name: string;
  /** The type as the database names it, lower case: `text`, `timestamptz`, `varchar`, `int`. */
  type: string;
  /** `varchar(255)`, `char(36)`: the length. */
  length?: number;
  /** `timestamptz(3)`, `datetime(3)`: the fractional-second digits. */
  precision?: number;
  nullable: boolean;
  /** The default as SQL (`0`, `false`, `'default'`, `now()`); absent for none. */
  default?: string;
  /** MySQL's STORED generated columns: the expression. */
  generated?: string;
  /** MySQL: `BIGINT UNSIGNED`. */
  unsigned?: boolean;
}

export interface IndexDescription {
  name: string;
  columns: string[];
  unique: boolean;
  /** A partial index's predicate. */
  where?: string;
}

export interface TableDescription {
  /** Which of the store's tables. */
  table: Exclude<TableName, 'migrations'>;
  /** The table's name: the prefix and `tableBaseName`. */
  name: string;
  columns: ColumnDescription[];
  /** The primary key's columns: the first column, or more (PostgreSQL's partitioned history). */
  primaryKey: string[];
  /** How the key is made: `identity` (PostgreSQL), `increment` (AUTO_INCREMENT, AUTOINCREMENT). */
  keyGeneration: 'identity' | 'increment' | null;
  indexes: IndexDescription[];
  /** Named CHECK constraints. */
  checks: { name: string; expression: string }[];
}

// ---- rows ----

type Time = Date | number;
type Nullable<K extends string, T> = Record<K, T | null>;

/**
 * A row of `<prefix>jobs` as the drivers return it for `SELECT *` (`pg`, `mysql2`,
 * better-sqlite3, and TypeORM over them): times are Dates (epoch ms on SQLite), JSON is parsed
 * on PostgreSQL (text elsewhere), booleans are 0/1 outside PostgreSQL, the id a bigint (a
 * decimal string on PostgreSQL and MySQL). MySQL adds the generated `waiting` (1 for a
 * waiting job, else null) and `neg_priority` (`-priority`) for its acquisition index.
 */
export type JobRow = Record<'type' | 'state' | 'queue', string> &
  Record<'priority' | 'retries_left' | 'attempts', number> &
  Record<'due_at' | 'created_at', Time> &
  Nullable<'scope' | 'job_key' | 'tenant_id' | 'lock_owner' | 'lock_token', string> &
  Nullable<'last_error_message' | 'last_error_stack' | 'suspended_from' | 'schedule_name', string> &
  Nullable<'lock_expires_at' | 'occurrence' | 'started_at', Time> &
  Nullable<'shard_index' | 'shard_count' | 'scope_limit' | 'timeout_ms', number> & {
    id: string | number;
    payload: unknown;
    retry_policy: unknown;
    /** String headers given at enqueue (JSON). */
    meta: unknown;
    /** The handler's latest progress (JSON), written by lease renewals. */
    progress: unknown;
    /** The handlers' `ctx.log` lines (JSON), written by lease renewals. */
    logs: unknown;
    /** The handlers' durable steps (JSON), written by fenced checkpoints. */
    steps: unknown;
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

/**
 * A row of `<prefix>jobs_followups`: a change to a keyed job queued while its holder ran (the
 * change as JSON, see `operations/followups.ts`).
 */
export type FollowupRow = Record<'job_key', string> & {
  holder_id: string | number;
  job: unknown;
  created_at: Time;
};

/** A row of `<prefix>jobs_rate_limits`: one rate-limit key's window, times in epoch ms (bigints). */
export type RateLimitRow = Record<'start_ms' | 'per_ms', string | number> &
  Nullable<'blocked_until_ms', string | number> & { rate_key: string; used: number };

/**
 * MySQL's generated columns on the jobs table, as `0001_init.sql` declares them: `waiting` (1
 * for a waiting job, else null) and `neg_priority` turn the acquisition order into an
 * all-ascending index (`ix_jobs_acquire`).
 */
export const MYSQL_GENERATED_COLUMNS = {
  waiting: "IF(`state` IN ('timer', 'async'), 1, NULL)",
  neg_priority: '-`priority`',
};

/**
 * A table, compactly. `columns`: `name:type`, `(n)` a length or precision, `?` nullable,
 * `=value` a default. `constraints`: indexes (`UNIQUE name (a, b) WHERE …`) and CHECKs
 * (`name CHECK (…)`), `{p}` the table prefix. DESC in index columns is left out, and so are
 * CHECKs without a name (SQLite's): neither is read back by the tools that compare schemas.
 */
interface Listing {
  columns: string;
  /** The primary key's columns when not the first column alone. */
  primaryKey?: readonly string[];
  key?: 'identity' | 'increment';
  unsignedKey?: boolean;
  constraints?: readonly string[];
}

const LISTINGS: Record<TableDatabase, Record<TableDescription['table'], Listing>> = {
  postgres: {
    jobs: {
      columns: `id:bigint type:text payload:jsonb state:text priority:integer=0
        due_at:timestamptz(3) retries_left:integer attempts:integer=0 scope:text?
        exclusive:boolean=false job_key:text? tenant_id:text? queue:text='default'
        last_error_message:text? last_error_stack:text? created_at:timestamptz(3)=now()
        lock_owner:text? lock_expires_at:timestamptz(3)? lock_token:text? retry_policy:jsonb?
        suspended_from:text? schedule_name:text? occurrence:timestamptz(3)? shard_index:integer?
        shard_count:integer? meta:jsonb? progress:jsonb? cancel_requested:boolean=false
        scope_limit:integer? started_at:timestamptz(3)? timeout_ms:integer? logs:jsonb? steps:jsonb?`,
      key: 'identity',
      constraints: [
        'UNIQUE {p}jobs_key (job_key) WHERE job_key IS NOT NULL',
        "{p}jobs_acquire (priority, due_at, id) WHERE state IN ('timer', 'async')",
        "{p}jobs_lease (lock_expires_at) WHERE state = 'running'",
        '{p}jobs_schedule (schedule_name) WHERE schedule_name IS NOT NULL',
        "{p}jobs_scope_head (scope, priority, due_at, id) WHERE exclusive AND scope IS NOT NULL AND state IN ('timer', 'async')",
        "{p}jobs_scope_running (scope) WHERE exclusive AND scope IS NOT NULL AND state = 'running'",
        "{p}jobs_due (due_at) WHERE state IN ('timer', 'async')",
        "{p}jobs_scope_blocked (scope, priority, due_at, id) WHERE state = 'blocked'",
        "{p}jobs_state_check CHECK (state IN ('timer', 'async', 'running', 'deadletter', 'suspended', 'blocked'))",
        "{p}jobs_suspended_from_check CHECK (suspended_from IN ('timer', 'async', 'blocked'))",
      ],
    },
    schedules: {
      columns: `name:text spec:jsonb next_at:timestamptz(3)? paused:boolean=false
        pending_misfire:boolean=false skipped:integer=0 fired:integer=0 version:integer=1
        created_at:timestamptz(3)=now() updated_at:timestamptz(3)=now()`,
    },
    history: {
      columns: `id:bigint type:text payload:jsonb priority:integer due_at:timestamptz(3)
        retries_left:integer attempts:integer scope:text? exclusive:boolean job_key:text?
        tenant_id:text? queue:text last_error_message:text? last_error_stack:text?
        created_at:timestamptz(3) owner:text? retry_policy:jsonb? schedule_name:text?
        occurrence:timestamptz(3)? shard_index:integer? shard_count:integer? meta:jsonb?
        outcome:text result:jsonb? duration_ms:bigint? finished_at:timestamptz(3)
        progress:jsonb? scope_limit:integer? started_at:timestamptz(3)? timeout_ms:integer?
        logs:jsonb? steps:jsonb?`,
      // Partitioned by finished_at (migration 0018): a partitioned table's keys include it.
      primaryKey: ['id', 'finished_at'],
      constraints: [
        '{p}jobs_history_finished (finished_at, id)',
        '{p}jobs_history_type (type, finished_at)',
        '{p}jobs_history_outcome (outcome, finished_at)',
        "{p}jobs_history_outcome_check CHECK (outcome IN ('completed', 'deadletter', 'cancelled'))",
      ],
    },
    rate_limits: {
      columns: 'rate_key:text start_ms:bigint per_ms:bigint used:integer blocked_until_ms:bigint?',
    },
    followups: {
      columns: 'job_key:text holder_id:bigint job:jsonb created_at:timestamptz(3)=now()',
      constraints: ['{p}jobs_followups_holder (holder_id)'],
    },
    signals: {
      columns:
        'id:bigint name:text signal_key:text payload:text? waiter_id:bigint? created_at:timestamptz(3)=now()',
      key: 'identity',
      constraints: [
        '{p}jobs_signals_key (name, signal_key, id)',
        '{p}jobs_signals_waiter (waiter_id)',
        '{p}jobs_signals_prune (created_at, id) WHERE waiter_id IS NULL',
      ],
    },
  },
  mysql: {
    jobs: {
      columns: `id:bigint type:varchar(255) payload:longtext state:varchar(16) priority:int=0
        due_at:datetime(3) retries_left:int attempts:int=0 scope:varchar(255)? exclusive:tinyint=0
        job_key:varchar(255)? tenant_id:varchar(255)? queue:varchar(255) last_error_message:text?
        last_error_stack:mediumtext? created_at:datetime(3) lock_owner:varchar(255)?
        lock_expires_at:datetime(3)? lock_token:char(36)? retry_policy:text?
        suspended_from:varchar(16)? schedule_name:varchar(255)? occurrence:datetime(3)?
        shard_index:int? shard_count:int? waiting:tinyint? neg_priority:int? meta:longtext?
        progress:longtext? cancel_requested:tinyint=0 scope_limit:int? started_at:datetime(3)?
        timeout_ms:int? logs:longtext? steps:longtext?`,
      key: 'increment',
      unsignedKey: true,
      constraints: [
        'UNIQUE uq_jobs_key (job_key)',
        'ix_jobs_acquire (waiting, neg_priority, due_at, id)',
        'ix_jobs_due (waiting, due_at)',
        'ix_jobs_scope (scope)',
        'ix_jobs_lease (state, lock_expires_at)',
        'ix_jobs_schedule (schedule_name)',
        'ix_jobs_scope_blocked (scope, state, neg_priority, due_at, id)',
      ],
    },
    schedules: {
      columns: `name:varchar(255) spec:longtext next_at:datetime(3)? paused:tinyint=0
        pending_misfire:tinyint=0 skipped:int=0 fired:int=0 version:int=1 created_at:datetime(3)
        updated_at:datetime(3)`,
      constraints: ['ix_schedules_due (paused, next_at)'],
    },
    history: {
      columns: `id:bigint type:varchar(255) payload:longtext priority:int due_at:datetime(3)
        retries_left:int attempts:int scope:varchar(255)? exclusive:tinyint job_key:varchar(255)?
        tenant_id:varchar(255)? queue:varchar(255) last_error_message:text?
        last_error_stack:mediumtext? created_at:datetime(3) owner:varchar(255)? retry_policy:text?
        schedule_name:varchar(255)? occurrence:datetime(3)? shard_index:int? shard_count:int?
        meta:longtext? outcome:varchar(16) result:longtext? duration_ms:bigint?
        finished_at:datetime(3) progress:longtext? scope_limit:int? started_at:datetime(3)?
        timeout_ms:int? logs:longtext? steps:longtext?`,
      unsignedKey: true,
      // Partitioned by finished_at (migration 0018): a partitioned table's keys include it.
      primaryKey: ['id', 'finished_at'],
      constraints: [
        'ix_jobs_history_finished (finished_at, id)',
        'ix_jobs_history_type (type, finished_at)',
        'ix_jobs_history_outcome (outcome, finished_at)',
      ],
    },
    rate_limits: {
      columns:
        'rate_key:varchar(255) start_ms:bigint per_ms:bigint used:int blocked_until_ms:bigint?',
    },
    followups: {
      columns: 'job_key:varchar(255) holder_id:bigint job:longtext created_at:datetime(3)',
      constraints: ['ix_jobs_followups_holder (holder_id)'],
    },
    signals: {
      columns:
        'id:bigint name:varchar(255) signal_key:varchar(255) payload:longtext? waiter_id:bigint? created_at:datetime(3)',
      key: 'increment',
      unsignedKey: true,
      constraints: [
        'ix_jobs_signals_key (name, signal_key, id)',
        'ix_jobs_signals_waiter (waiter_id)',
        'ix_jobs_signals_prune (waiter_id, created_at, id)',
      ],
    },
  },
  sqlite: {
    // SQLite reports a PRIMARY KEY without NOT NULL as nullable (it allows one NULL there).
    jobs: {
      columns: `id:integer? type:text payload:text state:text priority:integer=0 due_at:integer
        retries_left:integer attempts:integer=0 scope:text? exclusive:integer=0 job_key:text?
        tenant_id:text? queue:text last_error_message:text? last_error_stack:text?
        created_at:integer lock_owner:text? lock_expires_at:integer? lock_token:text?
        retry_policy:text? suspended_from:text? schedule_name:text? occurrence:integer?
        shard_index:integer? shard_count:integer? meta:text? progress:text?
        cancel_requested:integer=0 scope_limit:integer? started_at:integer? timeout_ms:integer?
        logs:text? steps:text?`,
      key: 'increment',
      constraints: [
        "{p}jobs_acquire_idx (priority, due_at, id) WHERE state IN ('timer', 'async')",
        "{p}jobs_due_idx (due_at) WHERE state IN ('timer', 'async')",
        '{p}jobs_scope_idx (scope, state, priority, due_at, id) WHERE exclusive = 1 AND scope IS NOT NULL',
        'UNIQUE {p}jobs_key_idx (job_key) WHERE job_key IS NOT NULL',
        "{p}jobs_lease_idx (lock_expires_at) WHERE state = 'running'",
        '{p}jobs_schedule_idx (schedule_name, state) WHERE schedule_name IS NOT NULL',
        "{p}jobs_scope_head_idx (scope, priority, due_at, id) WHERE exclusive = 1 AND scope IS NOT NULL AND state IN ('timer', 'async')",
        "{p}jobs_scope_blocked (scope, priority, due_at, id) WHERE state = 'blocked'",
      ],
    },
    schedules: {
      columns: `name:text? spec:text next_at:integer? paused:integer=0 pending_misfire:integer=0
        skipped:integer=0 fired:integer=0 version:integer=1 created_at:integer updated_at:integer`,
      constraints: ['{p}schedules_next_idx (next_at) WHERE paused = 0'],
    },
    history: {
      columns: `id:integer? type:text payload:text priority:integer due_at:integer
        retries_left:integer attempts:integer scope:text? exclusive:integer job_key:text?
        tenant_id:text? queue:text last_error_message:text? last_error_stack:text?
        created_at:integer owner:text? retry_policy:text? schedule_name:text? occurrence:integer?
        shard_index:integer? shard_count:integer? meta:text? outcome:text result:text?
        duration_ms:integer? finished_at:integer progress:text? scope_limit:integer?
        started_at:integer? timeout_ms:integer? logs:text? steps:text?`,
      constraints: [
        '{p}jobs_history_finished_idx (finished_at, id)',
        '{p}jobs_history_type_idx (type, finished_at)',
        '{p}jobs_history_outcome_idx (outcome, finished_at)',
      ],
    },
    rate_limits: {
      columns:
        'rate_key:text? start_ms:integer per_ms:integer used:integer blocked_until_ms:integer?',
    },
    followups: {
      columns: 'job_key:text? holder_id:integer job:text created_at:integer',
      constraints: ['{p}jobs_followups_holder_idx (holder_id)'],
    },
    signals: {
      columns:
        'id:integer? name:text signal_key:text payload:text? waiter_id:integer? created_at:integer',
      key: 'increment',
      constraints: [
        '{p}jobs_signals_key_idx (name, signal_key, id)',
        '{p}jobs_signals_waiter_idx (waiter_id)',
        '{p}jobs_signals_prune_idx (created_at, id) WHERE waiter_id IS NULL',
      ],
    },
  },
};

/** Reads one column of a listing (`name:type(n)?=value`). */
function column(spec: string): ColumnDescription {
  const [, name = '', type = '', size, nullable, value] =
    /^(\w+):(\w+)(?:\((\d+)\))?(\?)?(?:=(.+))?$/.exec(spec) ?? [];
  const described: ColumnDescription = { name, type, nullable: nullable === '?' };
  if (size) described[/char/.test(type) ? 'length' : 'precision'] = Number(size);
  if (value !== undefined) described.default = value;
  return described;
}

/**
 * The store's tables on `database` with table prefix `prefix`: jobs, schedules, history, rate
 * limits and key follow-ups (the version table is the migration loader's, see `Dialect.versionTable`).
 *
 * @example
 * const [jobs] = describeTables('postgres', 'app_');
 * jobs.columns.map((c) => c.name); // ['id', 'type', 'payload', …]
 */
export function describeTables(database: TableDatabase, prefix: string): TableDescription[] {
  return Object.entries(LISTINGS[database]).map(([table, listing]) => {
    const columns = listing.columns.trim().split(/\s+/).map(column);
    const generated: Record<string, string> = database === 'mysql' ? MYSQL_GENERATED_COLUMNS : {};
    for (const c of columns) if (generated[c.name]) c.generated = generated[c.name];
    if (listing.unsignedKey) (columns[0] as ColumnDescription).unsigned = true;
    const described: TableDescription = {
      table: table as TableDescription['table'],
      name: `${prefix}${tableBaseName(table as TableName)}`,
      columns,
      primaryKey: [...(listing.primaryKey ?? [(columns[0] as ColumnDescription).name])],
      keyGeneration: listing.key ?? null,
      indexes: [],
      checks: [],
    };
    for (const text of listing.constraints ?? []) {
      const [, unique, name = '', list = '', where, check] =
        /^(UNIQUE )?(\S+) (?:\(([^)]+)\)(?: WHERE (.+))?|CHECK \((.+)\))$/.exec(
          text.replace('{p}', prefix),
        ) ?? [];
      if (check) described.checks.push({ name, expression: check });
      else described.indexes.push({ name, columns: list.split(', '), unique: !!unique, where });
    }
    return described;
  });
}
