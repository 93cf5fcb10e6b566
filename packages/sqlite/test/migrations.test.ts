import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SQLITE_MIGRATION_FILES, sqliteDialect } from '@jobs/core/sql';
import { applyMigrations, loadMigrations, migrationsDirectory } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, test } from 'vitest';
import { freshFile, newJob, openStore, peerOf, request } from './helpers.js';

/** Every schema version this release knows, oldest first. */
const ALL_VERSIONS = sqliteDialect({ tablePrefix: 'jobs_' }).migrations.map((m) => m.version);

const packageRoot = fileURLToPath(new URL('..', import.meta.url));

/** The schema of the store's tables with `prefix`, as SQLite keeps it. */
function schemaOf(db: Database.Database, prefix: string): unknown[] {
  return db
    .prepare(
      `SELECT type, name, tbl_name, sql FROM sqlite_master
       WHERE tbl_name IN (?, ?, ?) ORDER BY type, name`,
    )
    .all(`${prefix}jobs`, `${prefix}schedules`, `${prefix}jobs_migrations`);
}

/** A database as an earlier @jobs/sqlite left it: 0001_init.sql, its version table with `name`. */
function oldNativeDatabase(file: string, prefix: string): Database.Database {
  const db = new Database(file);
  db.exec(SQLITE_MIGRATION_FILES['0001_init']!.replaceAll('{{prefix}}', prefix));
  db.exec(
    `CREATE TABLE ${prefix}jobs_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
  );
  db.prepare(`INSERT INTO ${prefix}jobs_migrations VALUES (1, 'init', 1767225600000)`).run();
  return db;
}

/** A database as @jobs/typeorm's former inline DDL left it (version 1). */
function typeormV1Database(file: string, prefix: string): Database.Database {
  const db = new Database(file);
  const sql = readFileSync(new URL('./fixtures/typeorm-v1.sql', import.meta.url), 'utf8');
  db.exec(sql.replaceAll('{{prefix}}', prefix));
  return db;
}

/** Rows in the jobs table, and ids that stay taken: 3 jobs, the newest (id 4) finished. */
function addJobs(db: Database.Database, prefix: string): void {
  const insert = db.prepare(
    `INSERT INTO ${prefix}jobs (type, payload, state, priority, due_at, retries_left, attempts, queue, created_at, job_key)
     VALUES ('work', '{"n":1}', 'async', 0, 1, 3, 0, 'default', 1, ?)`,
  );
  for (const key of ['a', 'b', null, 'd']) insert.run(key);
  db.prepare(`DELETE FROM ${prefix}jobs WHERE id = 4`).run();
  db.prepare(
    `INSERT INTO ${prefix}schedules (name, spec, next_at, created_at, updated_at) VALUES ('s', '{}', 5, 1, 1)`,
  ).run();
}

describe('migrations', () => {
  test('the migrations are embedded; the deprecated folder holds the same files', () => {
    const migrations = loadMigrations();
    expect(migrations.map((m) => [m.version, m.name])).toEqual(
      Object.keys(SQLITE_MIGRATION_FILES)
        .sort()
        .map((file) => [Number(file.slice(0, 4)), file.slice(5)]),
    );
    expect(migrations.map((m) => m.version)).toEqual(ALL_VERSIONS);
    expect(loadMigrations(migrationsDirectory())).toEqual(migrations);
  });

  test('migrate() is idempotent, records each version once and says which it applied', async () => {
    const store = peerOf(freshFile());
    const newest = ALL_VERSIONS[ALL_VERSIONS.length - 1];
    expect(await store.migrate()).toEqual({ applied: ALL_VERSIONS, version: newest });
    expect(await store.migrate()).toEqual({ applied: [], version: newest });
    expect(store.db.prepare('SELECT version FROM jobs_jobs_migrations').pluck().all()).toEqual(
      ALL_VERSIONS,
    );
    const indexes = store.db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs_jobs'")
      .pluck()
      .all();
    expect(indexes).toEqual(
      expect.arrayContaining([
        'jobs_jobs_acquire_idx',
        'jobs_jobs_due_idx',
        'jobs_jobs_scope_idx',
        'jobs_jobs_key_idx',
        'jobs_jobs_lease_idx',
        'jobs_jobs_schedule_idx',
      ]),
    );
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(store.db.pragma('synchronous', { simple: true })).toBe(1); // NORMAL
  });

  test('a database at a newer schema version than the package is refused', async () => {
    const store = await openStore();
    store.db.prepare('INSERT INTO jobs_jobs_migrations VALUES (99, 0)').run();
    await expect(store.migrate()).rejects.toThrow(/schema version 99, newer than this package/);
  });

  test('a failing migration rolls back entirely (one transaction)', () => {
    const db = new Database(freshFile());
    try {
      const migrations = loadMigrations();
      const broken = [
        ...migrations,
        {
          version: migrations.length + 1,
          name: 'broken',
          sql: 'CREATE TABLE {{prefix}}x (a INT);\nSELECT nope FROM nowhere;\n',
        },
      ];
      expect(() => applyMigrations(db, 'p_', broken)).toThrow(/nowhere/);
      expect(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all()).toEqual([]);
    } finally {
      db.close();
    }
  });

  test('numbering gaps in the folder are refused', () => {
    const folder = mkdtempSync(join(tmpdir(), 'jobs-sqlite-migrations-'));
    writeFileSync(join(folder, '0001_init.sql'), 'SELECT 1;');
    writeFileSync(join(folder, '0003_later.sql'), 'SELECT 1;');
    try {
      expect(() => loadMigrations(folder)).toThrow(/without gaps/);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});

describe('one schema for every path', () => {
  test('a database of the TypeORM store (version 1) migrates to exactly the native schema, rows and ids kept', async () => {
    const fresh = await openStore({ tablePrefix: 'app_' });
    const file = freshFile();
    const db = typeormV1Database(file, 'app_');
    addJobs(db, 'app_');
    const store = await openStore({ db, tablePrefix: 'app_' });
    expect(schemaOf(db, 'app_')).toEqual(schemaOf(fresh.db, 'app_'));
    expect(db.prepare('SELECT version FROM app_jobs_migrations').pluck().all()).toEqual(
      ALL_VERSIONS,
    );
    expect((await store.listJobs({ limit: 10, offset: 0 })).map((j) => [j.id, j.key])).toEqual([
      ['1', 'a'],
      ['2', 'b'],
      ['3', null],
    ]);
    expect((await store.getSchedule('s'))?.nextAt).toEqual(new Date(5));
    // AUTOINCREMENT's mark survived the rebuild: the finished job's id 4 is not given again.
    const [job] = await store.enqueue([newJob()]);
    expect(job!.job.id).toBe('5');
    db.close();
  });

  test('a database of an earlier @jobs/sqlite (version 1) ends at the same schema, data kept', async () => {
    const fresh = await openStore({ tablePrefix: 'app_' });
    const db = oldNativeDatabase(freshFile(), 'app_');
    addJobs(db, 'app_');
    const store = await openStore({ db, tablePrefix: 'app_' });
    expect(schemaOf(db, 'app_')).toEqual(schemaOf(fresh.db, 'app_'));
    expect((await store.listJobs({ limit: 10, offset: 0 })).length).toBe(3);
    const [job] = await store.enqueue([newJob({ key: 'a' })]);
    expect(job).toMatchObject({ created: false, job: { id: '1' } });
    db.close();
  });

  test('with the default prefix, migrate() adopts a database under the former default names', async () => {
    const file = freshFile();
    const old = oldNativeDatabase(file, '');
    addJobs(old, '');
    old.close();
    const store = await openStore({ filename: file });
    const tables = store.db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
      .pluck()
      .all();
    expect(tables).toEqual([
      'jobs_jobs',
      'jobs_jobs_followups',
      'jobs_jobs_history',
      'jobs_jobs_migrations',
      'jobs_jobs_rate_limits',
      'jobs_jobs_signals',
      'jobs_schedules',
    ]);
    expect(schemaOf(store.db, 'jobs_')).toEqual(schemaOf((await openStore()).db, 'jobs_'));
    expect((await store.listJobs({ limit: 10, offset: 0 })).map((j) => j.id)).toEqual([
      '1',
      '2',
      '3',
    ]);
    const [job] = await store.enqueue([newJob()]);
    expect(job!.job.id).toBe('5');
    // A peer opened before the upgrade, or a process started later, sees the same tables.
    const peer = peerOf(file);
    expect((await peer.acquire(request)).length).toBe(4);
  });

  test("an explicit tablePrefix '' keeps the former names, upgraded in place", async () => {
    const file = freshFile();
    const old = oldNativeDatabase(file, '');
    addJobs(old, '');
    old.close();
    const store = await openStore({ filename: file, tablePrefix: '' });
    expect(store.db.prepare('SELECT version FROM jobs_migrations').pluck().all()).toEqual(
      ALL_VERSIONS,
    );
    expect(
      store.db
        .prepare("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'jobs_jobs%'")
        .pluck()
        .get(),
    ).toBe(0);
    expect((await store.listJobs({ limit: 10, offset: 0 })).length).toBe(3);
  });

  test('with another explicit prefix, the former default tables are left alone', async () => {
    const file = freshFile();
    oldNativeDatabase(file, '').close();
    const store = await openStore({ filename: file, tablePrefix: 'jobs_' });
    expect(
      store.db.prepare("SELECT COUNT(*) FROM sqlite_master WHERE name = 'jobs'").pluck().get(),
    ).toBe(1);
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });

  test('migrationSql() is the SQL migrate() runs on an empty database', async () => {
    const store = await openStore();
    const db = new Database(freshFile());
    db.exec(store.migrationSql());
    expect(schemaOf(db, 'jobs_')).toEqual(schemaOf(store.db, 'jobs_'));
    db.close();
  });
});

describe('the built package', () => {
  beforeAll(() => {
    // CI builds before testing; a local run without dist builds it once here.
    if (
      !existsSync(join(packageRoot, 'dist/index.js')) ||
      !existsSync(join(packageRoot, 'dist/index.cjs'))
    ) {
      execFileSync('npx', ['tsup'], { cwd: packageRoot, stdio: 'ignore' });
    }
  }, 120_000);

  const script = (load: string) => `
    ${load}
    const file = process.argv[1];
    const store = new SqliteJobStore({ filename: file });
    Promise.resolve(store.migrate())
      .then(() => store.enqueue([{ type: 'work', payload: 1, dueAt: null, delayMs: 0, priority: 0, retries: 0,
        scope: null, exclusive: false, key: null, tenantId: null, queue: 'default', retryPolicy: null,
        schedule: null, occurrence: null, shard: null }]))
      .then((r) => { console.log(JSON.stringify({ versions: loadMigrations().map((m) => m.version), id: r[0].job.id })); return store.close(); });
  `;

  test('ESM dist migrates a file with the migrations embedded in it', () => {
    const file = freshFile();
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        script(
          `import { SqliteJobStore, loadMigrations } from ${JSON.stringify(join(packageRoot, 'dist/index.js'))};`,
        ),
        file,
      ],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(out)).toEqual({ versions: ALL_VERSIONS, id: '1' });
  });

  test('CommonJS dist migrates a file with the migrations embedded in it', () => {
    const file = freshFile();
    const out = execFileSync(
      process.execPath,
      [
        '-e',
        script(
          `const { SqliteJobStore, loadMigrations } = require(${JSON.stringify(join(packageRoot, 'dist/index.cjs'))});`,
        ),
        file,
      ],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(out)).toEqual({ versions: ALL_VERSIONS, id: '1' });
  });
});
