/**
 * @jobs/otel's README, followed with npm: its install line (the API and the SDK packages in one
 * command) resolves without ERESOLVE in a fresh app outside the repository, from the packed
 * tarballs, and the README's setup then traces a job from its enqueue to its run. The app runs
 * the README's `tracing.mjs` and `app.mjs` as written, on a `MemoryJobStore` instead of SQLite
 * (better-sqlite3 would be compiled from source here: minutes, and nothing this test checks).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { outsideEnv, REPO } from './workspace.js';

const run = promisify(execFile);
const tarballs = new Map(Object.entries(inject('tarballs')));
const root = mkdtempSync(join(tmpdir(), 'jobs-otel-readme-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The README's fenced block that starts with `// <file>`. */
function readmeBlock(file: string): string {
  const readme = readFileSync(join(REPO, 'packages', 'otel', 'README.md'), 'utf8');
  const block = readme.split('```js\n').find((text) => text.startsWith(`// ${file}`));
  if (!block) throw new Error(`@jobs/otel's README has no block for ${file}`);
  return block.slice(0, block.indexOf('```'));
}

describe("@jobs/otel's README with npm", () => {
  it('its install line resolves (no ERESOLVE), and its setup traces a job from enqueue to run', async () => {
    const readme = readFileSync(join(REPO, 'packages', 'otel', 'README.md'), 'utf8');
    const line = /^npm install (@jobs\/otel [^\n]+)$/m.exec(readme)?.[1];
    expect(line, 'the README gives an npm install line').toBeDefined();
    // Our packages from their tarballs, the rest from the registry, exactly as the line says.
    const packages = (line as string).split(' ').map((name) => tarballs.get(name) ?? name);
    writeFileSync(
      join(root, 'package.json'),
      '{ "name": "app", "private": true, "type": "module" }\n',
    );
    const env = outsideEnv({ npm_config_update_notifier: 'false' });
    const install = await run(
      'npm',
      ['install', '--no-audit', '--no-fund', tarballs.get('@jobs/core') as string, ...packages],
      { cwd: root, env, maxBuffer: 16 * 1024 * 1024 },
    );
    expect(`${install.stdout}${install.stderr}`).not.toMatch(/ERESOLVE|peer dep/i);

    writeFileSync(join(root, 'tracing.mjs'), readmeBlock('tracing.mjs'));
    const app = readmeBlock('app.mjs')
      .replace("import { SqliteJobStore } from '@jobs/sqlite';", '')
      .replace(
        "new SqliteJobStore({ filename: 'jobs.db' })",
        "new (await import('@jobs/core')).MemoryJobStore()",
      );
    writeFileSync(join(root, 'app.mjs'), app);
    const { stdout } = await run(process.execPath, ['app.mjs'], {
      cwd: root,
      env,
      timeout: 60_000,
    });
    // The console exporter's spans: the request, the enqueue in its trace, the run and its child.
    for (const name of [
      "name: 'POST /orders'",
      "name: 'jobs.enqueue'",
      "name: 'jobs.run send-email'",
      "name: 'smtp'",
    ]) {
      expect(stdout).toContain(name);
    }
  }, 240_000);
});
