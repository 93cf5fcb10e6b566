/**
 * Packs, once for every test file, the `@jobs/*` packages that the numbered examples and the
 * consumer project depend on (`pnpm pack`, as a publish would) into a temp folder outside the
 * repository, and hands the test files their paths.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import {
  CONSUMER,
  EXAMPLES,
  jobsDependencies,
  numberedExamples,
  packPackages,
} from './workspace.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Package name → path of its packed tarball. */
    tarballs: Record<string, string>;
  }
}

export default async function packTarballs(project: TestProject): Promise<() => void> {
  const wanted = new Set(jobsDependencies(CONSUMER));
  for (const example of numberedExamples()) {
    for (const name of jobsDependencies(join(EXAMPLES, example))) wanted.add(name);
  }
  const root = mkdtempSync(join(tmpdir(), 'jobs-tarballs-'));
  const tarballs = await packPackages([...wanted], root);
  project.provide('tarballs', Object.fromEntries(tarballs));
  return () => rmSync(root, { recursive: true, force: true });
}
