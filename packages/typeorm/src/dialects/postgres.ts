/**
 * PostgreSQL SQL for the TypeORM store: `timestamptz(3)` times on the server clock (`now()`),
 * `FOR UPDATE SKIP LOCKED` acquisition in one statement, and a per-scope advisory lock that
 * keeps two acquirers from starting two exclusive jobs of one scope at once.
 */
import { type AcquireRequest, INSERT_JOB_COLUMNS, type SqlRow } from '@jobs/core';
import {
  ACQUIRE_ORDER,
  candidateWhere,
  type Dialect,
  JOB_COLUMN_NAMES,
  marks,
  type Operation,
  type Query,
  SCHEDULE_COLUMN_NAMES,
  selectList,
} from './dialect.js';

const quote = (identifier: string): string => `"${identifier}"`;
const INSERT_COLUMNS = INSERT_JOB_COLUMNS.map(quote).join(', ');
/** Column types of `INSERT_JOB_COLUMNS`, for the arrays a batch insert unnests. */
const COLUMN_TYPES: Record<(typeof INSERT_JOB_COLUMNS)[number], string> = {
  type: 'varchar',
  payload: 'jsonb',
  state: 'varchar',
  priority: 'integer',
  due_at: 'timestamptz',
  retries_left: 'integer',
  attempts: 'integer',
  scope: 'varchar',
  exclusive: 'boolean',
  job_key: 'varchar',
  tenant_id: 'varchar',
  queue: 'varchar',
  created_at: 'timestamptz',
  retry_policy: 'text',
  schedule_name: 'varchar',
  occurrence: 'timestamptz',
  shard_index: 'integer',
  shard_count: 'integer',
};
const INSERT_ARRAY_TYPES = INSERT_JOB_COLUMNS.map((column) => COLUMN_TYPES[column]);

export function postgresDialect(tablePrefix: string, schema: string | null): Dialect {
  const table = (name: 'jobs' | 'schedules' | 'migrations'): string =>
    `${schema ? `${quote(schema)}.` : ''}${quote(`${tablePrefix}${name === 'migrations' ? 'jobs_migrations' : name}`)}`;
  const jobs = table('jobs');
  const schedules = table('schedules');
  const idx = (name: string): string => quote(`${tablePrefix}${name}`);
  const jobColumns = (alias?: string): string =>
    selectList(JOB_COLUMN_NAMES, quote, { payload: (c) => `${c}::text` }, alias);

  const d: Dialect = {
    kind: 'postgres',
    table,
    quote,
    placeholders(sql) {
      let n = 0;
      return sql.replace(/\?/g, () => `$${++n}`);
    },
    now: 'now()',
    nowPlusMs: `(now() + (?::double precision * interval '1 millisecond'))`,
    TRUE: 'true',
    FALSE: 'false',
    time: (date) => date.toISOString(),
    bool: (value) => value,
    jobColumns,
    scheduleColumns: selectList(SCHEDULE_COLUMN_NAMES, quote),
    latestRead: '',
    returning: true,
    setup: schema ? [`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`] : [],
    migrations: [
      [
        `CREATE TABLE IF NOT EXISTS ${jobs} (
          "id" bigserial PRIMARY KEY,
          "type" varchar(255) NOT NULL,
          "payload" jsonb NOT NULL,
          "state" varchar(16) NOT NULL,
          "priority" integer NOT NULL DEFAULT 0,
          "due_at" timestamptz(3) NOT NULL,
          "retries_left" integer NOT NULL,
          "attempts" integer NOT NULL DEFAULT 0,
          "scope" varchar(255),
          "exclusive" boolean NOT NULL DEFAULT false,
          "job_key" varchar(255),
          "tenant_id" varchar(255),
          "queue" varchar(255) NOT NULL DEFAULT 'default',
          "last_error_message" text,
          "last_error_stack" text,
          "created_at" timestamptz(3) NOT NULL,
          "lock_owner" varchar(255),
          "lock_expires_at" timestamptz(3),
          "lock_token" varchar(64),
          "retry_policy" text,
          "suspended_from" varchar(16),
          "schedule_name" varchar(255),
          "occurrence" timestamptz(3),
          "shard_index" integer,
          "shard_count" integer
        )`,
        `CREATE UNIQUE INDEX IF NOT EXISTS ${idx('jobs_key_uq')} ON ${jobs} ("job_key")`,
        `CREATE INDEX IF NOT EXISTS ${idx('jobs_due_idx')} ON ${jobs} ("state", "due_at")`,
        `CREATE INDEX IF NOT EXISTS ${idx('jobs_scope_idx')} ON ${jobs} ("scope")`,
        `CREATE INDEX IF NOT EXISTS ${idx('jobs_schedule_idx')} ON ${jobs} ("schedule_name")`,
        `CREATE TABLE IF NOT EXISTS ${schedules} (
          "name" varchar(255) PRIMARY KEY,
          "spec" text NOT NULL,
          "next_at" timestamptz(3),
          "paused" boolean NOT NULL DEFAULT false,
          "pending_misfire" boolean NOT NULL DEFAULT false,
          "skipped" integer NOT NULL DEFAULT 0,
          "fired" integer NOT NULL DEFAULT 0,
          "version" integer NOT NULL DEFAULT 1,
          "created_at" timestamptz(3) NOT NULL,
          "updated_at" timestamptz(3) NOT NULL
        )`,
      ],
    ],
    migrateLock: {
      // Transaction-scoped: released by the COMMIT that also makes the DDL visible.
      lock: [
        {
          sql: 'SELECT pg_advisory_xact_lock(hashtextextended(?, 0))',
          params: [`${jobs}:migrate`],
        },
      ],
      unlock: [],
      transactional: true,
    },
    *acquire(request: AcquireRequest, token: string): Operation<SqlRow[]> {
      const where = candidateWhere(d, request);
      const acquired = (yield {
        sql: `WITH cand AS (
            SELECT j."id", j."state" AS old_state FROM ${jobs} j
            WHERE ${where.sql} ${ACQUIRE_ORDER} LIMIT ? FOR UPDATE OF j SKIP LOCKED)
          UPDATE ${jobs} AS t SET "state" = 'running', "lock_owner" = ?,
            "lock_expires_at" = ${d.nowPlusMs}, "lock_token" = ?, "attempts" = t."attempts" + 1
          FROM cand WHERE t."id" = cand."id"
          RETURNING ${jobColumns('t')}, cand.old_state AS old_state`,
        params: [...where.params, request.limit, request.owner, request.leaseMs, token],
      }).rows;
      return acquired;
    },
    acquireInTransaction: false,
    *completeAndAcquire(
      done: readonly { id: string; token: string }[],
      request: AcquireRequest,
      token: string,
    ): Operation<{ completed: string[]; rows: SqlRow[] }> {
      const where = candidateWhere(d, request);
      // One statement: delete the finished batch, lease the next. Both see one snapshot, so a
      // just-completed exclusive job still blocks its scope until the next call (never less safe).
      const result = (yield {
        sql: `WITH done AS (
            DELETE FROM ${jobs} WHERE "id" IN (${marks(done.length)})
              AND ("id", "lock_token") IN (${done.map(() => '(?, ?)').join(', ')}) AND "state" = 'running'
            RETURNING "id"),
          cand AS (
            SELECT j."id", j."state" AS old_state FROM ${jobs} j
            WHERE ${where.sql} ${ACQUIRE_ORDER} LIMIT ? FOR UPDATE OF j SKIP LOCKED),
          upd AS (
            UPDATE ${jobs} AS t SET "state" = 'running', "lock_owner" = ?,
              "lock_expires_at" = ${d.nowPlusMs}, "lock_token" = ?, "attempts" = t."attempts" + 1
            FROM cand WHERE t."id" = cand."id"
            RETURNING ${jobColumns('t')}, cand.old_state AS old_state)
          SELECT d.completed_ids, u.* FROM (SELECT array_agg("id")::text[] AS completed_ids FROM done) d
            LEFT JOIN upd u ON true`,
        params: [
          ...done.map((ref) => ref.id),
          ...done.flatMap((ref) => [ref.id, ref.token]),
          ...where.params,
          request.limit,
          request.owner,
          request.leaseMs,
          token,
        ],
      }).rows;
      const completed = ((result[0]?.completed_ids as string[] | null) ?? []).map(String);
      const rows = result
        .filter((row) => row.id !== null && row.id !== undefined)
        .map(({ completed_ids: _, ...row }) => row);
      return { completed, rows };
    },
    *recheckExclusive(rows: SqlRow[], token: string): Operation<SqlRow[]> {
      const exclusive = rows.filter((row) => row.exclusive === true && row.scope !== null);
      if (exclusive.length === 0) return rows;
      // The acquiring statement decided on one snapshot, so two acquirers whose snapshots
      // disagree about the head of a scope could each have taken one exclusive job of it.
      // Serialise per scope and look at committed rows: another live exclusive holder means
      // ours goes back (the first to look gives way, so exactly one of the two keeps its job).
      const scopes = [...new Set(exclusive.map((row) => String(row.scope)))].sort();
      for (const scope of scopes) {
        yield {
          sql: 'SELECT pg_advisory_xact_lock(hashtextextended(?, 0))',
          params: [`${jobs}:${scope}`],
        };
      }
      const mine = rows.map((row) => String(row.id));
      const holders = (yield {
        sql: `SELECT DISTINCT "scope" FROM ${jobs} WHERE "scope" IN (${marks(scopes.length)})
          AND "exclusive" = true AND "state" = 'running' AND "lock_expires_at" > clock_timestamp()
          AND "id" NOT IN (${marks(mine.length)})`,
        params: [...scopes, ...mine],
      }).rows.map((row) => String(row.scope));
      if (holders.length === 0) return rows;
      const back = exclusive.filter((row) => holders.includes(String(row.scope)));
      for (const row of back) {
        yield {
          sql: `UPDATE ${jobs} SET "state" = ?, "attempts" = "attempts" - 1, "lock_owner" = NULL,
            "lock_expires_at" = NULL, "lock_token" = NULL WHERE "id" = ? AND "lock_token" = ?`,
          params: [row.old_state, row.id, token],
        };
      }
      return rows.filter((row) => !back.includes(row));
    },
    lockKeys(keys: readonly string[]): Query | null {
      // The sorted subquery (kept apart by OFFSET 0) makes the locks go in key order.
      return {
        sql: `SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) AS locked
          FROM (SELECT k FROM unnest(?::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n OFFSET 0) s`,
        params: [keys.map((key) => `${jobs}:key:${key}`)],
      };
    },
    *insertJobs(rows: readonly (readonly unknown[])[]): Operation<SqlRow[]> {
      // One array parameter per column (18 parameters whatever the batch size), unnested in
      // order: the sequence hands out ids row by row in that order.
      const columns = INSERT_JOB_COLUMNS.map((_, i) => rows.map((row) => row[i] ?? null));
      const inserted = (yield {
        sql: `INSERT INTO ${jobs} (${INSERT_COLUMNS})
          SELECT ${INSERT_JOB_COLUMNS.map((c) => `u.${quote(c)}`).join(', ')}
          FROM unnest(${INSERT_ARRAY_TYPES.map((t) => `?::${t}[]`).join(', ')}) WITH ORDINALITY
            AS u(${INSERT_COLUMNS}, n)
          ORDER BY u.n
          RETURNING ${jobColumns()}`,
        params: columns,
      }).rows;
      return inserted.sort((a, b) => (BigInt(String(a.id)) < BigInt(String(b.id)) ? -1 : 1));
    },
    *insertJob(values: readonly unknown[]): Operation<SqlRow | null> {
      const rows = (yield {
        sql: `INSERT INTO ${jobs} (${INSERT_COLUMNS}) VALUES (${marks(values.length)})
          ON CONFLICT ("job_key") DO NOTHING RETURNING ${jobColumns()}`,
        params: values,
      }).rows;
      return rows[0] ?? null;
    },
  };
  return d;
}
