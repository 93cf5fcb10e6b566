/**
 * Migration 0008 (`blocked_set`): SQLite cannot change a CHECK, so the jobs table is rebuilt. A
 * database at version 7 with jobs in it moves to version 8 with the same columns, rows, values,
 * indexes and AUTOINCREMENT mark, then takes the state `blocked` (also as `suspended_from`),
 * and a scope's blocked jobs are read from the new partial index in acquisition order.
 */
import { applyMigrations, loadMigrations } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { freshFile, openStore } from './helpers.js';

const P = 'b_';

/** A database file at version 7, as `migrate()` of the previous release left it. */
function version7(): Database.Database {
  const db = new Database(freshFile());
  applyMigrations(
    db,
    P,
    loadMigrations().filter((m) => m.version <= 7),
  );
  return db;
}

/** A waiting, a running, a suspended, a dead-letter and a limited job; ids 1–5 (6 finished). */
function addJobs(db: Database.Database): void {
  const insert = db.prepare(
    `INSERT INTO ${P}jobs (type, payload, state, priority, due_at, retries_left, attempts, scope,
       exclusive, job_key, tenant_id, queue, last_error_message, last_error_stack, created_at,
       lock_owner, lock_expires_at, lock_token, retry_policy, suspended_from, schedule_name,
       occurrence, shard_index, shard_count, meta, progress, cancel_requested, scope_limit)
     VALUES (@type, @payload, @state, @priority, 1767323045678, @retries, @attempts, @scope,
       @exclusive, @key, @tenant, @queue, @error, @stack, 1767323000000, @owner, @expires, @token,
       @policy, @from, @schedule, @occurrence, @shardIndex, @shardCount, @meta, @progress,
       @cancel, @limit)`,
  );
  const none = {
    priority: 0,
    retries: 3,
    attempts: 0,
    scope: null,
    exclusive: 0,
    key: null,
    tenant: null,
    queue: 'default',
    error: null,
    stack: null,
    owner: null,
    expires: null,
    token: null,
    policy: null,
    from: null,
    schedule: null,
    occurrence: null,
    shardIndex: null,
    shardCount: null,
    meta: null,
    progress: null,
    cancel: 0,
    limit: null,
  };
  for (const job of [
    {
      type: 'waiting',
      payload: '{"n":1}',
      state: 'timer',
      priority: 5,
      key: 'key-1',
      tenant: 'tenant-a',
      queue: 'q1',
      policy: '{"kind":"fixed","delay":"PT1S"}',
      meta: '{"traceparent":"00-ab-cd-01"}',
    },
    {
      type: 'running',
      payload: '[1,2]',
      state: 'running',
      priority: -2,
      attempts: 1,
      error: 'first try failed',
      stack: 'Error: at x',
      owner: 'owner-1',
      expires: 1767323100000,
      token: 'token-1',
      progress: '{"done":0.5}',
      cancel: 1,
    },
    {
      type: 'suspended',
      payload: '"s"',
      state: 'suspended',
      from: 'timer',
      schedule: 'nightly',
      occurrence: 1767322800000,
      shardIndex: 1,
      shardCount: 4,
    },
    { type: 'dead', payload: 'null', state: 'deadletter', attempts: 4, error: 'boom' },
    {
      type: 'limited',
      payload: '{}',
      state: 'async',
      priority: 1,
      scope: 'scope-a',
      exclusive: 1,
      limit: 3,
    },
    { type: 'finished', payload: '{}', state: 'async' },
  ]) {
    insert.run({ ...none, ...job });
  }
  db.prepare(`DELETE FROM ${P}jobs WHERE type = 'finished'`).run();
}

/** The jobs table's columns, indexes (with their SQL) and rows. */
/** Columns later migrations add (0009: `started_at`): kept out of the before/after comparison. */
/** Columns later migrations add (0009 started_at, 0012 timeout_ms and logs, 0013 steps). */
const LATER_COLUMNS = new Set(['started_at', 'timeout_ms', 'logs', 'steps']);

function snapshot(db: Database.Database) {
  const rows = db.prepare(`SELECT * FROM ${P}jobs ORDER BY id`).all() as Record<string, unknown>[];
  return {
    columns: (db.prepare(`PRAGMA table_xinfo("${P}jobs")`).all() as { name: string }[]).filter(
      (column) => !LATER_COLUMNS.has(column.name),
    ),
    indexes: db
      .prepare(
        `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? ORDER BY name`,
      )
      .all(`${P}jobs`) as { name: string; sql: string | null }[],
    rows: rows.map((row) =>
      Object.fromEntries(Object.entries(row).filter(([name]) => !LATER_COLUMNS.has(name))),
    ),
  };
}

const firstBlocked = `SELECT id FROM ${P}jobs WHERE scope = ? AND state = 'blocked'
  ORDER BY priority DESC, due_at, id LIMIT 1`;

describe('migration 0008: the state blocked', () => {
  test('a database at version 7 moves to 8 with every column, row, value, index and id mark kept', async () => {
    const db = version7();
    addJobs(db);
    const before = snapshot(db);
    expect(before.rows).toHaveLength(5);
    expect(() => db.prepare(`UPDATE ${P}jobs SET state = 'blocked' WHERE id = 1`).run()).toThrow(
      /CHECK constraint failed/,
    );

    const store = await openStore({ db, tablePrefix: P });
    expect(db.prepare(`SELECT version FROM ${P}jobs_migrations`).pluck().all()).toEqual(
      store.dialect.migrations.map((m) => m.version),
    );
    const after = snapshot(db);
    expect(after.columns).toEqual(before.columns);
    expect(after.rows).toEqual(before.rows);
    // Every index of version 7, the same definition, and the new one.
    expect(after.indexes.filter((i) => i.name !== `${P}jobs_scope_blocked`)).toEqual(
      before.indexes,
    );
    expect(after.indexes.find((i) => i.name === `${P}jobs_scope_blocked`)?.sql).toBe(
      `CREATE INDEX ${P}jobs_scope_blocked\n  ON ${P}jobs (scope, priority DESC, due_at, id) WHERE state = 'blocked'`,
    );
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    // The same schema as a fresh database's.
    const fresh = await openStore({ tablePrefix: P });
    const schema = (d: Database.Database) =>
      d
        .prepare(
          `SELECT type, name, sql FROM sqlite_master WHERE tbl_name LIKE '${P}%' ORDER BY name`,
        )
        .all();
    expect(schema(db)).toEqual(schema(fresh.db));

    // blocked is a state, and a suspended blocked job remembers it; others still are not.
    db.prepare(`UPDATE ${P}jobs SET state = 'blocked' WHERE type = 'limited'`).run();
    db.prepare(
      `UPDATE ${P}jobs SET state = 'suspended', suspended_from = 'blocked' WHERE type = 'waiting'`,
    ).run();
    expect(() => db.prepare(`UPDATE ${P}jobs SET state = 'paused' WHERE id = 1`).run()).toThrow(
      /CHECK constraint failed/,
    );
    expect(() =>
      db.prepare(`UPDATE ${P}jobs SET suspended_from = 'running' WHERE id = 1`).run(),
    ).toThrow(/CHECK constraint failed/);
    // AUTOINCREMENT's mark survived the rebuild: the finished job's id 6 is not given again.
    const next = db
      .prepare(
        `INSERT INTO ${P}jobs (type, payload, state, due_at, retries_left, queue, created_at)
         VALUES ('new', '{}', 'async', 1, 0, 'default', 1) RETURNING id`,
      )
      .pluck()
      .get();
    expect(next).toBe(7);
  });

  test("a scope's first blocked job is read from jobs_scope_blocked, in order, without a sort", async () => {
    const { db } = await openStore({ tablePrefix: P });
    const insert = db.prepare(
      `INSERT INTO ${P}jobs (type, payload, state, priority, due_at, retries_left, scope, exclusive,
         scope_limit, queue, created_at)
       VALUES ('t', '{}', ?, ?, ?, 3, ?, 1, 2, 'default', 1)`,
    );
    db.transaction(() => {
      for (let n = 1; n <= 2000; n++) {
        const scope = `scope-${String.fromCharCode(97 + (n % 20))}`;
        insert.run(n % 10 === 0 ? 'running' : 'async', n % 3, 100_000 - n, scope);
      }
      for (let n = 1; n <= 30; n++) insert.run('blocked', n % 3, 100_000 - n, 'scope-a');
    })();
    const plan = db
      .prepare(`EXPLAIN QUERY PLAN ${firstBlocked}`)
      .all('scope-a')
      .map((row) => (row as { detail: string }).detail);
    expect(plan.join('\n')).toMatch(new RegExp(`USING (COVERING )?INDEX ${P}jobs_scope_blocked `));
    expect(plan.join('\n')).not.toMatch(/TEMP B-TREE/);
    // The highest priority (2), then the earliest due: n = 29 of the blocked rows 2001–2030.
    expect(db.prepare(firstBlocked).pluck().get('scope-a')).toBe(2029);
  });
});
