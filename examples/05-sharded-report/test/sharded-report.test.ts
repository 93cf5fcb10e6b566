import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);
const dir = fileURLToPath(new URL('..', import.meta.url));

it('two processes share the shards and every shard of every occurrence runs exactly once', async () => {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: dir,
    timeout: 60_000,
    env: { ...process.env, DEMO_SECONDS: '5', DEMO_EVERY: 'PT2S' },
  });
  expect(stdout).toContain('OK: every shard of every occurrence ran exactly once');
  // The table has a row per occurrence with a worker in each of the four shard columns.
  const rows = stdout.split('\n').filter((line) => /^\d\d:\d\d:\d\d\s+worker-/.test(line));
  expect(rows.length).toBeGreaterThanOrEqual(1);
  for (const row of rows) expect(row.match(/worker-[AB]/g)).toHaveLength(4);
});
