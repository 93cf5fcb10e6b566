/**
 * pnpm 10 runs no dependency's build script unless allowed, so better-sqlite3 can be installed
 * without its native addon, and the first `new Database()` throws "Could not locate the bindings
 * file". This test makes exactly that install — better-sqlite3's JavaScript and its `bindings`
 * dependency, no `build/` — under the OS temp dir next to the built @jobs/sqlite, and checks
 * that opening a store says what to do.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const PACKAGE = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(join(PACKAGE, 'package.json'));

/** The folder of an installed package, as seen from `from` (its real path, through pnpm links). */
function packageDir(name: string, from: string): string {
  const fromRequire = createRequire(join(from, 'package.json'));
  return realpathSync(dirname(fromRequire.resolve(`${name}/package.json`)));
}

const root = mkdtempSync(join(tmpdir(), 'jobs-sqlite-unbuilt-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('@jobs/sqlite on a better-sqlite3 installed without its build', () => {
  it('fails to open with a StoreError that says how to allow the build', async () => {
    const modules = join(root, 'node_modules');
    const betterSqlite = packageDir('better-sqlite3', PACKAGE);
    const bindings = packageDir('bindings', betterSqlite);
    const fileUriToPath = packageDir('file-uri-to-path', bindings);
    // better-sqlite3 without build/: what pnpm leaves when it skipped the install script.
    for (const part of ['package.json', 'lib']) {
      cpSync(join(betterSqlite, part), join(modules, 'better-sqlite3', part), { recursive: true });
    }
    cpSync(bindings, join(modules, 'bindings'), { recursive: true });
    cpSync(fileUriToPath, join(modules, 'file-uri-to-path'), { recursive: true });
    // The built @jobs/sqlite, copied so that it resolves better-sqlite3 from here.
    for (const part of ['package.json', 'dist']) {
      cpSync(join(PACKAGE, part), join(modules, '@jobs', 'sqlite', part), { recursive: true });
    }
    symlinkSync(
      dirname(require.resolve('@jobs/core/package.json')),
      join(modules, '@jobs', 'core'),
      'dir',
    );

    const script = `
      import { SqliteJobStore } from '@jobs/sqlite';
      try {
        new SqliteJobStore({ filename: 'jobs.db' });
        console.log(JSON.stringify({ opened: true }));
      } catch (error) {
        console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message }));
      }`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
    });
    const result = JSON.parse(stdout) as { name?: string; code?: string; message?: string };
    expect(result).toMatchObject({ name: 'StoreError', code: 'STORE' });
    expect(result.message).toContain('Could not locate the bindings file');
    expect(result.message).toContain('"onlyBuiltDependencies": ["better-sqlite3"]');
    expect(result.message).toContain('pnpm approve-builds');
  });
});
