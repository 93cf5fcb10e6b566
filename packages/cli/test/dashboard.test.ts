/** `jobsctl dashboard`: serves the web UI on localhost, read-only unless --allow-actions, until SIGTERM. */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, jobs, ok } from './cli.js';

/** What `jobsctl dashboard` imports: @jobs/dashboard's build (the binary never loads its sources). */
const DASHBOARD_BUILD = fileURLToPath(new URL('../../dashboard/dist/index.js', import.meta.url));

/** Starts `jobsctl dashboard …`, waits for the URL it prints, and returns it with the child. */
async function serve(
  args: string[],
): Promise<{ url: string; stop: () => Promise<number | null>; output: () => string }> {
  const child = spawn(process.execPath, [BIN, 'dashboard', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      const found = /at (http:\/\/\S+)/.exec(output);
      // The last line of the banner: everything before it is printed.
      if (found && output.includes('Ctrl-C stops'))
        resolve((found[1] as string).replace(/\/$/, ''));
    });
    child.on('exit', (code) =>
      reject(new Error(`jobsctl dashboard exited with ${code}: ${output}`)),
    );
  });
  return {
    url,
    output: () => output,
    stop: async () => {
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      return code as number | null;
    },
  };
}

describe('jobsctl dashboard', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-cli-dashboard-'));
  const db = join(dir, 'jobs.db');
  beforeAll(async () => {
    if (!existsSync(DASHBOARD_BUILD)) {
      throw new Error(
        `jobsctl dashboard runs @jobs/dashboard's build, and ${DASHBOARD_BUILD} is missing: build it first (\`npx -y pnpm@10.34.9 --filter @jobs/dashboard build\`, or \`build\` at the root)`,
      );
    }
    await ok(['migrate', '--db', db]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serves the pages read-only by default, refuses actions and stops on SIGTERM', async () => {
    const server = await serve(['--db', db, '--port', '0']);
    try {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(server.output()).toContain('--allow-actions');
      const page = await fetch(`${server.url}/jobs`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('read-only');
      const action = await fetch(`${server.url}/deadletter/bulk`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'op=delete',
      });
      expect(action.status).toBe(403);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('shows action forms with --allow-actions', async () => {
    const server = await serve(['--db', db, '--port', '0', '--allow-actions']);
    try {
      expect(server.output()).toContain('actions are ON');
      expect(await (await fetch(`${server.url}/`)).text()).toContain('actions on');
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('rejects --read-only with --allow-actions as a usage error', async () => {
    const result = await jobs(['dashboard', '--db', db, '--read-only', '--allow-actions']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('contradict');
  });
});
