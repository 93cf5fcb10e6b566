/**
 * Migration 0008 (`blocked_set`): a database at version 7 with jobs in it moves to version 8
 * with every row as it was, then takes the state `blocked` (also as `suspended_from`), and a
 * scope's blocked jobs are read from the new partial index in acquisition order. Version 7 is
 * made by the SQL `migrate()` ran for versions 1–7, on the store's own layout (no prefix) and
 * on the TypeORM store's (a table prefix).
 */
import { migrationSql, postgresDialect, sqlEnv } from '@jobs/core/sql';
import { describe, expect, it } from 'vitest';
import { dropSchema, prefixedStore, randomSchema, reachable, sql } from './helpers.js';

const ALL_VERSIONS = postgresDialect({ tablePrefix: '', schema: null }).migrations.map(
  (m) => m.version,
);

/** `schema` at version 7: what `migrate()` ran for versions 1–7, as one script. */
async function createVersion7(schema: string, prefix: string): Promise<void> {
  const dialect = postgresDialect({ tablePrefix: prefix, schema });
  const migrations = dialect.migrations.filter((m) => m.version <= 7);
  await sql(migrationSql(sqlEnv({ ...dialect, migrations }, 'test')));
}

/** A waiting, a running, a suspended, a dead-letter and a limited job; ids 1–5 (6 finished). */
async function addJobs(jobs: string): Promise<void> {
  const columns = `type, payload, state, priority, due_at, retries_left, attempts, scope,
    exclusive, job_key, tenant_id, queue, last_error_message, last_error_stack, created_at,
    lock_owner, lock_expires_at, lock_token, retry_policy, suspended_from, schedule_name,
    occurrence, shard_index, shard_count, meta, progress, cancel_requested, scope_limit`;
  const at = "'2026-01-02T03:04:05.678Z'";
  await sql(`INSERT INTO ${jobs} (${columns}) VALUES
    ('waiting', '{"n":1}', 'timer', 5, ${at}, 3, 0, NULL, false, 'key-1', 'tenant-a', 'q1',
     NULL, NULL, ${at}, NULL, NULL, NULL, '{"kind":"fixed","delay":"PT1S"}', NULL, NULL, NULL,
     NULL, NULL, '{"traceparent":"00-ab-cd-01"}', NULL, false, NULL),
    ('running', '[1,2]', 'running', -2, ${at}, 2, 1, NULL, false, NULL, NULL, 'default',
     'first try failed', 'Error: at x', ${at}, 'owner-1', ${at}, 'token-1', NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, '{"done":0.5}', true, NULL),
    ('suspended', '"s"', 'suspended', 0, ${at}, 0, 0, NULL, false, NULL, NULL, 'default', NULL,
     NULL, ${at}, NULL, NULL, NULL, NULL, 'timer', 'nightly', ${at}, 1, 4, NULL, NULL, false,
     NULL),
    ('dead', 'null', 'deadletter', 0, ${at}, 0, 4, NULL, false, NULL, NULL, 'default', 'boom',
     NULL, ${at}, 'owner-2', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false,
     NULL),
    ('limited', '{}', 'async', 1, ${at}, 3, 0, 'scope-a', true, NULL, NULL, 'default', NULL,
     NULL, ${at}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, 3),
    ('finished', '{}', 'async', 0, ${at}, 3, 0, NULL, false, NULL, NULL, 'default', NULL, NULL,
     ${at}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL)`);
  await sql(`DELETE FROM ${jobs} WHERE type = 'finished'`);
}

/** The CHECKs and indexes of the jobs table. */
async function constraintsOf(jobs: string) {
  return {
    checks: await sql(
      `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
       WHERE conrelid = '${jobs}'::regclass AND contype = 'c' ORDER BY conname`,
    ),
    indexes: (
      await sql<{ name: string }>(
        `SELECT indexrelid::regclass::text AS name FROM pg_index
         WHERE indrelid = '${jobs}'::regclass ORDER BY 1`,
      )
    ).map((r) => r.name.replace(/^.*\./, '').replaceAll('"', '')),
  };
}

const firstBlocked = (jobs: string) =>
  `SELECT id FROM ${jobs} WHERE scope = 'scope-a' AND state = 'blocked'
   ORDER BY priority DESC, due_at, id LIMIT 1`;

describe.skipIf(!reachable)('migration 0008: the state blocked', () => {
  for (const prefix of ['', 'app_']) {
    it(`a database at version 7${prefix ? ' with a table prefix' : ''} moves to 8 with every row and value kept, and takes blocked jobs`, async () => {
      const schema = randomSchema('v7blocked');
      const jobs = `"${schema}"."${prefix}jobs"`;
      const store = prefixedStore(schema, prefix);
      try {
        await createVersion7(schema, prefix);
        await addJobs(jobs);
        const rows = await sql(`SELECT * FROM ${jobs} ORDER BY id`);
        expect(rows).toHaveLength(5);
        await expect(sql(`UPDATE ${jobs} SET state = 'blocked' WHERE id = 1`)).rejects.toThrow(
          /jobs_state_check/,
        );
        const before = await constraintsOf(jobs);
        expect(before.checks.map((c) => c.conname)).toEqual([
          `${prefix}jobs_state_check`,
          `${prefix}jobs_suspended_from_check`,
        ]);

        await store.migrate();
        const versions = await sql<{ version: number }>(
          `SELECT version FROM "${schema}"."${prefix}jobs_migrations" ORDER BY version`,
        );
        expect(versions.map((r) => r.version)).toEqual(ALL_VERSIONS);
        // Every row as it was; the columns later migrations add (0009: started_at, 0012:
        // timeout_ms and logs, 0013: steps) are null.
        const migrated = await sql<Record<string, unknown>>(`SELECT * FROM ${jobs} ORDER BY id`);
        const later = ['started_at', 'timeout_ms', 'logs', 'steps'];
        expect(
          migrated.map((row) =>
            Object.fromEntries(Object.entries(row).filter(([name]) => !later.includes(name))),
          ),
        ).toEqual(rows);
        for (const name of later) {
          expect(migrated.map((row) => row[name])).toEqual(rows.map(() => null));
        }
        const after = await constraintsOf(jobs);
        expect(after.indexes).toEqual(
          [...before.indexes, `${prefix}jobs_scope_blocked`].sort((a, b) => (a < b ? -1 : 1)),
        );
        expect(after.checks).toEqual([
          {
            conname: `${prefix}jobs_state_check`,
            def: "CHECK ((state = ANY (ARRAY['timer'::text, 'async'::text, 'running'::text, 'deadletter'::text, 'suspended'::text, 'blocked'::text])))",
          },
          {
            conname: `${prefix}jobs_suspended_from_check`,
            def: "CHECK ((suspended_from = ANY (ARRAY['timer'::text, 'async'::text, 'blocked'::text])))",
          },
        ]);

        // blocked is a state, and a suspended blocked job remembers it; others still are not.
        await sql(`UPDATE ${jobs} SET state = 'blocked' WHERE type = 'limited'`);
        await sql(
          `UPDATE ${jobs} SET state = 'suspended', suspended_from = 'blocked' WHERE type = 'waiting'`,
        );
        await expect(sql(`UPDATE ${jobs} SET state = 'paused' WHERE id = 1`)).rejects.toThrow(
          /jobs_state_check/,
        );
        await expect(
          sql(`UPDATE ${jobs} SET suspended_from = 'running' WHERE id = 1`),
        ).rejects.toThrow(/jobs_suspended_from_check/);
        // Identity continues after the finished job's id 6.
        const [next] = await sql<{ id: string }>(
          `INSERT INTO ${jobs} (type, payload, state, due_at, retries_left)
           VALUES ('new', '{}', 'async', now(), 0) RETURNING id`,
        );
        expect(next?.id).toBe('7');
      } finally {
        await store.close();
        await dropSchema(schema);
      }
    });
  }

  it("a scope's first blocked job is read from jobs_scope_blocked, in order, without a sort", async () => {
    const schema = randomSchema('v8blocked');
    const jobs = `"${schema}"."jobs"`;
    const store = prefixedStore(schema, '');
    try {
      await store.migrate();
      // A backlog of 2,000 waiting and running jobs over 20 scopes, 30 blocked ones in scope-a.
      await sql(
        `INSERT INTO ${jobs} (type, payload, state, priority, due_at, retries_left, scope, exclusive, scope_limit)
         SELECT 't', '{}', CASE WHEN n % 10 = 0 THEN 'running' ELSE 'async' END, n % 3,
           now() - n * interval '1 second', 3, 'scope-' || chr(97 + n % 20), true, 2
         FROM generate_series(1, 2000) AS n`,
      );
      await sql(
        `INSERT INTO ${jobs} (type, payload, state, priority, due_at, retries_left, scope, exclusive, scope_limit)
         SELECT 't', '{}', 'blocked', n % 3, now() - n * interval '1 second', 3, 'scope-a', true, 2
         FROM generate_series(1, 30) AS n`,
      );
      await sql(`ANALYZE ${jobs}`);
      const [{ 'QUERY PLAN': plan }] = (await sql(
        `EXPLAIN (FORMAT JSON) ${firstBlocked(jobs)}`,
      )) as [{ 'QUERY PLAN': unknown }];
      const text = JSON.stringify(plan);
      expect(text).toContain('"Index Name":"jobs_scope_blocked"');
      expect(text).not.toContain('"Node Type":"Sort"');
      // The highest priority (2), then the earliest due: n = 29 of the blocked rows 2001–2030.
      expect(await sql(firstBlocked(jobs))).toEqual([{ id: '2029' }]);
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });

  it('the CHECKs are replaced whatever they were named (a table renamed since)', async () => {
    const schema = randomSchema('v7renamed');
    const jobs = `"${schema}"."jobs"`;
    const store = prefixedStore(schema, '');
    try {
      await createVersion7(schema, '');
      await sql(`ALTER TABLE ${jobs} RENAME CONSTRAINT jobs_state_check TO old_state_check`);
      await sql(
        `ALTER TABLE ${jobs} RENAME CONSTRAINT jobs_suspended_from_check TO old_suspended_check`,
      );
      await store.migrate();
      const { checks } = await constraintsOf(jobs);
      expect(checks.map((c) => c.conname)).toEqual([
        'jobs_state_check',
        'jobs_suspended_from_check',
      ]);
      await sql(
        `INSERT INTO ${jobs} (type, payload, state, due_at, retries_left, suspended_from)
         VALUES ('t', '{}', 'suspended', now(), 0, 'blocked')`,
      );
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });
});
