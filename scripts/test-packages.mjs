#!/usr/bin/env node
/**
 * Runs every workspace package's `test` script, a few packages at a time, longest first, and ends
 * with a table of what each took. `pnpm test` calls it after the build and the checks.
 *
 *   node scripts/test-packages.mjs [--concurrency N] [--bail] [name-part…]
 *
 * Why not `turbo run test`: turbo starts packages in its own order, so the longest suites (a
 * store's conformance runs for minutes) could start last and the run waited for them alone; and
 * it stops at the first failure, so one flaky package hid the state of the others. Here the
 * known-long packages start first (their usual seconds below; a package not listed counts as a
 * minute), every package runs to its end unless `--bail` is given, and the exit code is 1 when
 * any failed. Builds are not run here: `pnpm test` builds everything before.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Seconds each package's tests took in a fresh-clone `CI=true` run on a 2-core machine. Only the
 * order matters: it is longest first.
 */
const USUAL_SECONDS = {
  '@jobs/postgres': 170,
  '@jobs/mysql': 160,
  '@jobs/typeorm': 135,
  '@jobs/examples-templates-test': 90,
  '@jobs/conformance': 80,
  '@jobs/cli': 65,
  '@jobs/sqlite': 57,
  '@jobs/example-typeorm-app': 42,
  '@jobs/core': 37,
  '@jobs/example-custom-store': 34,
  '@jobs/dashboard': 32,
  '@jobs/sql-tests': 31,
  '@jobs/http': 8,
  '@jobs/example-sharded-report': 8,
  '@jobs/otel': 5,
  '@jobs/example-quickstart': 4,
};
const UNKNOWN_SECONDS = 60;

function parseArgs(argv) {
  const options = { concurrency: 2, bail: false, filters: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--bail') options.bail = true;
    else if (arg === '--concurrency') {
      const value = Number(argv[++i]);
      if (!Number.isInteger(value) || value < 1) {
        throw new Error(`--concurrency needs a whole number ≥ 1, got ${JSON.stringify(argv[i])}`);
      }
      options.concurrency = value;
    } else if (arg.startsWith('-')) throw new Error(`unknown option ${arg}`);
    else options.filters.push(arg);
  }
  return options;
}

/** Workspace folders (pnpm-workspace.yaml's `packages` entries: `dir/*` or `dir`). */
function workspaceDirs() {
  const yaml = readFileSync(join(ROOT, 'pnpm-workspace.yaml'), 'utf8');
  const block = /^packages:\n((?:\s+-.*\n?)+)/m.exec(yaml)?.[1] ?? '';
  const dirs = [];
  for (const match of block.matchAll(/-\s*["']?([^"'\n]+)["']?/g)) {
    const pattern = match[1].trim();
    if (pattern.endsWith('/*')) {
      const parent = join(ROOT, pattern.slice(0, -2));
      if (!existsSync(parent)) continue;
      for (const entry of readdirSync(parent, { withFileTypes: true })) {
        if (entry.isDirectory()) dirs.push(join(parent, entry.name));
      }
    } else dirs.push(join(ROOT, pattern));
  }
  return dirs;
}

/** Packages with a `test` script, longest usual time first. */
function testPackages(filters) {
  const found = [];
  for (const dir of workspaceDirs()) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    const manifest = JSON.parse(readFileSync(file, 'utf8'));
    if (!manifest.scripts?.test) continue;
    if (filters.length > 0 && !filters.some((part) => manifest.name.includes(part))) continue;
    found.push({
      name: manifest.name,
      dir,
      usual: USUAL_SECONDS[manifest.name] ?? UNKNOWN_SECONDS,
    });
  }
  return found.sort((a, b) => b.usual - a.usual || a.name.localeCompare(b.name));
}

/**
 * Writes a child's output line by line, each line prefixed with its package (as turbo does), and
 * keeps the lines in `kept` for the failure report at the end.
 */
function prefixer(prefix, out, kept) {
  let rest = '';
  return {
    write(chunk) {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop() ?? '';
      kept.push(...lines);
      if (lines.length > 0) out.write(lines.map((line) => `${prefix}${line}\n`).join(''));
    },
    end() {
      if (rest !== '') {
        kept.push(rest);
        out.write(`${prefix}${rest}\n`);
      }
      rest = '';
    },
  };
}

const REPORT_LINES = 120;
// biome-ignore lint/suspicious/noControlCharactersInRegex: terminal colour codes
const COLOUR = /\x1b\[[0-9;]*m/g;

/**
 * What a failed package printed about its failures: vitest's "Failed Tests" / "Unhandled Errors"
 * sections (or the last lines when it printed neither), without colour codes, at most
 * REPORT_LINES lines — repeated after the table, so the end of a long log names the failing test.
 */
function failureReport(lines) {
  const plain = lines.map((line) => line.replace(COLOUR, ''));
  const start = plain.findIndex((line) =>
    /Failed Tests \d|Unhandled Errors?|Unhandled Rejection/.test(line),
  );
  const part = start >= 0 ? plain.slice(start) : plain.slice(-40);
  return part.length > REPORT_LINES
    ? [
        ...part.slice(0, REPORT_LINES),
        `… ${part.length - REPORT_LINES} more lines above in the log`,
      ]
    : part;
}

const seconds = (ms) => `${(ms / 1000).toFixed(0)} s`;

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const queue = testPackages(options.filters);
  if (queue.length === 0)
    throw new Error(`no package with a test script matches ${options.filters.join(', ')}`);
  const total = queue.length;
  const started = Date.now();
  const results = [];
  const running = new Map();
  let bailed = false;

  console.log(
    `test-packages: ${total} packages, ${options.concurrency} at a time, longest first: ${queue.map((p) => p.name).join(', ')}`,
  );

  const stopAll = (signal) => {
    for (const child of running.values()) {
      try {
        process.kill(-child.pid, signal);
      } catch {
        // Already gone.
      }
    }
  };
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      stopAll('SIGTERM');
      process.exit(130);
    });
  }

  const runOne = (pkg) =>
    new Promise((resolve) => {
      const begin = Date.now();
      const child = spawn('pnpm', ['run', 'test'], {
        cwd: pkg.dir,
        env: process.env,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      running.set(pkg.name, child);
      const kept = [];
      const out = prefixer(`${pkg.name}:test: `, process.stdout, kept);
      const err = prefixer(`${pkg.name}:test: `, process.stderr, kept);
      child.stdout.setEncoding('utf8').on('data', (chunk) => out.write(chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk) => err.write(chunk));
      const finish = (code) => {
        out.end();
        err.end();
        running.delete(pkg.name);
        const result = { ...pkg, code, ms: Date.now() - begin, output: code === 0 ? [] : kept };
        results.push(result);
        const verdict = code === 0 ? 'passed' : `FAILED (exit ${code})`;
        const left = total - results.length - running.size;
        console.log(
          `test-packages: ${pkg.name} ${verdict} in ${seconds(result.ms)} — ${results.length}/${total} done, ${running.size} running, ${left} waiting, ${seconds(Date.now() - started)} so far`,
        );
        resolve(result);
      };
      child.on('error', (error) => {
        console.error(`test-packages: ${pkg.name}: ${error.message}`);
        finish(-1);
      });
      child.on('close', (code, signal) => finish(code ?? (signal ? 128 : -1)));
    });

  const lane = async () => {
    while (queue.length > 0 && !bailed) {
      const result = await runOne(queue.shift());
      if (result.code !== 0 && options.bail) {
        bailed = true;
        stopAll('SIGTERM');
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, total) }, lane));

  const failed = results.filter((r) => r.code !== 0);
  console.log(`\ntest-packages: ${seconds(Date.now() - started)} for ${results.length} packages`);
  for (const r of [...results].sort((a, b) => b.ms - a.ms)) {
    const where = relative(ROOT, r.dir);
    console.log(
      `  ${r.code === 0 ? 'ok  ' : 'FAIL'} ${seconds(r.ms).padStart(6)}  ${r.name} (${where})`,
    );
  }
  if (queue.length > 0) console.log(`  not run (--bail): ${queue.map((p) => p.name).join(', ')}`);
  for (const r of failed) {
    console.log(`\ntest-packages: what ${r.name} reported about its failure:`);
    for (const line of failureReport(r.output)) console.log(`  | ${line}`);
  }
  if (failed.length > 0) {
    console.log(`test-packages: failed: ${failed.map((r) => r.name).join(', ')}`);
    process.exitCode = 1;
  }
}

main().catch((error) => {
  console.error(`test-packages: ${error.message}`);
  process.exitCode = 2;
});
