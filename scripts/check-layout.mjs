#!/usr/bin/env node
// Keeps CONTRIBUTING.md's layout map true: every source file of @jobs/core must be named in its
// "## Layout" section (by file name, within its folder's block), and every file it names must
// exist. Exits 1 naming the missing and the stale ones.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const contributing = readFileSync(join(root, 'CONTRIBUTING.md'), 'utf8');
const start = contributing.indexOf('## Layout');
const end = contributing.indexOf('\n## ', start + 1);
const map = contributing.slice(start, end === -1 ? undefined : end);
const src = join(root, 'packages/core/src');

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'migrations' ? [] : files(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const named = new Set(map.match(/[\w.-]+\.ts\b/g) ?? []);
const missing = files(src)
  .filter((file) => !named.has(file.split('/').pop()))
  .map((file) => relative(root, file));
const existing = new Set(files(src).map((file) => file.split('/').pop()));
const stale = [...named].filter((name) => !existing.has(name));
if (missing.length > 0 || stale.length > 0) {
  if (missing.length > 0) {
    console.error(
      `check-layout: CONTRIBUTING.md's layout map does not name:\n  ${missing.join('\n  ')}`,
    );
  }
  if (stale.length > 0) {
    console.error(
      `check-layout: CONTRIBUTING.md's layout map names files that do not exist:\n  ${stale.join('\n  ')}`,
    );
  }
  process.exit(1);
}
console.log(
  `check-layout: CONTRIBUTING.md names every one of @jobs/core's ${files(src).length} source files`,
);
