/**
 * Schema upgrades: a database made by @jobs/postgres 0.1 (0001 + its `<schema>.migrations`
 * version table) and one made by @jobs/typeorm's first DDL both end at exactly the schema a
 * fresh `migrate()` makes, with their rows intact. The old layouts are built here by hand, as
 * the old code built them.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { postgresDialect } from '@jobs/core/sql';
import { describe, expect, it } from 'vitest';
import { loadMigrations, PostgresJobStore } from '../src/index.js';
import { typeormV1Statements } from './fixtures/former-schemas.js';
import {
  dropSchema,
  newJob,
  openStore,
  PG_URL,
  prefixedStore,
  randomSchema,
  reachable,
  sql,
} from './helpers.js';

/** Every schema version this release knows, oldest first. */
const ALL_VERSIONS = postgresDialect({ tablePrefix: '', schema: null }).migrations.map(
  (m) => m.version,
);

const INIT = fileURLToPath(
  new URL('../../core/src/sql/migrations/postgres/0001_init.sql', import.meta.url),
);

/** @jobs/postgres 0.1's migrate of version 1, as it ran. */
async function createNativeV1(schema: string): Promise<void> {
  const init = readFileSync(INIT, 'utf8')
    .replaceAll('{{jobs}}', `"${schema}".jobs`)
    .replaceAll('{{schedules}}', `"${schema}".schedules`)
    .replaceAll('"{{prefix}}', '"');
  await sql(`CREATE SCHEMA "${schema}"`);
  await sql(`CREATE TABLE "${schema}".migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
  await sql(init);
  await sql(`INSERT INTO "${schema}".migrations (version, name) VALUES (1, '0001_init')`);
}

/** @jobs/typeorm's first PostgreSQL DDL (version 1 of its `<prefix>jobs_migrations`). */
async function createTypeormV1(schema: string, prefix: string): Promise<void> {
  await sql(`CREATE SCHEMA "${schema}"`);
  for (const statement of typeormV1Statements((name) => `"${schema}"."${prefix}${name}"`, prefix)) {
    await sql(statement);
  }
}

/** Everything about a schema's tables that a migration decides, schema name left out. */
async function catalog(schema: string): Promise<unknown> {
  const anon = (rows: Record<string, unknown>[]) =>
    JSON.parse(JSON.stringify(rows).replaceAll(`${schema}.`, 'S.').replaceAll(`"${schema}"`, 'S'));
  return {
    columns: await sql(
      `SELECT table_name, column_name, ordinal_position, data_type, character_maximum_length,
              datetime_precision, is_nullable, column_default, is_identity, identity_generation
       FROM information_schema.columns WHERE table_schema = $1
       ORDER BY table_name, ordinal_position`,
      [schema],
    ),
    indexes: anon(
      await sql(
        `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`,
        [schema],
      ),
    ),
    constraints: await sql(
      `SELECT conrelid::regclass::text AS tbl, conname, pg_get_constraintdef(oid) AS def
       FROM pg_constraint WHERE connamespace = $1::regnamespace ORDER BY conname, tbl`,
      [schema],
    ).then(anon),
    sequences: await sql(
      `SELECT sequencename, data_type::text, start_value::text, increment_by::text
       FROM pg_sequences WHERE schemaname = $1 ORDER BY sequencename`,
      [schema],
    ),
  };
}

async function freshCatalog(prefix: string): Promise<unknown> {
  const schema = randomSchema('fresh');
  const store = prefixedStore(schema, prefix);
  try {
    await store.migrate();
    return await catalog(schema);
  } finally {
    await store.close();
    await dropSchema(schema);
  }
}

describe.skipIf(!reachable)('migrate: one schema whatever made the database', () => {
  it('a database of @jobs/postgres 0.1 is adopted: its versions move to jobs_migrations, 0002 changes nothing, jobs kept', async () => {
    const schema = randomSchema('v1native');
    await createNativeV1(schema);
    await sql(
      `INSERT INTO "${schema}".jobs (type, payload, state, due_at, retries_left)
       VALUES ('a', '"old"', 'async', now() - interval '1 second', 3)`,
    );
    const store = openStore(schema);
    try {
      await store.migrate();
      await store.migrate();
      const versions = await sql<{ version: number }>(
        `SELECT version FROM "${schema}".jobs_migrations ORDER BY version`,
      );
      expect(versions.map((r) => r.version)).toEqual(ALL_VERSIONS);
      expect(await sql(`SELECT to_regclass('"${schema}".migrations') AS old`)).toEqual([
        { old: null },
      ]);
      // It ends at exactly the schema a fresh migrate() makes, its old version table adopted.
      expect(await catalog(schema)).toEqual(await freshCatalog(''));
      const [job] = await store.acquire({
        owner: 'o',
        limit: 5,
        leaseMs: 30_000,
        types: ['a'],
        queues: null,
        tenants: null,
      });
      expect(job?.payload).toBe('old');
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });

  for (const prefix of ['', 'app_']) {
    it(`a database of @jobs/typeorm's first DDL${prefix ? ' with a table prefix' : ''} ends at exactly the schema of a fresh migrate, rows intact`, async () => {
      const schema = randomSchema('v1typeorm');
      await createTypeormV1(schema, prefix);
      const t = (name: string) => `"${schema}"."${prefix}${name}"`;
      // Ids 1–3 handed out, 2 and 3 finished: the next id is 4, never a finished job's.
      await sql(
        `INSERT INTO ${t('jobs')} (type, payload, state, due_at, retries_left, created_at, retry_policy)
         SELECT 'a', '{"n":1}', 'async', now(), 3, now(), '{"kind":"fixed","delay":"PT1S"}'
         FROM generate_series(1, 3)`,
      );
      await sql(`DELETE FROM ${t('jobs')} WHERE id > 1`);
      await sql(
        `INSERT INTO ${t('schedules')} VALUES ('nightly', '{"cron":"0 3 * * *"}', now(), false,
         false, 0, 0, 1, now(), now())`,
      );
      const store = prefixedStore(schema, prefix);
      try {
        await store.migrate();
        expect(await catalog(schema)).toEqual(await freshCatalog(prefix));
        expect(await store.getJob('1')).toMatchObject({
          payload: { n: 1 },
          retryPolicy: { kind: 'fixed', delay: 'PT1S' },
        });
        expect((await store.getSchedule('nightly'))?.spec).toEqual({ cron: '0 3 * * *' });
        const [created] = await store.enqueue([newJob('a')]);
        expect(created?.job.id).toBe('4');
      } finally {
        await store.close();
        await dropSchema(schema);
      }
    });
  }

  it("leaves another tool's `migrations` table alone", async () => {
    const schema = randomSchema('other');
    await sql(`CREATE SCHEMA "${schema}"`);
    // TypeORM's own migrations table has this shape.
    await sql(
      `CREATE TABLE "${schema}".migrations (id serial PRIMARY KEY, timestamp bigint NOT NULL, name varchar NOT NULL)`,
    );
    const store = openStore(schema);
    try {
      await store.migrate();
      expect(await sql(`SELECT count(*)::int AS n FROM "${schema}".migrations`)).toEqual([
        { n: 0 },
      ]);
      expect(await sql(`SELECT count(*)::int AS n FROM "${schema}".jobs_migrations`)).toEqual([
        { n: ALL_VERSIONS.length },
      ]);
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });

  it('loadMigrations gives the numbered SQL for a schema', () => {
    const migrations = loadMigrations('app_jobs');
    expect(migrations.map((m) => m.name)).toEqual(
      postgresDialect({ tablePrefix: '', schema: null }).migrations.map((m) => m.name),
    );
    expect(migrations.map((m) => m.version)).toEqual(ALL_VERSIONS);
    expect(migrations[0]?.sql).toContain('CREATE TABLE "app_jobs"."jobs"');
    expect(() => loadMigrations('x; drop')).toThrow(/identifier/);
  });

  it('migrationSql prints what migrate runs on an empty database', () => {
    const store = new PostgresJobStore({ connectionString: PG_URL, schema: 'printed' });
    const text = store.migrationSql();
    void store.close();
    expect(text).toContain('CREATE SCHEMA IF NOT EXISTS "printed"');
    expect(text).toContain('INSERT INTO "printed"."jobs_migrations" ("version") VALUES (2);');
  });
});
