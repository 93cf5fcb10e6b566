import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);
const dir = fileURLToPath(new URL('..', import.meta.url));

it('the quickstart shows every lifecycle path', async () => {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: dir,
    timeout: 60_000,
  });
  expect(stdout).toMatch(/email in 1\.5 s\s+timer → async → running → done/);
  expect(stdout).toMatch(
    /video \(3 leases\)\s+async → running \(lease renewed \d+×, ran 1×\) → done/,
  );
  expect(stdout).toMatch(
    /charge card\s+async → running → timer → async → running → timer → async → running → deadletter → retried → async → running → done/,
  );
  expect(stdout).toMatch(/import v1 file\s+async → running → deadletter/);
  expect(stdout).not.toMatch(/running in scope: [2-9]/);
});
