/**
 * Skip switches for what a test needs from the machine rather than from the store: a built
 * `dist` that child processes import, database server binaries, a server to connect to, a tool
 * such as `script`. Locally a missing one skips, with one loud line saying how to get it; under
 * `CI=true` it fails, so a CI run cannot go green by skipping what it never ran.
 */
import { existsSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';

/** True under `CI=true`: there a missing prerequisite is a failure, never a skip. */
export function inCi(): boolean {
  return process.env.CI === 'true';
}

const warned = new Set<string>();

function warnSkipped(title: string, missing: string): void {
  const line = `\n!!! SKIPPED ${title}: ${missing}\n`;
  if (warned.has(line)) return;
  warned.add(line);
  console.warn(line);
}

function failure(title: string, missing: string): Error {
  return new Error(
    `[@jobs/conformance] ${title}: ${missing}. Under CI=true a missing prerequisite fails instead of skipping.`,
  );
}

/**
 * `describe(title, options, define)` when `missing` is null. Otherwise, under `CI=true`, one
 * failing test that says what is missing and how to get it; elsewhere the block is listed as
 * skipped with `missing` in its title, and one loud line is printed.
 *
 * @param missing what is missing and how to get it (`no pg_ctl: apt-get install postgresql`),
 *   or null when everything is there
 * @example
 * describeIfAvailable(built ? null : 'no dist of @jobs/core: run `pnpm build`', 'child processes', {}, () => { … });
 */
export function describeIfAvailable(
  missing: string | null,
  title: string,
  options: { timeout?: number },
  define: () => void,
): void {
  if (missing === null) {
    describe(title, options, define);
    return;
  }
  if (inCi()) {
    describe(title, () => {
      it(`cannot run: ${missing}`, () => {
        throw failure(title, missing);
      });
    });
    return;
  }
  warnSkipped(title, missing);
  describe.skip(`${title} — skipped: ${missing}`, options, define);
}

/** One test, as `describeIfAvailable` does a block. */
export function itIfAvailable(
  missing: string | null,
  title: string,
  options: { timeout?: number },
  fn: () => Promise<void> | void,
): void {
  if (missing === null) {
    it(title, options, fn);
    return;
  }
  if (inCi()) {
    it(`${title} — cannot run: ${missing}`, () => {
      throw failure(title, missing);
    });
    return;
  }
  warnSkipped(title, missing);
  it.skip(`${title} — skipped: ${missing}`, options, fn);
}

/**
 * What is missing of the built files that child processes import (`dist/index.js` of each
 * package), or null when all are there: for `describeIfAvailable`.
 *
 * @example
 * missingBuild([new URL('../dist/index.js', import.meta.url)]);
 */
export function missingBuild(files: readonly (string | URL)[]): string | null {
  const absent = files
    .map((file) => (typeof file === 'string' ? file : fileURLToPath(file)))
    .filter((file) => !existsSync(file))
    .map((file) => relative(process.cwd(), file));
  if (absent.length === 0) return null;
  return `no build: ${absent.join(', ')} missing (child processes import the built packages): build them first (\`pnpm build\` at the repository root)`;
}

/**
 * Lists a prerequisite of tests defined elsewhere (say, the options that add them): nothing
 * when `missing` is null; otherwise a skipped test locally (with one loud line) and a failing
 * one under `CI=true`, both titled `title` with what is missing.
 */
export function prerequisite(missing: string | null, title: string): void {
  if (missing !== null) itIfAvailable(missing, title, {}, () => {});
}
