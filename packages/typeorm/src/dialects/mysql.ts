/**
 * MySQL 8 / MariaDB 10.6+ SQL for the TypeORM store: `DATETIME(3)` in UTC on the server clock
 * (`UTC_TIMESTAMP(3)`), read back as text so the DataSource's `timezone` option cannot shift
 * them, and acquisition as lock-then-update (`FOR UPDATE SKIP LOCKED`; no `UPDATE … RETURNING`).
 */
import { randomUUID } from 'node:crypto';
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

const quote = (identifier: string): string => `\`${identifier}\``;
const INSERT_COLUMNS = INSERT_JOB_COLUMNS.map(quote).join(', ');
const asText = (column: string): string => `CAST(${column} AS CHAR)`;
const TIME_COLUMNS = {
  due_at: asText,
  created_at: asText,
  lock_expires_at: asText,
  occurrence: asText,
};

/** `2026-01-01 00:00:00.000`, UTC. */
function utcText(date: Date): string {
  return date.toISOString().replace('T', ' ').replace('Z', '');
}

/** True for MySQL's duplicate-key error (ER_DUP_ENTRY), however TypeORM wrapped it. */
export function isDuplicateKey(error: unknown): boolean {
  const e = error as { errno?: number; driverError?: { errno?: number } } | null;
  return e?.driverError?.errno === 1062 || e?.errno === 1062;
}

export function mysqlDialect(tablePrefix: string): Dialect {
  const table = (name: 'jobs' | 'schedules' | 'migrations'): string =>
    quote(`${tablePrefix}${name === 'migrations' ? 'jobs_migrations' : name}`);
  const jobs = table('jobs');
  const schedules = table('schedules');
  const idx = (name: string): string => quote(`${tablePrefix}${name}`);
  const jobColumns = (alias?: string): string =>
    selectList(JOB_COLUMN_NAMES, quote, TIME_COLUMNS, alias);

  const d: Dialect = {
    kind: 'mysql',
    table,
    quote,
    placeholders: (sql) => sql,
    now: 'UTC_TIMESTAMP(3)',
    nowPlusMs: 'TIMESTAMPADD(MICROSECOND, ROUND(? * 1000), UTC_TIMESTAMP(3))',
    TRUE: '1',
    FALSE: '0',
    time: utcText,
    bool: (value) => (value ? 1 : 0),
    jobColumns,
    scheduleColumns: selectList(SCHEDULE_COLUMN_NAMES, quote, {
      next_at: asText,
      created_at: asText,
      updated_at: asText,
    }),
    // A locking read sees the latest committed row even in a REPEATABLE READ transaction.
    latestRead: ' LOCK IN SHARE MODE',
    setup: [],
    returning: false,
    migrations: [
      [
        `CREATE TABLE IF NOT EXISTS ${jobs} (
          \`id\` BIGINT NOT NULL AUTO_INCREMENT,
          \`type\` VARCHAR(255) NOT NULL,
          \`payload\` LONGTEXT NOT NULL,
          \`state\` VARCHAR(16) NOT NULL,
          \`priority\` INT NOT NULL DEFAULT 0,
          \`due_at\` DATETIME(3) NOT NULL,
          \`retries_left\` INT NOT NULL,
          \`attempts\` INT NOT NULL DEFAULT 0,
          \`scope\` VARCHAR(255) NULL,
          \`exclusive\` TINYINT(1) NOT NULL DEFAULT 0,
          \`job_key\` VARCHAR(255) NULL,
          \`tenant_id\` VARCHAR(255) NULL,
          \`queue\` VARCHAR(255) NOT NULL DEFAULT 'default',
          \`last_error_message\` TEXT NULL,
          \`last_error_stack\` TEXT NULL,
          \`created_at\` DATETIME(3) NOT NULL,
          \`lock_owner\` VARCHAR(255) NULL,
          \`lock_expires_at\` DATETIME(3) NULL,
          \`lock_token\` VARCHAR(64) NULL,
          \`retry_policy\` TEXT NULL,
          \`suspended_from\` VARCHAR(16) NULL,
          \`schedule_name\` VARCHAR(255) NULL,
          \`occurrence\` DATETIME(3) NULL,
          \`shard_index\` INT NULL,
          \`shard_count\` INT NULL,
          PRIMARY KEY (\`id\`),
          UNIQUE KEY ${idx('jobs_key_uq')} (\`job_key\`),
          KEY ${idx('jobs_due_idx')} (\`state\`, \`due_at\`),
          KEY ${idx('jobs_scope_idx')} (\`scope\`),
          KEY ${idx('jobs_schedule_idx')} (\`schedule_name\`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
        `CREATE TABLE IF NOT EXISTS ${schedules} (
          \`name\` VARCHAR(255) NOT NULL,
          \`spec\` LONGTEXT NOT NULL,
          \`next_at\` DATETIME(3) NULL,
          \`paused\` TINYINT(1) NOT NULL DEFAULT 0,
          \`pending_misfire\` TINYINT(1) NOT NULL DEFAULT 0,
          \`skipped\` INT NOT NULL DEFAULT 0,
          \`fired\` INT NOT NULL DEFAULT 0,
          \`version\` INT NOT NULL DEFAULT 1,
          \`created_at\` DATETIME(3) NOT NULL,
          \`updated_at\` DATETIME(3) NOT NULL,
          PRIMARY KEY (\`name\`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
      ],
    ],
    migrateLock: {
      // DDL commits implicitly in MySQL, so a session lock (held by this connection) guards it.
      lock: [{ sql: 'SELECT GET_LOCK(?, 60) AS got', params: [`${tablePrefix}jobs_migrate`] }],
      unlock: [
        { sql: 'SELECT RELEASE_LOCK(?) AS released', params: [`${tablePrefix}jobs_migrate`] },
      ],
      transactional: false,
    },
    *acquire(request: AcquireRequest, token: string): Operation<SqlRow[]> {
      const where = candidateWhere(d, request);
      // Choose with a plain read (the exclusive-scope subqueries must not take or skip locks),
      // then lock what is still waiting, skipping rows other acquirers hold.
      const chosen = (yield {
        sql: `SELECT j.\`id\` FROM ${jobs} j WHERE ${where.sql} ${ACQUIRE_ORDER} LIMIT ?`,
        params: [...where.params, request.limit],
      }).rows.map((row) => String(row.id));
      if (chosen.length === 0) return [];
      const locked = (yield {
        sql: `SELECT \`id\`, \`state\` AS old_state, \`scope\`, \`exclusive\` FROM ${jobs}
          WHERE \`id\` IN (${marks(chosen.length)}) AND \`state\` IN ('timer', 'async')
            AND \`due_at\` <= UTC_TIMESTAMP(3) FOR UPDATE SKIP LOCKED`,
        params: chosen,
      }).rows;
      if (locked.length === 0) return [];
      let ids = locked.map((row) => String(row.id));
      yield {
        sql: `UPDATE ${jobs} SET \`state\` = 'running', \`lock_owner\` = ?,
            \`lock_expires_at\` = ${d.nowPlusMs}, \`lock_token\` = ?, \`attempts\` = \`attempts\` + 1
          WHERE \`id\` IN (${marks(ids.length)})`,
        params: [request.owner, request.leaseMs, token, ...ids],
      };
      const exclusive = locked.filter((row) => Number(row.exclusive) === 1 && row.scope !== null);
      if (exclusive.length > 0) {
        // Two acquirers whose reads disagree about the head of a scope could each take one
        // exclusive job of it. A locking read of the scope's running rows waits for (or
        // deadlocks with) the other acquirer, then sees its committed holder.
        const scopes = [...new Set(exclusive.map((row) => String(row.scope)))];
        const holders = (yield {
          sql: `SELECT DISTINCT \`scope\` FROM ${jobs} WHERE \`scope\` IN (${marks(scopes.length)})
            AND \`exclusive\` = 1 AND \`state\` = 'running' AND \`lock_expires_at\` > UTC_TIMESTAMP(3)
            AND \`id\` NOT IN (${marks(ids.length)}) LOCK IN SHARE MODE`,
          params: [...scopes, ...ids],
        }).rows.map((row) => String(row.scope));
        const back = exclusive.filter((row) => holders.includes(String(row.scope)));
        for (const row of back) {
          yield {
            sql: `UPDATE ${jobs} SET \`state\` = ?, \`attempts\` = \`attempts\` - 1, \`lock_owner\` = NULL,
              \`lock_expires_at\` = NULL, \`lock_token\` = NULL WHERE \`id\` = ?`,
            params: [row.old_state, row.id],
          };
        }
        const backIds = new Set(back.map((row) => String(row.id)));
        ids = ids.filter((id) => !backIds.has(id));
        if (ids.length === 0) return [];
      }
      return (yield {
        sql: `SELECT ${jobColumns()} FROM ${jobs} WHERE \`id\` IN (${marks(ids.length)})`,
        params: ids,
      }).rows;
    },
    acquireInTransaction: true,
    lockKeys: () => null,
    *insertJobs(rows: readonly (readonly unknown[])[]): Operation<SqlRow[]> {
      // No RETURNING, and one statement's AUTO_INCREMENT ids need not be consecutive: mark the
      // rows with a one-off token, read them back from the first id on, then clear the mark.
      const mark = `insert:${randomUUID()}`;
      const first = (yield {
        sql: `INSERT INTO ${jobs} (${INSERT_COLUMNS}, \`lock_token\`) VALUES ${rows.map((r) => `(${marks(r.length + 1)})`).join(', ')}`,
        params: rows.flatMap((r) => [...r, mark]),
      }).insertId;
      const inserted = (yield {
        sql: `SELECT ${jobColumns()} FROM ${jobs} WHERE \`id\` >= ? AND \`lock_token\` = ? ORDER BY \`id\``,
        params: [first, mark],
      }).rows;
      yield {
        sql: `UPDATE ${jobs} SET \`lock_token\` = NULL WHERE \`id\` >= ? AND \`lock_token\` = ?`,
        params: [first, mark],
      };
      return inserted.map((row) => ({ ...row, lock_token: null }));
    },
    *insertJob(values: readonly unknown[]): Operation<SqlRow | null> {
      let insertId: string | null;
      try {
        insertId = (yield {
          sql: `INSERT INTO ${jobs} (${INSERT_COLUMNS}) VALUES (${marks(values.length)})`,
          params: values,
        }).insertId;
      } catch (error) {
        // A duplicate key only undoes this statement; the transaction goes on.
        if (isDuplicateKey(error)) return null;
        throw error;
      }
      const rows = (yield {
        sql: `SELECT ${jobColumns()} FROM ${jobs} WHERE \`id\` = ?`,
        params: [insertId],
      }).rows;
      return rows[0] ?? null;
    },
  };
  return d;
}
