import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyMigrations, loadMigrations, migrationsDirectory } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, test } from 'vitest';
import { freshFile, openStore } from './helpers.js';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));

describe('migrations', () => {
  test('the sources find the shipped migrations folder', () => {
    expect(migrationsDirectory()).toBe(join(packageRoot, 'migrations/'));
    const migrations = loadMigrations();
    expect(migrations.map((m) => [m.version, m.name])).toEqual([[1, 'init']]);
  });

  test('migrate() is idempotent and records each version once', async () => {
    const store = await openStore();
    await store.migrate();
    await store.migrate();
    expect(store.db.prepare('SELECT version, name FROM jobs_migrations').all()).toEqual([
      { version: 1, name: 'init' },
    ]);
    const indexes = store.db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'")
      .pluck()
      .all();
    expect(indexes).toEqual(
      expect.arrayContaining([
        'jobs_acquire_idx',
        'jobs_due_idx',
        'jobs_scope_idx',
        'jobs_key_idx',
        'jobs_lease_idx',
        'jobs_schedule_idx',
      ]),
    );
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(store.db.pragma('synchronous', { simple: true })).toBe(1); // NORMAL
  });

  test('a database at a newer schema version than the package is refused', async () => {
    const store = await openStore();
    store.db.prepare("INSERT INTO jobs_migrations VALUES (99, 'future', 0)").run();
    await expect(store.migrate()).rejects.toThrow(/schema version 99, newer than this package/);
  });

  test('a failing migration rolls back entirely (one transaction)', () => {
    const db = new Database(freshFile());
    try {
      const broken = [
        ...loadMigrations(),
        {
          version: 2,
          name: 'broken',
          sql: 'CREATE TABLE {{prefix}}x (a INT); SELECT nope FROM nowhere;',
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
      .then((r) => { console.log(JSON.stringify({ dir: migrationsDirectory(), id: r[0].job.id })); return store.close(); });
  `;

  test('ESM dist resolves migrations next to it and migrates a file', () => {
    const file = freshFile();
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        script(
          `import { SqliteJobStore, migrationsDirectory } from ${JSON.stringify(join(packageRoot, 'dist/index.js'))};`,
        ),
        file,
      ],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(out)).toEqual({ dir: join(packageRoot, 'migrations/'), id: '1' });
  });

  test('CommonJS dist resolves migrations next to it and migrates a file', () => {
    const file = freshFile();
    const out = execFileSync(
      process.execPath,
      [
        '-e',
        script(
          `const { SqliteJobStore, migrationsDirectory } = require(${JSON.stringify(join(packageRoot, 'dist/index.cjs'))});`,
        ),
        file,
      ],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(out)).toEqual({ dir: join(packageRoot, 'migrations/'), id: '1' });
  });
});
