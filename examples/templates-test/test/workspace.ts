/**
 * What the templates test needs from the workspace: the packed `@jobs/*` tarballs, the versions
 * the lockfile chose for native dependencies, and a way to run pnpm in a project outside it.
 */
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  writeFileSync,
} from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** The repository root. */
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));
/** The numbered examples' folder: each must work when copied out of the repository. */
export const EXAMPLES = join(REPO, 'examples');
/** A project that imports every published package (see consumer.test.ts). */
export const CONSUMER = join(REPO, 'examples', 'templates-test', 'consumer');

/** The numbered examples, `01-quickstart` … */
export const numberedExamples = (): string[] =>
  readdirSync(EXAMPLES).filter((name) => /^\d\d-/.test(name));

const run = promisify(execFile);

interface Manifest {
  name: string;
  version: string;
  packageManager?: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  scripts?: Record<string, string>;
  pnpm?: Record<string, unknown>;
}

export const readManifest = (dir: string): Manifest =>
  JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;

/**
 * The environment of a process that runs in a copied example, as in a fresh shell: nothing of the
 * pnpm/turbo/vitest process running this test, and no `node_modules/.bin` of the workspace on
 * PATH (a tool the example forgot to list would otherwise be found there).
 */
export function outsideEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|pnpm_|turbo_|vitest|node_options$|node_path$|node_env$|init_cwd$)/i.test(key))
      continue;
    env[key] = value;
  }
  env.PATH = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => !dir.includes(join('node_modules', '.bin')) && !dir.startsWith(REPO))
    .join(delimiter);
  for (const [key, value] of Object.entries(extra)) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return env;
}

/**
 * The pnpm of the root `packageManager` field: the one running this test when it is that
 * version (no start-up cost), else through npx.
 */
function pnpmCommand(): [string, string[]] {
  const wanted = readManifest(REPO).packageManager ?? 'pnpm@10';
  const running = process.env.npm_execpath;
  const agent = process.env.npm_config_user_agent ?? '';
  if (running && /pnpm\.c?js$/.test(running) && agent.startsWith(`${wanted.replace('@', '/')} `)) {
    return [process.execPath, [running]];
  }
  return ['npx', ['-y', wanted]];
}

export interface Output {
  stdout: string;
  stderr: string;
}

/** Runs `pnpm <args>` in `cwd`; rejects with the output when it exits with an error. */
export async function pnpm(
  cwd: string,
  args: string[],
  env: NodeJS.ProcessEnv = outsideEnv(),
): Promise<Output> {
  const [command, prefix] = pnpmCommand();
  const started = Date.now();
  try {
    const output = await run(command, [...prefix, ...args], {
      cwd,
      env,
      timeout: 150_000,
      maxBuffer: 32 * 1024 * 1024,
    });
    if (process.env.JOBS_TEST_VERBOSE) {
      console.log(`pnpm ${args.join(' ')} in ${cwd}: ${Date.now() - started} ms`);
    }
    return output;
  } catch (error) {
    const { stdout = '', stderr = '' } = error as Partial<Output>;
    throw new Error(
      `pnpm ${args.join(' ')} in ${cwd} failed: ${(error as Error).message}\n${stdout}\n${stderr}`,
    );
  }
}

/**
 * Packs the given workspace packages into `destination`; returns package name → tarball path.
 * `pnpm pack` turns their `workspace:*` dependencies into plain versions, as a publish would.
 */
export async function packPackages(
  names: string[],
  destination: string,
): Promise<Map<string, string>> {
  const filters = names.flatMap((name) => ['--filter', name]);
  const { stdout } = await pnpm(
    REPO,
    ['-r', ...filters, 'pack', '--pack-destination', destination, '--json'],
    outsideEnv(),
  );
  const packed = JSON.parse(stdout.slice(stdout.indexOf('['))) as {
    name: string;
    filename: string;
  }[];
  const tarballs = new Map(packed.map((p) => [p.name, p.filename]));
  for (const name of names) {
    if (!tarballs.has(name)) throw new Error(`pnpm pack did not pack ${name}: ${stdout}`);
  }
  return tarballs;
}

/**
 * The versions the workspace's lockfile chose for `name` and everything below it, read from the
 * installed `node_modules/.pnpm` tree. Pinning a native package's whole tree makes a copied
 * example reuse the build pnpm already cached, instead of compiling better-sqlite3 again.
 */
export function lockedTree(name: string): Record<string, string> {
  const start = [
    join(REPO, 'node_modules', name),
    ...['sqlite', 'typeorm'].map((p) => join(REPO, 'packages', p, 'node_modules', name)),
  ].find((dir) => existsSync(dir));
  if (!start) throw new Error(`${name} is not installed in the workspace`);
  const versions: Record<string, string> = {};
  const visit = (dir: string): void => {
    const real = realpathSync(dir);
    const manifest = readManifest(real);
    if (versions[manifest.name] !== undefined) return;
    versions[manifest.name] = manifest.version;
    // In pnpm's layout a package's dependencies are its siblings: .pnpm/<id>/node_modules/<dep>.
    const siblings = join(real, ...manifest.name.split('/').map(() => '..'));
    const deps = { ...manifest.dependencies, ...manifest.optionalDependencies };
    for (const dep of Object.keys(deps)) {
      if (existsSync(join(siblings, dep))) visit(join(siblings, dep));
    }
  };
  visit(start);
  return versions;
}

/**
 * Copies a project out of the repository to `destination` and points its `workspace:*`
 * dependencies at the packed tarballs, as if they came from a registry.
 */
export function copyOutOfRepo(
  source: string,
  destination: string,
  tarballs: ReadonlyMap<string, string>,
): void {
  cpSync(source, destination, {
    recursive: true,
    filter: (path) => !/[\\/](node_modules|dist|\.turbo)$/.test(path),
  });
  const manifest = readManifest(destination);
  for (const deps of [manifest.dependencies, manifest.devDependencies]) {
    for (const [name, spec] of Object.entries(deps ?? {})) {
      if (!spec.startsWith('workspace:')) continue;
      const tarball = tarballs.get(name);
      if (!tarball) throw new Error(`${manifest.name}: no tarball for ${name}`);
      (deps as Record<string, string>)[name] = `file:${tarball}`;
    }
  }
  // The tarballs depend on each other by version (`@jobs/core: 0.1.0`), which no registry has:
  // point those at the tarballs too. better-sqlite3's tree is pinned to the workspace's versions
  // so the build pnpm cached is reused. The project's own `pnpm` settings (which builds it
  // allows) stay as they are: they must be enough.
  const overrides: Record<string, string> = { ...lockedTree('better-sqlite3') };
  for (const [name, tarball] of tarballs) overrides[name] = `file:${tarball}`;
  manifest.pnpm = { ...manifest.pnpm, overrides };
  writeFileSync(join(destination, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** The `@jobs/*` packages a project in the repository depends on. */
export function jobsDependencies(dir: string): string[] {
  const { dependencies = {}, devDependencies = {} } = readManifest(dir);
  return Object.keys({ ...dependencies, ...devDependencies }).filter((name) =>
    name.startsWith('@jobs/'),
  );
}

/** The current major of TypeScript: users on it must be able to compile against our types. */
export const CURRENT_TYPESCRIPT = '7';

/**
 * Installs the current TypeScript major into `root/typescript-current` (outside any project, so
 * a project's own TypeScript stays as it is); resolves with the path of its `tsc`.
 */
export async function installCurrentTypeScript(root: string): Promise<string> {
  const dir = join(root, 'typescript-current');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "name": "typescript-current", "private": true }\n');
  await pnpm(dir, ['add', `typescript@${CURRENT_TYPESCRIPT}`]);
  const tsc = join(dir, 'node_modules', '.bin', 'tsc');
  const { stdout } = await run(tsc, ['--version'], { env: outsideEnv() });
  if (!stdout.startsWith(`Version ${CURRENT_TYPESCRIPT}.`)) {
    throw new Error(`expected TypeScript ${CURRENT_TYPESCRIPT}, got ${stdout.trim()}`);
  }
  return tsc;
}

/** Type-checks `project` (a tsconfig file) in `cwd` with the given `tsc`; rejects with its output. */
export async function typecheckWith(tsc: string, cwd: string, project: string): Promise<void> {
  try {
    await run(tsc, ['--noEmit', '-p', project], { cwd, env: outsideEnv(), timeout: 150_000 });
  } catch (error) {
    const { stdout = '', stderr = '' } = error as Partial<Output>;
    throw new Error(
      `tsc -p ${project} in ${cwd} failed: ${(error as Error).message}\n${stdout}\n${stderr}`,
    );
  }
}
