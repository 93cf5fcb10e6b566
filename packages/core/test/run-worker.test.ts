/**
 * `runWorker` in a real child process: SIGTERM lets the running job finish and exits 0; a
 * start that fails exits 1 saying why.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const fixture = fileURLToPath(new URL('./fixtures/worker.ts', import.meta.url));

function run(args: object) {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, JSON.stringify(args)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk) => {
    out += String(chunk);
  });
  child.stderr.on('data', (chunk) => {
    err += String(chunk);
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, out: () => out, err: () => err };
}

describe('runWorker', () => {
  it('stops gracefully on SIGTERM: the running job finishes, the process exits 0', async () => {
    const worker = run({ ms: 600 });
    const deadline = Date.now() + 20_000;
    while (!worker.out().includes('started') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(worker.out()).toContain('started 1');
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(worker.out()).toContain('done 1');
    expect(worker.out() + worker.err()).toContain('stopping (SIGTERM)');
  });

  it('exits 1 when the engine cannot start, saying why', async () => {
    const worker = run({ ms: 0, failStart: true });
    expect(await worker.exited).toBe(1);
    expect(worker.out() + worker.err()).toContain('could not start');
    expect(worker.out() + worker.err()).toContain('run migrations first');
  });
});
