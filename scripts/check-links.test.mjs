// Self-test of check-links.mjs (run by `pnpm check:docs`): a folder of Markdown files with
// good links passes, and each kind of broken link — a missing file, a missing heading, an
// anchor into a file that is not Markdown — fails the check with the file and line named.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { slug } from './check-links.mjs';

const script = join(dirname(fileURLToPath(import.meta.url)), 'check-links.mjs');

function folder(files) {
  const root = mkdtempSync(join(tmpdir(), 'check-links-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, name)), { recursive: true });
    writeFileSync(join(root, name), text);
  }
  return root;
}

function run(root) {
  const result = spawnSync(process.execPath, [script, '--root', root], { encoding: 'utf8' });
  rmSync(root, { recursive: true, force: true });
  return result;
}

const good = {
  'README.md': [
    '# Title',
    'See [the guide](docs/guide.md#the-typed-job-map-jobengine), [a folder](docs),',
    '[a line](src/a.ts#L3), [here](#title) and [the web](https://example.com/nothing).',
    '```sh',
    '[not a link](missing.md)',
    '```',
    'Inline `[not a link](missing.md)` code.',
  ].join('\n'),
  'docs/guide.md':
    '# Guide\n\n## The typed job map: `JobEngine<Jobs>`\n\n[back](../README.md#title)\n',
  'src/a.ts': 'export {};\n',
};

test('links that resolve pass', () => {
  const result = run(folder(good));
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /5 relative links in 2 Markdown files resolve/);
});

test('a link to a missing file fails, naming the file and line', () => {
  const result = run(folder({ ...good, 'docs/b.md': 'text\n[gone](./nowhere.md)\n' }));
  assert.equal(result.status, 1);
  assert.match(result.stderr, /docs\/b\.md:2: \.\/nowhere\.md — no such file/);
});

test('a link to a missing heading fails', () => {
  const result = run(folder({ ...good, 'docs/b.md': '[x](guide.md#no-such-heading)\n' }));
  assert.equal(result.status, 1);
  assert.match(result.stderr, /docs\/b\.md:1: guide\.md#no-such-heading — no heading/);
});

test('a missing anchor in the same file fails', () => {
  const result = run(folder({ ...good, 'docs/b.md': '# One\n[x](#two)\n' }));
  assert.equal(result.status, 1);
  assert.match(result.stderr, /docs\/b\.md:2: #two — no heading #two/);
});

test('an anchor into a source file other than a line fails', () => {
  const result = run(folder({ ...good, 'docs/b.md': '[x](../src/a.ts#main)\n' }));
  assert.equal(result.status, 1);
  assert.match(result.stderr, /not Markdown/);
});

test("headings slug as GitHub's do", () => {
  assert.equal(slug('The typed job map: JobEngine<Jobs>'), 'the-typed-job-map-jobenginejobs');
  assert.equal(
    slug('If you come from graphile-worker / pg-boss / BullMQ'),
    'if-you-come-from-graphile-worker--pg-boss--bullmq',
  );
  assert.equal(
    slug('@jobs/core/sql: the SQL stores, written once'),
    'jobscoresql-the-sql-stores-written-once',
  );
});
