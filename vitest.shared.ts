import { fileURLToPath } from 'node:url';

const src = (pkg: string): string =>
  fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url));

/**
 * Tests import workspace packages from their sources, so a change in @jobs/core is seen by every
 * package's tests without a rebuild. Child processes spawned by tests use the built `dist`.
 */
export const workspaceAliases: Record<string, string> = {
  '@jobs/core': src('core'),
  '@jobs/conformance': src('conformance'),
  '@jobs/sqlite': src('sqlite'),
  '@jobs/postgres': src('postgres'),
  '@jobs/mysql': src('mysql'),
  '@jobs/typeorm': src('typeorm'),
};
