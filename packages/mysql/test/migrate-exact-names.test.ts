/**
 * Migration 0010 (`exact_names`): every text column of the store's four tables moves from
 * `utf8mb4_bin` (PAD SPACE: `invoice-7 ` equals `invoice-7`) to the server's binary NO PAD
 * collation. A database made at version 8 with rows in every table moves to the newest version
 * with every row and index as it was, and then keeps names apart exactly as a fresh one does;
 * a migration interrupted after one table, or run again with its record lost, finishes the
 * rest and changes nothing twice.
 */
import { makeNewJob } from '@jobs/conformance';
import { JobEngine, silentLogger } from '@jobs/core';
import { migrationSql, mysqlDialect, sqlEnv } from '@jobs/core/sql';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { MYSQL_URL, randomName, reachable, sql, TestDatabase } from './helpers.js';

const ALL_VERSIONS = mysqlDialect({ tablePrefix: 'jobs_' }).migrations.map((m) => m.version);
const TABLES = ['jobs', 'schedules', 'jobs_history', 'jobs_rate_limits'];

const db = new TestDatabase();

/** Tables under `prefix` at version 8: what `migrate()` ran for versions 1–8, as one script. */
async function createVersion8(prefix: string): Promise<void> {
  const dialect = mysqlDialect({ tablePrefix: prefix, database: db.name });
  const migrations = dialect.migrations.filter((m) => m.version <= 8);
  const connection = await mysql.createConnection({ uri: MYSQL_URL, multipleStatements: true });
  try {
    await connection.query(migrationSql(sqlEnv({ ...dialect, migrations }, 'test')));
  } finally {
    await connection.end();
  }
}

/** Rows as version 8 kept them: names a PAD SPACE collation took for one another are apart. */
async function addRows(prefix: string): Promise<void> {
  const t = (name: string) => `\`${db.name}\`.\`${prefix}${name}\``;
  const at = "'2026-01-02 03:04:05.678'";
  const job = (type: string, state: string, key: string | null, scope: string | null) =>
    `(${[`'${type}'`, "'{}'", `'${state}'`, at, '3', key ? `'${key}'` : 'NULL']
      .concat(scope ? [`'${scope}'`, '1', '1'] : ['NULL', '0', 'NULL'])
      .concat(["'default'", at])
      .join(', ')})`;
  await sql(`INSERT INTO ${t('jobs')} (type, payload, state, due_at, retries_left, job_key,
      scope, exclusive, scope_limit, queue, created_at) VALUES
    ${job('w', 'async', 'invoice-7', null)},
    ${job('x', 'running', null, 'acct')},
    ${job('x', 'async', null, 'acct')}`);
  await sql(`INSERT INTO ${t('schedules')} (name, spec, next_at, created_at, updated_at)
    VALUES ('nightly', '{"v":1}', ${at}, ${at}, ${at})`);
  await sql(`INSERT INTO ${t('jobs_history')} (id, type, payload, priority, due_at, retries_left,
      attempts, exclusive, queue, created_at, outcome, finished_at)
    VALUES (99, 'w', '{}', 0, ${at}, 0, 1, 0, 'default', ${at}, 'completed', ${at})`);
  await sql(`INSERT INTO ${t('jobs_rate_limits')} (rate_key, start_ms, per_ms, used)
    VALUES ('w', 0, 60000, 1)`);
}

/** Columns migrations other than 0010 add after version 8 (0009 started_at, 0012 timeout_ms, logs, 0013 steps). */
const LATER_COLUMNS = new Set(['started_at', 'timeout_ms', 'logs', 'steps']);
const notLater = (row: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(row).filter(([name]) => !LATER_COLUMNS.has(name)));

/** Every table's rows, by table (columns later migrations add left out). */
async function rowsOf(prefix: string): Promise<Record<string, unknown[]>> {
  const rows: Record<string, unknown[]> = {};
  for (const table of TABLES) {
    const all = await sql(`SELECT * FROM \`${db.name}\`.\`${prefix}${table}\` ORDER BY 1`);
    rows[table] = all.map(notLater);
  }
  return rows;
}

/** Columns (collation apart), collations, indexes and table collations of the four tables. */
async function schemaOf(prefix: string) {
  const names = TABLES.map((table) => `${prefix}${table}`);
  const where = 'WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?, ?, ?)';
  const columns = await sql(
    `SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT,
       EXTRA, GENERATION_EXPRESSION, COLLATION_NAME
     FROM information_schema.COLUMNS ${where} ORDER BY TABLE_NAME, ORDINAL_POSITION`,
    [db.name, ...names],
  );
  return {
    // Positions are left out too: a later column comes before some in another table's order.
    columns: columns
      .filter((column) => !LATER_COLUMNS.has(String(column.COLUMN_NAME)))
      .map(({ COLLATION_NAME: _, ORDINAL_POSITION: __, ...column }) => column),
    collations: [
      ...new Set(columns.map((c) => c.COLLATION_NAME).filter((c) => c !== null)),
    ] as string[],
    indexes: await sql(
      `SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE
       FROM information_schema.STATISTICS ${where} ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`,
      [db.name, ...names],
    ),
    tableCollations: [
      ...new Set(
        (
          await sql(`SELECT TABLE_COLLATION AS c FROM information_schema.TABLES ${where}`, [
            db.name,
            ...names,
          ])
        ).map((row) => row.c),
      ),
    ] as string[],
  };
}

/** True when `collation` counts trailing spaces (NO PAD). */
async function comparesExactly(collation: string): Promise<boolean> {
  const [row] = await sql(
    `SELECT CONVERT('a' USING utf8mb4) COLLATE ${collation} = CONVERT('a ' USING utf8mb4) AS same`,
  );
  return Number(row?.same) === 0;
}

async function versions(prefix: string): Promise<number[]> {
  const rows = await sql(
    `SELECT version FROM \`${db.name}\`.\`${prefix}jobs_migrations\` ORDER BY version`,
  );
  return rows.map((row) => Number(row.version));
}

const acquireRequest = (types: string[]) => ({
  owner: 'o',
  limit: 10,
  leaseMs: 60_000,
  types,
  queues: null,
  tenants: null,
});

describe.skipIf(!reachable)('migration 0010: names compare exactly', () => {
  db.register();

  it('a database at version 8 with rows moves to NO PAD collations with every row and index kept, and keeps names apart', async () => {
    const prefix = `${randomName('x')}_`;
    await createVersion8(prefix);
    await addRows(prefix);
    const before = await schemaOf(prefix);
    const rows = await rowsOf(prefix);
    expect(before.collations).toEqual(['utf8mb4_bin']);
    expect(await comparesExactly('utf8mb4_bin')).toBe(false);

    const store = db.store({ tablePrefix: prefix });
    await store.migrate();
    expect(await versions(prefix)).toEqual(ALL_VERSIONS);
    const after = await schemaOf(prefix);
    expect(after.columns).toEqual(before.columns);
    // Every index kept; only history's primary key gained finished_at (0018, its partitions).
    const historyKey = (index: Record<string, unknown>) =>
      index.INDEX_NAME === 'PRIMARY' && index.TABLE_NAME === `${prefix}jobs_history`;
    expect(after.indexes.filter((i) => !historyKey(i))).toEqual(
      before.indexes.filter((i) => !historyKey(i)),
    );
    expect(after.indexes.filter(historyKey).map((i) => i.COLUMN_NAME)).toEqual([
      'id',
      'finished_at',
    ]);
    expect(await rowsOf(prefix)).toEqual(rows);
    // One collation for every text column and as every table's default, and it is NO PAD.
    expect(after.collations).toHaveLength(1);
    expect(after.tableCollations).toEqual(after.collations);
    expect(await comparesExactly(after.collations[0] as string)).toBe(true);

    // The names the rows hold and the same names with a trailing space are apart now.
    const [keyed] = await sql(`SELECT id FROM \`${db.name}\`.\`${prefix}jobs\` WHERE job_key = ?`, [
      'invoice-7',
    ]);
    const [again, spaced] = await store.enqueue([
      makeNewJob({ type: 'w', key: 'invoice-7' }),
      makeNewJob({ type: 'w', key: 'invoice-7 ' }),
    ]);
    expect(again).toMatchObject({ created: false, job: { id: String(keyed?.id) } });
    expect(spaced?.created).toBe(true);
    // The running job of scope `acct` holds only `acct`: the job of `acct ` may start.
    const [spacedScope] = await store.enqueue([
      makeNewJob({ type: 'x', scope: 'acct ', exclusive: true }),
    ]);
    const held = await store.acquire(acquireRequest(['x']));
    expect(held.map((j) => j.id)).toEqual([spacedScope?.job.id]);
    // A handler for `w ` gets nothing of `w`'s.
    expect(await store.acquire(acquireRequest(['w ']))).toEqual([]);
    // `nightly ` is a schedule of its own; `nightly` stays as it was.
    const engine = new JobEngine({ store, logger: silentLogger });
    await engine.schedule('nightly ', { every: 'PT1H' });
    expect((await store.listSchedules()).map((s) => [s.name, s.spec])).toEqual([
      ['nightly', { v: 1 }],
      ['nightly ', expect.objectContaining({ v: 1 })],
    ]);
    await engine.stop();
    // The rate-limit window of `w` (1 of 1 used) is not the one of `w `.
    const take = { max: 1, perMs: 60_000, want: 1 };
    const granted = await store.rateLimits.takeRateTokens([{ key: 'w ', ...take }]);
    expect(granted.map((g) => g.granted)).toEqual([1]);
    expect(await store.history.list({ type: 'w ', limit: 10 })).toEqual([]);
    expect((await store.history.list({ type: 'w', limit: 10 })).map((r) => r.id)).toEqual(['99']);

    // 0010 run once more (its version record lost) finds nothing to change.
    await sql(`DELETE FROM \`${db.name}\`.\`${prefix}jobs_migrations\` WHERE version = 10`);
    await db.store({ tablePrefix: prefix }).migrate();
    expect(await versions(prefix)).toEqual(ALL_VERSIONS);
    expect(await schemaOf(prefix)).toEqual(after);
  });

  it('a migration interrupted after converting one table converts the rest when run again', async () => {
    const fresh = `${randomName('f')}_`;
    await db.store({ tablePrefix: fresh }).migrate();
    const prefix = `${randomName('i')}_`;
    await createVersion8(prefix);
    const [{ c: collation }] = (await sql(
      `SELECT TABLE_COLLATION AS c FROM information_schema.TABLES
       WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
      [db.name, `${fresh}jobs`],
    )) as [{ c: string }];
    await sql(
      `ALTER TABLE \`${db.name}\`.\`${prefix}jobs\` CONVERT TO CHARACTER SET utf8mb4 COLLATE ${collation}`,
    );
    expect((await schemaOf(prefix)).collations.sort()).toEqual([collation, 'utf8mb4_bin'].sort());
    await db.store({ tablePrefix: prefix }).migrate();
    const after = await schemaOf(prefix);
    expect(after.collations).toEqual([collation]);
    expect(after.tableCollations).toEqual([collation]);
    const made = await schemaOf(fresh);
    expect(after.collations).toEqual(made.collations);
    expect(after.tableCollations).toEqual(made.tableCollations);
  });
});
