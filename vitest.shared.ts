import { fileURLToPath } from 'node:url';
import { defineProject, type UserWorkspaceConfig } from 'vitest/config';

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
      ...test,
    },
  });
}
