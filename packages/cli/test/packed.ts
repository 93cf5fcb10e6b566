/**
 * An app outside the repository that installs workspace packages as users do: `pnpm pack` turns
 * them into the tarballs a publish would upload (`workspace:` ranges become versions), and npm
 * installs those into a fresh folder (third-party dependencies come from the npm registry).
 * Packing and installing take tens of seconds: a test file makes one app and shares it.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const repo = fileURLToPath(new URL('../../..', import.meta.url));

/**
 * The environment of a command a user types: the test's, without the npm_* / pnpm_* variables
 * a `pnpm test` run sets (npm would read them as its own configuration) or a database URL the
 * test did not choose.
 */
export function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm|pnpm)_/i.test(key) || key === 'JOBS_DATABASE_URL' || key === 'NODE_OPTIONS') {
      continue;
    }
    env[key] = value;
  }
  // No progress output or update notices between the lines a test reads.
  return { ...env, npm_config_update_notifier: 'false', npm_config_fund: 'false', ...extra };
}

export interface PackedApp {
  /** The app's folder (its package.json, node_modules). */
  dir: string;
  /** What `npm install` printed (warnings included). */
  installLog: string;
  /** Removes the app and the tarballs. */
  remove(): void;
}

/**
 * Packs the workspace packages `names` (`@jobs/core`, …) and installs them with npm into a new
 * app, whose package.json gets `scripts`. The packages must be built (`pnpm build`).
 */
export async function installPacked(
  names: readonly string[],
  scripts: Record<string, string> = {},
): Promise<PackedApp> {
  const root = mkdtempSync(join(tmpdir(), 'jobs-packed-'));
  const tarballs = join(root, 'tarballs');
  const dir = join(root, 'app');
  mkdirSync(tarballs);
  mkdirSync(dir);
  try {
    // One pnpm run packs them all (each pnpm start costs seconds).
    await run(
      'pnpm',
      [
        '--recursive',
        ...names.flatMap((name) => ['--filter', name]),
        'pack',
        '--pack-destination',
        tarballs,
      ],
      { cwd: repo, env: userEnv(), maxBuffer: 16 * 1024 * 1024 },
    );
    const files = readdirSync(tarballs).filter((file) => file.endsWith('.tgz'));
    if (files.length !== names.length) {
      throw new Error(`packed ${files.join(', ')} for ${names.join(', ')}`);
    }
    writeFileSync(
      join(dir, 'package.json'),
      `${JSON.stringify({ name: 'packed-app', private: true, type: 'module', scripts }, null, 2)}\n`,
    );
    const { stdout, stderr } = await run(
      'npm',
      ['install', '--no-audit', '--no-fund', ...files.map((file) => join(tarballs, file))],
      { cwd: dir, env: userEnv(), maxBuffer: 16 * 1024 * 1024 },
    );
    return {
      dir,
      installLog: stdout + stderr,
      remove: () => rmSync(root, { recursive: true, force: true }),
    };
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    throw error;
  }
}
