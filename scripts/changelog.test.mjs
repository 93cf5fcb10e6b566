// Self-test of changelog.mjs (run by `pnpm check:docs`): it writes each package's Unreleased
// section from the changesets, keeps released sections, and `--check` fails once a changeset is
// added (or changed) until the CHANGELOG.md files are written again.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const script = join(dirname(fileURLToPath(import.meta.url)), 'changelog.mjs');

function write(root, name, text) {
  mkdirSync(dirname(join(root, name)), { recursive: true });
  writeFileSync(join(root, name), text);
}

const run = (root, ...args) =>
  spawnSync(process.execPath, [script, '--root', root, ...args], { encoding: 'utf8' });

test('CHANGELOG.md files follow the changesets, and --check fails when they are stale', () => {
  const root = mkdtempSync(join(tmpdir(), 'changelog-'));
  try {
    write(root, 'packages/a/package.json', '{ "name": "@x/a" }');
    write(root, 'packages/b/package.json', '{ "name": "@x/b" }');
    write(root, 'packages/a/CHANGELOG.md', '# @x/a\n\n## 1.0.0\n\n- First release.\n');
    write(root, '.changeset/one.md', '---\n"@x/a": minor\n---\n\nA new thing.\nSecond line.\n');
    write(root, '.changeset/docs.md', '---\n---\n\nDocs only.\n');

    assert.equal(run(root, '--check').status, 1, 'stale before the first write');
    assert.equal(run(root).status, 0);
    assert.equal(run(root, '--check').status, 0);
    const a = readFileSync(join(root, 'packages/a/CHANGELOG.md'), 'utf8');
    assert.match(a, /^# @x\/a\n\n## Unreleased\n/);
    assert.match(a, /### Minor changes\n\n- A new thing\.\n {2}Second line\.\n/);
    assert.match(a, /## 1\.0\.0\n\n- First release\.\n$/, 'released sections are kept');
    assert.match(readFileSync(join(root, 'packages/b/CHANGELOG.md'), 'utf8'), /No changes yet/);

    write(root, '.changeset/two.md', '---\n"@x/b": patch\n---\n\nA fix.\n');
    const stale = run(root, '--check');
    assert.equal(stale.status, 1);
    assert.match(stale.stderr, /stale .*: @x\/b; run `node scripts\/changelog\.mjs`/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
