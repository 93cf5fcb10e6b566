/**
 * SQLite SQL (better-sqlite3 driver) for the TypeORM store: times are integer epoch
 * milliseconds on the machine clock, and every operation runs synchronously in one
 * `BEGIN IMMEDIATE` transaction, so acquisition is one plain `UPDATE … RETURNING`.
 */
import { type AcquireRequest, INSERT_JOB_COLUMNS, type SqlRow } from '@jobs/core';
import {
  ACQUIRE_ORDER,
  candidateWhere,
  type Dialect,
  JOB_COLUMN_NAMES,
  marks,
  type Operation,
  SCHEDULE_COLUMN_NAMES,
  selectList,
} from './dialect.js';

const quote = (identifier: string): string => `"${identifier}"`;
const INSERT_COLUMNS = INSERT_JOB_COLUMNS.map(quote).join(', ');
/** Epoch ms. `julianday('now')` has ms precision and is fixed for one statement. */
const NOW = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`;

export function sqliteDialect(tablePrefix: string): Dialect {
  const table = (name: 'jobs' | 'schedules' | 'migrations'): string =>
    quote(`${tablePrefix}${name === 'migrations' ? 'jobs_migrations' : name}`);
  const jobs = table('jobs');
  const schedules = table('schedules');
  const idx = (name: string): string => quote(`${tablePrefix}${name}`);
  const jobColumns = (alias?: string): string => selectList(JOB_COLUMN_NAMES, quote, {}, alias);

  const d: Dialect = {
    kind: 'sqlite',
    table,
    quote,
    placeholders: (sql) => sql,
    now: NOW,
    nowPlusMs: `(${NOW} + CAST(ROUND(?) AS INTEGER))`,
    TRUE: '1',
    FALSE: '0',
    time: (date) => date.getTime(),
    bool: (value) => (value ? 1 : 0),
    jobColumns,
    scheduleColumns: selectList(SCHEDULE_COLUMN_NAMES, quote),
    latestRead: '',
    setup: [],
    returning: true,
    migrations: [
      [
        `CREATE TABLE IF NOT EXISTS ${jobs} (
          "id" INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
          "type" TEXT NOT NULL,
          "payload" TEXT NOT NULL,
          "state" TEXT NOT NULL,
          "priority" INTEGER NOT NULL DEFAULT (0),
          "due_at" INTEGER NOT NULL,
          "retries_left" INTEGER NOT NULL,
          "attempts" INTEGER NOT NULL DEFAULT (0),
          "scope" TEXT,
          "exclusive" INTEGER NOT NULL DEFAULT (0),
          "job_key" TEXT,
          "tenant_id" TEXT,
          "queue" TEXT NOT NULL DEFAULT ('default'),
          "last_error_message" TEXT,
          "last_error_stack" TEXT,
          "created_at" INTEGER NOT NULL,
          "lock_owner" TEXT,
          "lock_expires_at" INTEGER,
          "lock_token" TEXT,
          "retry_policy" TEXT,
          "suspended_from" TEXT,
          "schedule_name" TEXT,
          "occurrence" INTEGER,
          "shard_index" INTEGER,
          "shard_count" INTEGER
        )`,
        `CREATE UNIQUE INDEX IF NOT EXISTS ${idx('jobs_key_uq')} ON ${jobs} ("job_key")`,
        `CREATE INDEX IF NOT EXISTS ${idx('jobs_due_idx')} ON ${jobs} ("state", "due_at")`,
        `CREATE INDEX IF NOT EXISTS ${idx('jobs_scope_idx')} ON ${jobs} ("scope")`,
        `CREATE INDEX IF NOT EXISTS ${idx('jobs_schedule_idx')} ON ${jobs} ("schedule_name")`,
        `CREATE TABLE IF NOT EXISTS ${schedules} (
          "name" TEXT PRIMARY KEY NOT NULL,
          "spec" TEXT NOT NULL,
          "next_at" INTEGER,
          "paused" INTEGER NOT NULL DEFAULT (0),
          "pending_misfire" INTEGER NOT NULL DEFAULT (0),
          "skipped" INTEGER NOT NULL DEFAULT (0),
          "fired" INTEGER NOT NULL DEFAULT (0),
          "version" INTEGER NOT NULL DEFAULT (1),
          "created_at" INTEGER NOT NULL,
          "updated_at" INTEGER NOT NULL
        )`,
      ],
    ],
    // BEGIN IMMEDIATE around the migration is the lock.
    migrateLock: { lock: [], unlock: [], transactional: true },
    *acquire(request: AcquireRequest, token: string): Operation<SqlRow[]> {
      const where = candidateWhere(d, request);
      return (yield {
        sql: `UPDATE ${jobs} SET "state" = 'running', "lock_owner" = ?, "lock_expires_at" = ${d.nowPlusMs},
            "lock_token" = ?, "attempts" = "attempts" + 1
          WHERE "id" IN (SELECT j."id" FROM ${jobs} j WHERE ${where.sql} ${ACQUIRE_ORDER} LIMIT ?)
          RETURNING ${jobColumns()}`,
        params: [request.owner, request.leaseMs, token, ...where.params, request.limit],
      }).rows;
    },
    acquireInTransaction: false,
    lockKeys: () => null,
    *insertJobs(rows: readonly (readonly unknown[])[]): Operation<SqlRow[]> {
      // In-process and inside one transaction: a prepared single-row insert is as fast.
      const inserted: SqlRow[] = [];
      for (const values of rows) {
        const row = (yield {
          sql: `INSERT INTO ${jobs} (${INSERT_COLUMNS}) VALUES (${marks(values.length)}) RETURNING ${jobColumns()}`,
          params: values,
        }).rows[0];
        if (row) inserted.push(row);
      }
      return inserted;
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
