/**
 * What a user who installs @jobs from the registry gets: `consumer/` is copied under the OS temp
 * dir, installs every published package from the packed tarballs (their `files`, their declared
 * dependencies — nothing hoisted from the workspace), and then:
 * - type-checks in strict mode with `skipLibCheck: false` — every `.d.ts` we ship and every one
 *   it pulls in (pg's, better-sqlite3's, typeorm's types) is checked — as ESM (`NodeNext`), as
 *   CommonJS under `NodeNext` (`.cts`, the `.d.cts` files) and as a classic CommonJS project
 *   (`Node10`: `types`, `typesVersions`); the ESM project also with the current TypeScript major;
 * - runs what it compiled: every entry point loaded and a job run on SQLite, as ESM and CJS;
 * - bundles its app with esbuild into one file and runs that in a folder where no @jobs package
 *   is installed: the migrations travel inside the bundle.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  CONSUMER,
  CURRENT_TYPESCRIPT,
  copyOutOfRepo,
  installCurrentTypeScript,
  outsideEnv,
  pnpm,
  typecheckWith,
} from './workspace.js';

const run = promisify(execFile);
const tarballs = new Map(Object.entries(inject('tarballs')));
let root = '';
let dir = '';

/** Runs `node <args>` in the consumer's copy, as in a fresh shell; resolves with its stdout. */
async function node(cwd: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await run(process.execPath, args, {
      cwd,
      env: outsideEnv(),
      timeout: 60_000,
    });
    return stdout;
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(
      `node ${args.join(' ')} failed: ${(error as Error).message}\n${stdout}\n${stderr}`,
    );
  }
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'jobs-consumer-'));
  dir = join(root, 'consumer');
  copyOutOfRepo(CONSUMER, dir, tarballs);
  // --no-frozen-lockfile: under CI=true pnpm would otherwise insist on a lockfile.
  await pnpm(dir, ['install', '--prefer-offline', '--no-frozen-lockfile']);
});

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('a packed install outside the repository', () => {
  it('type-checks in strict mode with skipLibCheck off, and runs, as ESM and as CommonJS', async () => {
    // tsc on both projects; a type error anywhere, our .d.ts files included, fails here.
    await pnpm(dir, ['run', 'build']);
    const esm = await node(dir, ['dist/every-package.js']);
    expect(esm).toContain('every package (esm): 7 stores loaded');
    expect(esm).toContain('dashboard overview 200');
    expect(await node(dir, ['dist/every-package.cjs'])).toContain(
      'every package (cjs): 7 entry points loaded',
    );
    expect(await node(dir, ['dist/app.js', join(root, 'esm.db'), 'esm'])).toContain(
      'esm: hello, esm; health ok: true',
    );
    expect(await node(dir, ['cjs/dist/app.js', join(root, 'cjs.db'), 'cjs'])).toContain(
      'cjs: hello, cjs; health ok: true',
    );
  });

  it(`type-checks with TypeScript ${CURRENT_TYPESCRIPT} too`, async () => {
    // TypeScript 7 dropped moduleResolution node10 and esModuleInterop: false, so the classic
    // CommonJS and no-interop projects stay checked by the project's TypeScript 5 above.
    const tsc = await installCurrentTypeScript(root);
    await typecheckWith(tsc, dir, 'tsconfig.json');
  });

  it('runs bundled by esbuild into one file, where no @jobs package is installed', async () => {
    await pnpm(dir, ['run', 'bundle']);
    // Only the bundle and better-sqlite3 (a native addon, never bundled) in a fresh folder.
    const alone = join(root, 'bundled');
    mkdirSync(join(alone, 'node_modules'), { recursive: true });
    copyFileSync(join(dir, 'bundle', 'app.mjs'), join(alone, 'app.mjs'));
    const sqliteStore = realpathSync(join(dir, 'node_modules', '@jobs', 'sqlite'));
    const betterSqlite = dirname(
      createRequire(join(sqliteStore, 'package.json')).resolve('better-sqlite3/package.json'),
    );
    symlinkSync(realpathSync(betterSqlite), join(alone, 'node_modules', 'better-sqlite3'), 'dir');
    expect(await node(alone, ['app.mjs', join(alone, 'jobs.db'), 'bundle'])).toContain(
      'bundle: hello, bundle; health ok: true',
    );
  });
});
