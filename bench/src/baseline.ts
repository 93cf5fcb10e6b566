/**
 * `pnpm bench baseline [sqlite|postgres|mysql|typeorm ...] [--quick]`: every store as it was
 * before the SQL core (v1, commit `3198310`, the last before `cbaf54d core/sql: …`) against the
 * same store today, in one run on one machine.
 *
 * v1 is checked out once as a git worktree in `bench/.baseline/v1` (git-ignored), installed and
 * built there, and reused while its marker file says it is complete. Both builds then run the
 * same driver code through the public API both kept (store constructors, `migrate()`,
 * `JobEngine`): per run a fresh file, schema or database; bulk enqueue of 20,000 no-op jobs
 * (`--quick`: 5,000) from this process in batches of 1,000, then one worker process at
 * `new JobEngine({ store, concurrency: 10 })` drains them, until none is left — once with the
 * engine's defaults and once at the same fixed prefetch on both (`CONFIGS`). v1 and now take
 * turns in rounds (the order alternates), and the tables show the medians with `now ÷ v1`.
 *
 * A worker process imports the store and the engine of its build by absolute path from that
 * build's `packages/<name>/dist`, so v1's own `@jobs/core` resolves inside the worktree.
 * This file is also that worker process (see `serveWorker`).
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { EngineOptions, JobEngine, JobStore } from '@jobs/core';
import mysql from 'mysql2/promise';
import pg from 'pg';
import {
  type BenchReport,
  drainWithWorkers,
  dropPostgresSchemas,
  enqueueInBatches,
  jobRecorder,
  measuredWork,
  printReport,
  reportParts,
  serveWorker,
  sleep,
  startTimer,
  type WorkerIo,
  type WorkerStats,
  waitUntil,
} from './harness.js';

/** v1: the last commit on main before `cbaf54d core/sql: the JobStore contract once…`. */
/**
 * The commit to compare with: v1 by default; `BENCH_BASELINE_COMMIT=<rev>` compares with any
 * other (its own worktree under `bench/.baseline/`), e.g. the commit a change started from.
 */
const V1_COMMIT = process.env.BENCH_BASELINE_COMMIT ?? '3198310';
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const V1_DIR = join(
  REPO_ROOT,
  'bench',
  '.baseline',
  process.env.BENCH_BASELINE_COMMIT ? V1_COMMIT : 'v1',
);
/** Written once v1 is installed; lists the packages built since. */
const V1_MARKER = join(V1_DIR, '.bench-baseline.json');
const V1_LOG = join(REPO_ROOT, 'bench', '.baseline', 'setup.log');
const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const SELF = fileURLToPath(import.meta.url);
const CONCURRENCY = 10;
/** Rounds per store (`BENCH_BASELINE_ROUNDS`, default 3): more narrow a noisy store's medians. */
const ROUNDS = Number(process.env.BENCH_BASELINE_ROUNDS ?? 3);
const QUEUE = 'noop';
/**
 * Each round drains with the engine's defaults (what issue 10 compares) and once more with one
 * fixed batch size on both builds (v1's bench ran ours at prefetch 490): the defaults changed
 * (v1 leased `concurrency` jobs ahead, now adaptive batches of up to 500), and that alone
 * must not hide a store's own speed. v1 had no history; now records every finished job by
 * default, so the third drain turns that off on now (`history: { keep: 'none' }`, the same
 * work as v1's; v1 runs it as the second) — and on a later baseline too (`V1_HAS_HISTORY`).
 */
/**
 * A baseline after v1 has history and its `keep: 'none'`: its "no history" drain turns it off
 * too, so that line compares like with like (v1's own is its history-less second drain).
 */
const V1_HAS_HISTORY = V1_COMMIT !== '3198310';
const CONFIGS = [
  { label: 'defaults', prefetch: null, noHistory: false },
  { label: 'prefetch 490', prefetch: 490, noHistory: false },
  { label: 'prefetch 490, no history', prefetch: 490, noHistory: true },
] as const;
type ConfigLabel = (typeof CONFIGS)[number]['label'];
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

type Family = 'sqlite' | 'postgres' | 'mysql' | 'typeorm';
const FAMILIES: readonly Family[] = ['sqlite', 'postgres', 'mysql', 'typeorm'];
type Build = 'now' | 'v1';
const BUILDS: readonly Build[] = ['v1', 'now'];
const BUILD_NAMES: Record<Build, string> = { now: 'now', v1: `v1 (${V1_COMMIT})` };

/** Where one run's jobs live; plain data, so a worker process can open the same place. */
type StoreSpec =
  | { kind: 'sqlite'; filename: string }
  | { kind: 'postgres'; url: string; schema: string }
  | { kind: 'mysql'; uri: string }
  | {
      kind: 'typeorm';
      type: 'better-sqlite3' | 'postgres' | 'mysql' | 'mariadb';
      /** A file (better-sqlite3) or a server URL. */
      database: string;
      schema?: string;
    };

interface WorkerArgs {
  /** The checkout whose `packages/<name>/dist` this worker imports. */
  root: string;
  spec: StoreSpec;
  /** The engine's fixed `prefetch`; null: its default. */
  prefetch: number | null;
  /** `history: { keep: 'none' }` (not on v1 3198310: it has no history, nor the option). */
  noHistory: boolean;
}

// ---------------------------------------------------------------------------------------------
// the two builds

/** What the driver code needs of a build: the engine and a store on a place. */
interface BuildModules {
  JobEngine: new (options: EngineOptions) => JobEngine;
  openStore(spec: StoreSpec): Promise<JobStore>;
}

type StoreClass = new (options: Record<string, unknown>) => JobStore;

/** The entry of `root`'s built package `name` (`core`, `sqlite`, …). */
function builtEntry(root: string, name: string): string {
  return join(root, 'packages', name, 'dist', 'index.js');
}

/** Imports `root`'s built package `name` by absolute path (its own dependencies resolve there). */
async function importBuilt(root: string, name: string): Promise<Record<string, unknown>> {
  const entry = builtEntry(root, name);
  if (!existsSync(entry)) throw new Error(`[@jobs/bench] baseline: ${entry} is not built`);
  return (await import(pathToFileURL(entry).href)) as Record<string, unknown>;
}

/**
 * The build in `root`: the same constructors on both sides, defaults only. TypeORM is the copy
 * `root`'s `@jobs/typeorm` was installed with.
 */
async function loadBuild(root: string): Promise<BuildModules> {
  const core = await importBuilt(root, 'core');
  const storeClass = async (name: string, exportName: string): Promise<StoreClass> =>
    (await importBuilt(root, name))[exportName] as StoreClass;
  return {
    JobEngine: core.JobEngine as BuildModules['JobEngine'],
    openStore: async (spec) => {
      if (spec.kind === 'sqlite') {
        return new (await storeClass('sqlite', 'SqliteJobStore'))({ filename: spec.filename });
      }
      if (spec.kind === 'postgres') {
        const Store = await storeClass('postgres', 'PostgresJobStore');
        return new Store({ connectionString: spec.url, schema: spec.schema });
      }
      if (spec.kind === 'mysql') {
        return new (await storeClass('mysql', 'MysqlJobStore'))({ uri: spec.uri });
      }
      const Store = await storeClass('typeorm', 'TypeormJobStore');
      const requireFromPackage = createRequire(join(root, 'packages', 'typeorm', 'package.json'));
      requireFromPackage('reflect-metadata');
      const { DataSource } = requireFromPackage('typeorm') as {
        DataSource: new (options: Record<string, unknown>) => { initialize(): Promise<unknown> };
      };
      const dataSource = new DataSource(
        spec.type === 'better-sqlite3'
          ? { type: spec.type, database: spec.database, enableWAL: true }
          : { type: spec.type, url: spec.database, schema: spec.schema },
      );
      await dataSource.initialize();
      return new Store({ dataSource, destroyDataSourceOnClose: true });
    },
  };
}

/** Runs a command to the end, its output appended to the setup log; throws with the log's tail. */
function runLogged(command: string, args: readonly string[], cwd: string): Promise<void> {
  const log = openSync(V1_LOG, 'a');
  // A pnpm script's npm_* variables (package, lifecycle, config) belong to this workspace.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !key.startsWith('npm_') && key !== 'PNPM_SCRIPT_SRC_DIR',
    ),
  );
  writeFileSync(log, `\n$ ${command} ${args.join(' ')}   (in ${cwd})\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', log, log] });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) return resolve();
      const tail = readFileSync(V1_LOG, 'utf8').split('\n').slice(-25).join('\n');
      reject(
        new Error(
          `[@jobs/bench] baseline: \`${command} ${args.join(' ')}\` failed (${code}) in ${cwd}; ` +
            `log ${relative(process.cwd(), V1_LOG)}:\n${tail}`,
        ),
      );
    });
  });
}

function git(args: readonly string[]): string {
  return execFileSync('git', ['-C', REPO_ROOT, ...args], { encoding: 'utf8', stdio: 'pipe' });
}

/** A long setup step with a progress line before and after. */
async function step(what: string, fn: () => Promise<void>): Promise<void> {
  console.log(`[bench] baseline: ${what} ...`);
  const timer = startTimer();
  await fn();
  console.log(`[bench] baseline: ${what}: done in ${Math.round(timer.ms() / 1000)} s`);
}

/**
 * The v1 build, prepared once: a detached worktree of `V1_COMMIT`, `pnpm install` there, then
 * the packages `families` need (with their dependencies). Returns its root.
 */
async function prepareV1(families: readonly Family[]): Promise<string> {
  const saved = existsSync(V1_MARKER)
    ? (JSON.parse(readFileSync(V1_MARKER, 'utf8')) as { commit: string; built: string[] })
    : null;
  let marker = saved?.commit.startsWith(V1_COMMIT) ? saved : null;
  const missing = families.map((f) => `@jobs/${f}`).filter((p) => !marker?.built.includes(p));
  if (marker && missing.length === 0) {
    console.log(`[bench] baseline: v1 (${V1_COMMIT}) reused from ${relative(REPO_ROOT, V1_DIR)}`);
    return V1_DIR;
  }
  const pnpm = ['-y', readPackageManager()];
  mkdirSync(dirname(V1_LOG), { recursive: true });
  if (!marker) {
    const commit = resolveV1Commit();
    await step(`git worktree of ${V1_COMMIT} in ${relative(REPO_ROOT, V1_DIR)}`, async () => {
      // Whatever an unfinished setup left there starts over. --force: a worktree whose folder
      // is gone is still registered.
      rmSync(V1_DIR, { recursive: true, force: true });
      await runLogged('git', ['worktree', 'add', '--force', '--detach', V1_DIR, commit], REPO_ROOT);
    });
    await step('pnpm install there (first time: a few minutes, builds better-sqlite3)', () =>
      runLogged('npx', [...pnpm, 'install', '--frozen-lockfile', '--prefer-offline'], V1_DIR),
    );
    marker = { commit, built: [] };
    writeFileSync(V1_MARKER, JSON.stringify(marker));
  }
  const filters = missing.flatMap((p) => ['--filter', `${p}...`]);
  await step(`build ${missing.join(', ')} (and what they depend on) at v1`, () =>
    runLogged('npx', [...pnpm, ...filters, 'build'], V1_DIR),
  );
  writeFileSync(V1_MARKER, JSON.stringify({ ...marker, built: [...marker.built, ...missing] }));
  return V1_DIR;
}

/** The full hash of `V1_COMMIT`; a clone without it (shallow) cannot run the baseline. */
function resolveV1Commit(): string {
  try {
    return git(['rev-parse', '--verify', '--quiet', `${V1_COMMIT}^{commit}`]).trim();
  } catch {
    throw new BaselineUnavailable(
      `this clone has no commit ${V1_COMMIT} (v1, the last before the SQL core); a shallow ` +
        'clone? `git fetch --unshallow` (or a full clone) brings it',
    );
  }
}

/** `pnpm@x.y.z` as this repository pins it (`packageManager`), run through npx. */
function readPackageManager(): string {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
    packageManager?: string;
  };
  return pkg.packageManager?.split('+')[0] ?? 'pnpm@10';
}

/** v1 cannot be prepared here (no such commit): the message says why. */
class BaselineUnavailable extends Error {}

// ---------------------------------------------------------------------------------------------
// places: a fresh file, schema or database per run

/** One store of a family: a label, and a fresh place for each run with how to drop it. */
interface Variant {
  label: string;
  /** The package under test: `sqlite`, `postgres`, `mysql` or `typeorm`. */
  packageName: StoreSpec['kind'];
  fresh(): Promise<StoreSpec>;
  dropAll(): Promise<void>;
}

const suffix = (): string => Math.random().toString(16).slice(2, 10);

function sqlitePlaces(kind: 'sqlite' | 'typeorm'): Variant {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-bench-baseline-'));
  let n = 0;
  return {
    label: kind === 'sqlite' ? 'sqlite' : 'better-sqlite3',
    packageName: kind,
    fresh: async () => {
      const file = join(dir, `run-${++n}.db`);
      return kind === 'sqlite'
        ? { kind, filename: file }
        : { kind, type: 'better-sqlite3', database: file };
    },
    dropAll: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function postgresPlaces(kind: 'postgres' | 'typeorm'): Promise<Variant> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2_000 });
  await client.connect();
  await client.end();
  const schemas: string[] = [];
  return {
    label: 'postgres',
    packageName: kind,
    fresh: async () => {
      const schema = `bench_baseline_${suffix()}`;
      schemas.push(schema);
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`CREATE SCHEMA "${schema}"`);
      await c.end();
      return kind === 'postgres'
        ? { kind, url: PG_URL, schema }
        : { kind, type: 'postgres', database: PG_URL, schema };
    },
    dropAll: () => dropPostgresSchemas(PG_URL, schemas),
  };
}

async function mysqlPlaces(kind: 'mysql' | 'typeorm'): Promise<Variant> {
  const admin = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 2_000 });
  const [rows] = (await admin.query('SELECT VERSION() AS v')) as unknown as [{ v: string }[]];
  const mariadb = /mariadb/i.test(rows[0]?.v ?? '');
  const databases: string[] = [];
  return {
    label: mariadb ? 'mariadb' : 'mysql',
    packageName: kind,
    fresh: async () => {
      const database = `bench_baseline_${suffix()}`;
      databases.push(database);
      await admin.query(`CREATE DATABASE \`${database}\``);
      const url = new URL(MYSQL_URL);
      url.pathname = `/${database}`;
      return kind === 'mysql'
        ? { kind, uri: url.toString() }
        : { kind, type: mariadb ? 'mariadb' : 'mysql', database: url.toString() };
    },
    dropAll: async () => {
      for (const database of databases)
        await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
      await admin.end();
    },
  };
}

/** The stores of a family: one for the native packages, three drivers for TypeORM. */
async function variants(family: Family): Promise<Variant[]> {
  if (family === 'sqlite') return [sqlitePlaces('sqlite')];
  if (family === 'postgres') return [await postgresPlaces('postgres')];
  if (family === 'mysql') return [await mysqlPlaces('mysql')];
  return [sqlitePlaces('typeorm'), await postgresPlaces('typeorm'), await mysqlPlaces('typeorm')];
}

// ---------------------------------------------------------------------------------------------
// one run

interface RunResult {
  enqueue: number;
  drain: number;
  peakRssMb: number;
}

/**
 * On a fresh place: `build`'s store migrates and its engine enqueues `total` no-op jobs in
 * batches of 1,000 from this process; then one worker process of the same build drains them.
 */
async function runOnce(
  build: BuildModules,
  args: WorkerArgs,
  total: number,
  what: string,
): Promise<RunResult> {
  const { spec } = args;
  const store = await build.openStore(spec);
  try {
    await store.migrate();
    const client = new build.JobEngine({ store, logger: quiet });
    const enqueueMs = await enqueueInBatches(total, (payloads) =>
      client.enqueueMany(payloads.map((payload) => ({ type: QUEUE, payload }))),
    );
    const run = await drainWithWorkers({
      module: SELF,
      processes: 1,
      args: () => args,
      total,
      // Finished jobs leave the jobs table in both builds: what stats() counts is left to do.
      remaining: async () => (await store.stats()).reduce((sum, row) => sum + row.count, 0),
      what,
    });
    if (run.ran !== total) throw new Error(`${what}: ${run.ran} handler runs for ${total} jobs`);
    return { enqueue: (total / enqueueMs) * 1000, drain: run.rate, peakRssMb: run.peakRssMb };
  } finally {
    await store.close();
  }
}

/** The worker process: `new JobEngine({ store, concurrency: 10 })` of its build, no-op jobs. */
async function baselineWorker(args: WorkerArgs, io: WorkerIo): Promise<WorkerStats> {
  const build = await loadBuild(args.root);
  const store = await build.openStore(args.spec);
  const recorder = jobRecorder();
  const engine = new build.JobEngine({
    store,
    concurrency: CONCURRENCY,
    ...(args.prefetch === null ? {} : { prefetch: args.prefetch }),
    ...(args.noHistory ? { history: { keep: 'none' as const } } : {}),
    logger: quiet,
    handlers: { [QUEUE]: (job) => recorder.onJob(job.payload) },
  });
  const worker = {
    start: () => engine.start(),
    stop: async () => {
      await engine.stop({ timeoutMs: 5_000 });
      await store.close();
    },
  };
  return measuredWork(io, worker, recorder, () => 0);
}

// ---------------------------------------------------------------------------------------------
// the suite

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

/** One family's table: per store, rounds of v1 and now (alternating order), medians. */
async function runFamily(
  family: Family,
  builds: Record<Build, { root: string; modules: BuildModules }>,
  total: number,
): Promise<BenchReport> {
  const parts = reportParts((b: Build) => BUILD_NAMES[b]);
  const { add, notes } = parts;
  for (const variant of await variants(family)) {
    const prefix = family === 'typeorm' ? `${variant.label}: ` : '';
    const store = family === 'typeorm' ? `typeorm ${variant.label}` : family;
    const runs: { build: Build; config: ConfigLabel; result: RunResult }[] = [];
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        const order = round % 2 ? BUILDS : [...BUILDS].reverse();
        for (const build of order) {
          for (const { label, prefetch, noHistory } of CONFIGS) {
            const what = `${store} ${BUILD_NAMES[build]}, ${label}, round ${round}/${ROUNDS}`;
            console.log(`[bench] baseline: ${what} ...`);
            const { root, modules } = builds[build];
            const once = async (): Promise<RunResult> =>
              runOnce(
                modules,
                {
                  root,
                  spec: await variant.fresh(),
                  prefetch,
                  noHistory: noHistory && (build === 'now' || V1_HAS_HISTORY),
                },
                total,
                what,
              );
            const result = await once().catch(async (error: unknown) => {
              // Others rebuilding this checkout's packages take a worker's imports away for a
              // while: once they are back, one more try on a fresh place; then it throws.
              console.log(`[bench] baseline: ${what} failed (${String(error)}); once more`);
              await waitUntil(
                () => ['core', variant.packageName].every((p) => existsSync(builtEntry(root, p))),
                300_000,
                `${root}: packages/core and packages/${variant.packageName} built again`,
                1_000,
              );
              await sleep(5_000);
              return once();
            });
            runs.push({ build, config: label, result });
          }
        }
      }
    } finally {
      await variant.dropAll();
    }
    for (const build of BUILDS) {
      const of = (config?: ConfigLabel): RunResult[] =>
        runs
          .filter((r) => r.build === build && (config === undefined || r.config === config))
          .map((r) => r.result);
      const medianOf = (results: RunResult[], pick: (r: RunResult) => number): number =>
        median(results.map(pick));
      add(
        `${prefix}bulk enqueue (jobs/s)`,
        build,
        medianOf(of(), (r) => r.enqueue),
        'jobs/s',
        true,
      );
      for (const { label } of CONFIGS) {
        const drain = medianOf(of(label), (r) => r.drain);
        add(`${prefix}drain, ${label} (jobs/s)`, build, drain, 'jobs/s', true);
      }
      const rss = medianOf(of('defaults'), (r) => r.peakRssMb);
      add(`${prefix}worker peak RSS, defaults (MiB)`, build, rss, 'MiB', false);
      const each = (results: RunResult[], pick: (r: RunResult) => number): string =>
        results.map((r) => Math.round(pick(r)).toLocaleString('en-US')).join(' / ');
      notes.push(
        `${prefix}${BUILD_NAMES[build]} runs: enqueue ${each(of(), (r) => r.enqueue)}; ` +
          CONFIGS.map(({ label }) => `drain ${label} ${each(of(label), (r) => r.drain)}`).join(
            '; ',
          ),
      );
    }
  }
  const place =
    family === 'typeorm'
      ? 'file, schema or database'
      : { sqlite: 'file', postgres: 'schema', mysql: 'database' }[family];
  notes.push(
    `${total.toLocaleString('en-US')} no-op jobs per run, each on a fresh ${place}: store.migrate(), bulk enqueue from this process in batches of 1,000 (JobEngine#enqueueMany), then one worker process at new JobEngine({ store, concurrency: 10 }) drains them until none is left; stores with their constructors' defaults`,
    `drain, defaults: nothing else set (v1 leased concurrency = 10 jobs ahead; now adaptive batches of up to 500); drain, prefetch 490: the same fixed batches on both builds; drain, prefetch 490, no history: now with history: { keep: 'none' }, the work v1 did (v1 3198310 had no history: it runs as in the line before; a BENCH_BASELINE_COMMIT after it runs with history: { keep: 'none' } too)`,
    `${ROUNDS} rounds, v1 and now taking turns (the order alternates); medians (enqueue: of every run), each run's numbers above`,
    `v1: commit ${V1_COMMIT}${process.env.BENCH_BASELINE_COMMIT ? ' (BENCH_BASELINE_COMMIT)' : ', the last before cbaf54d (core/sql: one SQL core under every store)'}, built in ${relative(REPO_ROOT, V1_DIR)}; now: this checkout's packages/*/dist`,
    'ratios: now ÷ v1; for jobs/s higher is better, for MiB lower is better (issue 10: no store slower by more than 10 %)',
  );
  return {
    suite: `baseline: ${family} (v1 vs now)`,
    measures: parts.measures,
    notes,
    ours: [BUILD_NAMES.now],
  };
}

/** `pnpm bench baseline [sqlite|postgres|mysql|typeorm ...] [--quick]`. */
export async function runBaseline(argv: readonly string[]): Promise<void> {
  const families: Family[] = [];
  let quick = false;
  for (const arg of argv) {
    if (arg === '--quick') quick = true;
    else if ((FAMILIES as readonly string[]).includes(arg)) families.push(arg as Family);
    else {
      console.error(
        `unknown argument ${JSON.stringify(arg)}; usage: pnpm bench baseline [${FAMILIES.join('|')} ...] [--quick]`,
      );
      process.exit(2);
    }
  }
  const chosen = families.length ? families : [...FAMILIES];
  let v1Root: string;
  try {
    v1Root = await prepareV1(chosen);
  } catch (error) {
    if (!(error instanceof BaselineUnavailable)) throw error;
    console.error(`[bench] baseline: ${error.message}`);
    process.exit(1);
  }
  const builds = {
    now: { root: REPO_ROOT, modules: await loadBuild(REPO_ROOT) },
    v1: { root: v1Root, modules: await loadBuild(v1Root) },
  };
  const total = quick ? 5_000 : 20_000;
  const reports: BenchReport[] = [];
  for (const family of chosen) {
    console.log(`\n[bench] baseline: ${family}${quick ? ' (quick)' : ''} ...`);
    try {
      const report = await runFamily(family, builds, total);
      reports.push(report);
      printReport(report);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (!/ECONNREFUSED|ENOTFOUND|connect/i.test(message)) throw error;
      console.log(`[bench] baseline: ${family}: skipped (database unreachable: ${message})`);
    }
  }
  if (reports.length > 1) {
    console.log('\n==================== summary ====================');
    for (const report of reports) printReport(report);
  }
}

const isMain =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain && process.env.BENCH_WORKER_ARGS) {
  // started by drainWithWorkers(): this file is its own worker module
  serveWorker(baselineWorker);
}
