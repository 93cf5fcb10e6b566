/**
 * The CLI as a PostgreSQL user gets it: `@jobs/cli` and `@jobs/postgres` packed and installed
 * with npm into a fresh app outside the repository (one install for the whole file), then run
 * in every documented form through `sh -c` and `bash -c` (and `zsh -c` where installed), as a
 * user types it: `npx jobsctl`, `npx @jobs/cli`, `pnpm exec jobsctl`, `jobsctl` on the PATH,
 * and package.json scripts. The binary's name is no builtin or keyword of those shells, and
 * the install holds no native module: the stores are optional peer dependencies.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PG_URL, postgresBackend } from './backends.js';
import type { CliResult } from './cli.js';
import { installPacked, type PackedApp, userEnv } from './packed.js';

/** Shells the forms run under: sh (dash on Debian) and bash always, zsh where installed. */
const hasZsh = spawnSync('zsh', ['-c', 'true']).status === 0;
const SHELLS = hasZsh ? ['sh', 'bash', 'zsh'] : ['sh', 'bash'];
if (!hasZsh) console.warn('@jobs/cli installed.test: zsh is not installed; sh and bash only');

const backend = await postgresBackend();
let app: PackedApp;
let databaseUrl: string;

beforeAll(async () => {
  app = await installPacked(
    ['@jobs/core', '@jobs/dashboard', '@jobs/http', '@jobs/cli', '@jobs/postgres'],
    {
      // As examples/06-operations runs the CLI from its package.json.
      status: 'jobsctl status --json',
    },
  );
  if (backend) {
    await backend.create();
    const schema = backend.args()[backend.args().indexOf('--schema') + 1] as string;
    databaseUrl = `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`;
  }
}, 180_000);

afterAll(async () => {
  app?.remove();
  await backend?.drop();
});

/** Runs `command` through `shell -c` in the app, as typed at a prompt; `env` adds variables. */
function shell(
  name: string,
  command: string,
  env: Record<string, string> = {},
  path = process.env.PATH ?? '',
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(name, ['-c', command], {
      cwd: app.dir,
      env: userEnv({ ...env, PATH: path }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The app's `node_modules/.bin` first on the PATH: a global install or a PATH entry. */
const binOnPath = (): string =>
  `${join(app.dir, 'node_modules', '.bin')}${delimiter}${process.env.PATH}`;

/** What a shell says `name` is: `builtin`, `keyword`, or `other` (a file on the PATH, nothing). */
function kindIn(shellName: string, name: string): 'builtin' | 'keyword' | 'other' {
  const probe: Record<string, string> = {
    sh: `command -V ${name}`,
    bash: `type -t ${name}`,
    zsh: `whence -w ${name}`,
  };
  // Without node_modules/.bin: only what the shell itself knows.
  const said = spawnSync(shellName, ['-c', probe[shellName] as string], {
    env: { PATH: '/usr/bin:/bin' },
    encoding: 'utf8',
  });
  const text = `${said.stdout}${said.stderr}`;
  if (/\bbuiltin\b/.test(text)) return 'builtin';
  if (/\b(keyword|reserved)\b/.test(text)) return 'keyword';
  return 'other';
}

describe('@jobs/cli installed from its tarball with npm (PostgreSQL app)', () => {
  it('no bin of the package is a builtin or keyword of sh, bash or zsh (jobs and if are: the check sees them)', () => {
    const manifest = JSON.parse(
      readFileSync(join(app.dir, 'node_modules', '@jobs', 'cli', 'package.json'), 'utf8'),
    ) as { bin: string | Record<string, string> };
    const bins = typeof manifest.bin === 'string' ? ['cli'] : Object.keys(manifest.bin);
    // One bin: `npx @jobs/cli` runs the only bin of a package.
    expect(bins).toEqual(['jobsctl']);
    for (const shellName of SHELLS) {
      expect(kindIn(shellName, 'jobs'), `${shellName}: jobs`).toBe('builtin');
      expect(kindIn(shellName, 'if'), `${shellName}: if`).toBe('keyword');
      for (const bin of bins) expect(kindIn(shellName, bin), `${shellName}: ${bin}`).toBe('other');
    }
  });

  it('installs no native module and no store it does not use: no better-sqlite3, no .node file, no mysql2', () => {
    const modules = join(app.dir, 'node_modules');
    expect(existsSync(join(modules, '@jobs', 'postgres'))).toBe(true);
    for (const absent of [
      'better-sqlite3',
      'mysql2',
      join('@jobs', 'sqlite'),
      join('@jobs', 'mysql'),
    ]) {
      expect(existsSync(join(modules, absent)), absent).toBe(false);
    }
    const native = readdirSync(modules, { recursive: true, encoding: 'utf8' }).filter(
      (file) => file.endsWith('.node') || file.endsWith('binding.gyp'),
    );
    expect(native).toEqual([]);
    expect(app.installLog).not.toMatch(/ERESOLVE|gyp|peer dep/i);
  });

  it('--db naming a store that is not installed says which package to install and exits 1', async () => {
    // npx once; the others straight from the PATH (each npx start costs a second or more).
    const cases: [string, string][] = [
      ['npx jobsctl status --db ./jobs.db', '@jobs/sqlite'],
      ['jobsctl migrate --db sqlite:jobs.db', '@jobs/sqlite'],
      ['jobsctl migrate --print-sql --db ./jobs.db', '@jobs/sqlite'],
      ['jobsctl status --db mysql://root@127.0.0.1:3306/app', '@jobs/mysql'],
    ];
    for (const [command, needed] of cases) {
      const result = await shell('sh', command, {}, binOnPath());
      expect(result.code, `${command}: ${result.stderr}`).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr.trimEnd().split('\n')).toEqual([
        expect.stringMatching(
          new RegExp(
            `^jobsctl: error: .* needs ${needed}, which is not installed: install it beside @jobs/cli \\(npm install ${needed}, or pnpm add ${needed}\\)$`,
          ),
        ),
      ]);
    }
  });

  describe.skipIf(backend === null)('on PostgreSQL', () => {
    const env = (): Record<string, string> => ({ JOBS_DATABASE_URL: databaseUrl });

    beforeAll(async () => {
      const migrated = await shell('sh', 'npx jobsctl migrate', env());
      expect(migrated.stderr).toBe('');
      expect(migrated.stdout).toMatch(/: applied migrations 1–\d+ \(schema cli_\w+\)/);
    });

    it.each(SHELLS)('every documented form runs the CLI through %s -c', async (shellName) => {
      const forms: [string, string, string?][] = [
        ['npx jobsctl', 'npx jobsctl status --json'],
        ['npx @jobs/cli', 'npx @jobs/cli status --json'],
        ['pnpm exec', 'pnpm exec jobsctl status --json'],
        ['a bare command on the PATH', 'jobsctl status --json', binOnPath()],
      ];
      for (const [form, command, path] of forms) {
        const result = await shell(shellName, command, env(), path);
        const what = `${shellName} -c '${command}' (${form})`;
        expect(result.code, `${what}\n${result.stderr}`).toBe(0);
        expect(JSON.parse(result.stdout), what).toMatchObject({ store: 'postgres', total: 0 });
      }
      // The issue's `npx @jobs/cli --help` → `sh: 1: jobs: Illegal option --`.
      const help = await shell(shellName, 'npx @jobs/cli --help');
      expect(help.code, help.stderr).toBe(0);
      expect(help.stdout).toMatch(/^Usage: jobsctl \[options\] \[command\]/);
    });

    it('jobsctl signal runs from the tarball as docs/workflows.md shows it, through sh -c', async () => {
      const command = `npx jobsctl signal approval --key o-1 --payload '{"ok":true}' --json`;
      const result = await shell('sh', command, env());
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({ name: 'approval', key: 'o-1', payloadBytes: 11 });
    });

    it('package.json scripts run it (npm run, pnpm run: through sh, as example 06 does)', async () => {
      for (const runner of ['npm run --silent status', 'pnpm run --silent status']) {
        const result = await shell('bash', runner, env());
        expect(result.code, `${runner}\n${result.stderr}`).toBe(0);
        expect(JSON.parse(result.stdout), runner).toMatchObject({ store: 'postgres', total: 0 });
      }
    });
  });
});
