import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);

it('the example runs an engine on the JSON file to the end and shows what the file kept', async () => {
  const cwd = fileURLToPath(new URL('..', import.meta.url));
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd,
    timeout: 30_000,
  });
  // Exclusive jobs of one scope ran one at a time, in order.
  const steps = [...stdout.matchAll(/account-7 step (\d)/g)].map((m) => m[1]);
  expect(steps).toEqual(['1', '2', '3']);
  expect(stdout).toContain('hello, Ada');
  expect(stdout).toContain('hello, Grace');
  expect(stdout).toContain('flaky          succeeded on attempt 2');
  // After the engine stopped, a new store on the same file finds the dead-letter job.
  expect(stdout).toMatch(/holds:\n {2}#\d+ bad-input deadletter: the input can never be processed/);
});
