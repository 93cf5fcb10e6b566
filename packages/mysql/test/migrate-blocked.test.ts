/**
 * Migration 0008 (`blocked_set`): `state` and `suspended_from` are VARCHARs without a CHECK, so
 * the state `blocked` needs only its index. A database at version 7 with jobs in it moves to
 * version 8 with every row as it was, takes blocked jobs (kept out of the acquisition index by
 * the generated `waiting`), reads a scope's blocked jobs from `ix_jobs_scope_blocked` in
 * acquisition order, and the migration run again (its record lost) changes nothing.
 */
import { migrationSql, mysqlDialect, sqlEnv } from '@jobs/core/sql';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { MYSQL_URL, randomName, reachable, sql, TestDatabase } from './helpers.js';

const ALL_VERSIONS = mysqlDialect({ tablePrefix: 'jobs_' }).migrations.map((m) => m.version);

const db = new TestDatabase();

/** Tables under `prefix` at version 7: what `migrate()` ran for versions 1–7, as one script. */
async function createVersion7(prefix: string): Promise<void> {
  const dialect = mysqlDialect({ tablePrefix: prefix, database: db.name });
  const migrations = dialect.migrations.filter((m) => m.version <= 7);
  const connection = await mysql.createConnection({ uri: MYSQL_URL, multipleStatements: true });
  try {
    await connection.query(migrationSql(sqlEnv({ ...dialect, migrations }, 'test')));
  } finally {
    await connection.end();
  }
}

/** A waiting, a running, a suspended, a dead-letter and a limited job; ids 1–5 (6 finished). */
async function addJobs(jobs: string): Promise<void> {
  const at = "'2026-01-02 03:04:05.678'";
  await sql(`INSERT INTO ${jobs} (type, payload, state, priority, due_at, retries_left, attempts,
      scope, exclusive, job_key, tenant_id, queue, last_error_message, last_error_stack,
      created_at, lock_owner, lock_expires_at, lock_token, retry_policy, suspended_from,
      schedule_name, occurrence, shard_index, shard_count, meta, progress, cancel_requested,
      scope_limit) VALUES
    ('waiting', '{"n":1}', 'timer', 5, ${at}, 3, 0, NULL, 0, 'key-1', 'tenant-a', 'q1', NULL,
     NULL, ${at}, NULL, NULL, NULL, '{"kind":"fixed","delay":"PT1S"}', NULL, NULL, NULL, NULL,
     NULL, '{"traceparent":"00-ab-cd-01"}', NULL, 0, NULL),
    ('running', '[1,2]', 'running', -2, ${at}, 2, 1, NULL, 0, NULL, NULL, 'default',
     'first try failed', 'Error: at x', ${at}, 'owner-1', ${at},
     '00000000-0000-4000-8000-000000000001', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
     '{"done":0.5}', 1, NULL),
    ('suspended', '"s"', 'suspended', 0, ${at}, 0, 0, NULL, 0, NULL, NULL, 'default', NULL,
     NULL, ${at}, NULL, NULL, NULL, NULL, 'timer', 'nightly', ${at}, 1, 4, NULL, NULL, 0, NULL),
    ('dead', 'null', 'deadletter', 0, ${at}, 0, 4, NULL, 0, NULL, NULL, 'default', 'boom', NULL,
     ${at}, 'owner-2', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL),
    ('limited', '{}', 'async', 1, ${at}, 3, 0, 'scope-a', 1, NULL, NULL, 'default', NULL, NULL,
     ${at}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 3),
    ('finished', '{}', 'async', 0, ${at}, 3, 0, NULL, 0, NULL, NULL, 'default', NULL, NULL,
     ${at}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL)`);
  await sql(`DELETE FROM ${jobs} WHERE type = 'finished'`);
}

/** Columns later migrations add (0009: `started_at`): kept out of the before/after comparison. */
/** Columns later migrations add (0009 started_at, 0012 timeout_ms and logs, 0013 steps). */
const LATER_COLUMNS = new Set(['started_at', 'timeout_ms', 'logs', 'steps']);

function withoutLater(rows: Record<string, unknown>[]): Record<string, unknown>[] {
  return rows.map((row) =>
    Object.fromEntries(Object.entries(row).filter(([name]) => !LATER_COLUMNS.has(name))),
  );
}

/**
 * The jobs table's columns, indexes and CHECKs as information_schema lists them. Collations are
 * left out: 0010 (after this one) moves every text column to a NO PAD collation, see
 * migrate-exact-names.test.ts.
 */
async function schemaOf(prefix: string) {
  const where = 'WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?';
  const table = [db.name, `${prefix}jobs`];
  return {
    columns: (
      await sql(
        `SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA,
           GENERATION_EXPRESSION
         FROM information_schema.COLUMNS ${where} ORDER BY ORDINAL_POSITION`,
        table,
      )
    ).filter((column) => !LATER_COLUMNS.has(String(column.COLUMN_NAME))),
    indexes: await sql(
      `SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS
       ${where} ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
      table,
    ),
    checks: await sql(
      `SELECT CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS
       ${where} AND CONSTRAINT_TYPE = 'CHECK'`,
      table,
    ),
  };
}

describe.skipIf(!reachable)('migration 0008: the state blocked', () => {
  db.register();

  it('a database at version 7 moves to 8 with every row and value kept, and takes blocked jobs', async () => {
    const prefix = `${randomName('b')}_`;
    const jobs = `\`${db.name}\`.\`${prefix}jobs\``;
    await createVersion7(prefix);
    await addJobs(jobs);
    const rows = await sql(`SELECT * FROM ${jobs} ORDER BY id`);
    expect(rows).toHaveLength(5);
    const before = await schemaOf(prefix);
    expect(before.checks).toEqual([]);

    await db.store({ tablePrefix: prefix }).migrate();
    const versions = await sql(
      `SELECT version FROM \`${db.name}\`.\`${prefix}jobs_migrations\` ORDER BY version`,
    );
    expect(versions.map((r) => Number(r.version))).toEqual(ALL_VERSIONS);
    expect(withoutLater(await sql(`SELECT * FROM ${jobs} ORDER BY id`))).toEqual(rows);
    const after = await schemaOf(prefix);
    expect(after.columns).toEqual(before.columns);
    expect(after.checks).toEqual([]);
    expect(after.indexes.filter((i) => i.INDEX_NAME !== 'ix_jobs_scope_blocked')).toEqual(
      before.indexes,
    );
    expect(
      after.indexes
        .filter((i) => i.INDEX_NAME === 'ix_jobs_scope_blocked')
        .map((i) => [i.COLUMN_NAME, Number(i.NON_UNIQUE)]),
    ).toEqual([
      ['scope', 1],
      ['state', 1],
      ['neg_priority', 1],
      ['due_at', 1],
      ['id', 1],
    ]);

    // blocked is stored as it is, and stays out of the acquisition index (`waiting` NULL).
    await sql(`UPDATE ${jobs} SET state = 'blocked' WHERE type = 'limited'`);
    await sql(
      `UPDATE ${jobs} SET state = 'suspended', suspended_from = 'blocked' WHERE type = 'waiting'`,
    );
    expect(
      await sql(`SELECT type, state, suspended_from, waiting FROM ${jobs} WHERE id IN (1, 5)`),
    ).toEqual([
      { type: 'waiting', state: 'suspended', suspended_from: 'blocked', waiting: null },
      { type: 'limited', state: 'blocked', suspended_from: null, waiting: null },
    ]);
    // AUTO_INCREMENT continues after the finished job's id 6.
    const inserted = (await sql(
      `INSERT INTO ${jobs} (type, payload, state, due_at, retries_left, queue, created_at)
       VALUES ('new', '{}', 'async', UTC_TIMESTAMP(3), 0, 'default', UTC_TIMESTAMP(3))`,
    )) as unknown as { insertId: number };
    expect(inserted.insertId).toBe(7);

    // 0008 run once more (its version record lost) finds nothing to change.
    await sql(`DELETE FROM \`${db.name}\`.\`${prefix}jobs_migrations\` WHERE version = 8`);
    await db.store({ tablePrefix: prefix }).migrate();
    expect(await schemaOf(prefix)).toEqual(after);
  });

  it("a scope's first blocked job is read from ix_jobs_scope_blocked, in order, without a sort", async () => {
    const prefix = `${randomName('e')}_`;
    const jobs = `\`${db.name}\`.\`${prefix}jobs\``;
    await db.store({ tablePrefix: prefix }).migrate();
    // A backlog of 2,000 waiting and running jobs over 20 scopes, 30 blocked ones in scope-a.
    const values = (n: number, state: string, scope: string) =>
      `('t', '{}', '${state}', ${n % 3}, UTC_TIMESTAMP(3) - INTERVAL ${n} SECOND, 3, '${scope}', 1,
        2, 'default', UTC_TIMESTAMP(3))`;
    const insert = `INSERT INTO ${jobs} (type, payload, state, priority, due_at, retries_left,
      scope, exclusive, scope_limit, queue, created_at) VALUES `;
    const backlog = Array.from({ length: 2000 }, (_, i) =>
      values(i + 1, (i + 1) % 10 === 0 ? 'running' : 'async', `scope-${(i + 1) % 20}`),
    );
    await sql(insert + backlog.join(', '));
    const blocked = Array.from({ length: 30 }, (_, i) => values(i + 1, 'blocked', 'scope-a'));
    await sql(insert + blocked.join(', '));
    await sql(`ANALYZE TABLE ${jobs}`);
    // `neg_priority` is the priority order MySQL/MariaDB read from an ascending index.
    const first = `SELECT id FROM ${jobs} WHERE scope = 'scope-a' AND state = 'blocked'
      ORDER BY neg_priority, due_at, id LIMIT 1`;
    const [plan] = await sql(`EXPLAIN ${first}`);
    expect(plan).toMatchObject({ key: 'ix_jobs_scope_blocked' });
    expect(String(plan?.Extra)).not.toMatch(/filesort/i);
    // The highest priority (2), then the earliest due: n = 29 of the blocked rows 2001–2030.
    expect((await sql(first)).map((r) => Number(r.id))).toEqual([2029]);
  });
});
