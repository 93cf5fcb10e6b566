import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineProject, type UserWorkspaceConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const src = (pkg: string): string =>
  fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url));

/**
 * Tests import workspace packages from their sources, so a change in @jobs/core is seen by every
 * package's tests without a rebuild. Child processes spawned by tests use the built `dist`.
 */
export const workspaceAliases: Record<string, string> = {
  // Before '@jobs/core': the first alias that matches an import wins.
  '@jobs/core/sql': fileURLToPath(new URL('./packages/core/src/sql/index.ts', import.meta.url)),
  '@jobs/core': src('core'),
  '@jobs/conformance': src('conformance'),
  '@jobs/sqlite': src('sqlite'),
  '@jobs/postgres': src('postgres'),
  '@jobs/mysql': src('mysql'),
  '@jobs/typeorm': src('typeorm'),
};

/** `.sql` migration files import as their text, as the build embeds them (tsup `loader`). */
const sqlAsText = {
  name: 'jobs-sql-as-text',
  transform(code: string, id: string): { code: string; map: null } | null {
    return id.endsWith('.sql')
      ? { code: `export default ${JSON.stringify(code)};`, map: null }
      : null;
  },
};

/**
 * The files known to run longest, by name: the conformance suite on a store (minutes), then
 * chaos, multi-process and template runs (tens of seconds). Higher runs earlier.
 */
function weight(file: string): number {
  const name = basename(file);
  if (name.startsWith('conformance')) return 2;
  if (/^(chaos|guarantee|multi-process|workflow-chaos|templates|installed)/.test(name)) return 1;
  return 0;
}

/**
 * Longest files first. Without vitest's cache of durations (a fresh clone, as in CI) its own
 * order runs larger files first — and a store's conformance file is a few lines that run for
 * minutes, so it started last and the package waited for it alone (~150 s of a run).
 */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    // Array#sort is stable: within a weight, vitest's order stays.
    return sorted.sort((a, b) => weight(b.moduleId) - weight(a.moduleId));
  }
}

/**
 * The vitest project of a workspace package: its `*.test.ts` files under `test/`, workspace
 * packages from source, a minute per test and hook (real databases and child processes). A
 * package passes only what it adds.
 *
 * @example
 * // packages/<pkg>/vitest.config.ts
 * import { packageTestProject } from '../../vitest.shared.js';
 * export default packageTestProject({ fileParallelism: false });
 */
export function packageTestProject(test: UserWorkspaceConfig['test'] = {}): UserWorkspaceConfig {
  return defineProject({
    resolve: { alias: workspaceAliases },
    plugins: [sqlAsText],
    test: {
      include: ['test/**/*.test.ts'],
      testTimeout: 60_000,
      hookTimeout: 60_000,
      // Two test files at once: they mostly wait on databases, child processes and timers, and
      // on two cores vitest would otherwise run one file at a time.
      maxWorkers: 2,
      sequence: { sequencer: LongestFirst },
      ...test,
    },
  });
}
