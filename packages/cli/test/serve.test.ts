/**
 * `jobsctl serve`: the external-worker API for `--db`, its clients from JOBS_HTTP_TOKENS or a
 * file, run through `sh -c` as an operator's shell would; tokens never printed.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, jobs, ok, run, shellQuote } from './cli.js';

/** What `jobsctl serve` imports: @jobs/http's build (the binary never loads its sources). */
const HTTP_BUILD = fileURLToPath(new URL('../../http/dist/index.js', import.meta.url));
const TOKEN = 'serve-test-token-0123456789';
const CLIENTS = JSON.stringify([{ name: 'py', token: TOKEN, types: ['backup'] }]);

describe('jobsctl serve', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-cli-serve-'));
  const db = join(dir, 'jobs.db');
  beforeAll(async () => {
    if (!existsSync(HTTP_BUILD)) {
      throw new Error(
        `jobsctl serve runs @jobs/http's build, and ${HTTP_BUILD} is missing: build it first (\`npx -y pnpm@10.34.9 --filter @jobs/http build\`, or \`build\` at the root)`,
      );
    }
    await ok(['migrate', '--db', db]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serves acquire and complete for the clients in JOBS_HTTP_TOKENS, started through sh -c', async () => {
    const command = `JOBS_HTTP_TOKENS=${shellQuote(CLIENTS)} exec ${shellQuote(process.execPath)} ${shellQuote(BIN)} serve --db ${shellQuote(db)} --port 0 --poll-ms 50`;
    const child = spawn('sh', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
    });
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        output += chunk;
        const found = /at (http:\/\/\S+)\//.exec(output);
        if (found && output.includes('Ctrl-C stops')) resolve(found[1] as string);
      });
      child.on('exit', (code) => reject(new Error(`jobsctl serve exited with ${code}: ${output}`)));
    });
    try {
      expect(output).toContain('clients: py (backup)');
      expect(output).not.toContain(TOKEN);
      const store = new SqliteJobStore({ filename: db });
      const job = await new JobEngine({ store }).enqueue('backup', { name: 'docs' });
      const call = (path: string, body: object, token: string | null = TOKEN) =>
        fetch(`${url}${path}`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body: JSON.stringify(body),
        });
      expect((await call('/acquire', { types: ['backup'] }, null)).status).toBe(401);
      const acquired = (await (
        await call('/acquire', { types: ['backup'], waitMs: 5_000 })
      ).json()) as {
        jobs: { id: string; token: string }[];
      };
      expect(acquired.jobs.map((j) => j.id)).toEqual([job.id]);
      const held = acquired.jobs[0] as { id: string; token: string };
      expect(
        (await call(`/jobs/${held.id}/complete`, { token: held.token, result: 1 })).status,
      ).toBe(200);
      expect(await store.getJob(job.id)).toBeNull();
      await store.close();
      expect(
        ((await (await fetch(`${url}/openapi.json`)).json()) as { openapi: string }).openapi,
      ).toBe('3.1.0');
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
  });

  it('reads the clients from --tokens-file', async () => {
    const file = join(dir, 'tokens.json');
    writeFileSync(file, CLIENTS);
    const child = spawn(
      process.execPath,
      [BIN, 'serve', '--db', db, '--port', '0', '--tokens-file', file],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        output += chunk;
        if (output.includes('Ctrl-C stops')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`exited with ${code}: ${output}`)));
    });
    expect(output).toContain('clients: py (backup)');
    child.kill('SIGTERM');
    expect((await once(child, 'exit'))[0]).toBe(0);
  });

  it('refuses missing or bad clients with a usage error that never prints a token', async () => {
    const none = await jobs(['serve', '--db', db, '--port', '0']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('JOBS_HTTP_TOKENS');
    const broken = await run(process.execPath, [BIN, 'serve', '--db', db, '--port', '0'], {
      JOBS_HTTP_TOKENS: `[{"token":"${TOKEN}", oops`,
    });
    expect(broken.code).toBe(2);
    expect(broken.stderr).toContain('JOBS_HTTP_TOKENS is not valid JSON');
    expect(broken.stderr).not.toContain(TOKEN);
    const short = await run(process.execPath, [BIN, 'serve', '--db', db, '--port', '0'], {
      JOBS_HTTP_TOKENS: '[{"token":"short","types":["a"]}]',
    });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('token must be a string of at least 16 characters');
  });
});
