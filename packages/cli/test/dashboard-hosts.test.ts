/**
 * `jobsctl dashboard` answers only the hosts it was told (DNS rebinding): localhost, IP addresses,
 * its `--host` and each `--allowed-host`, and says so when it starts.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, jobs, ok } from './cli.js';

/** Starts `jobsctl dashboard …`; resolves with its port and banner once it listens. */
async function serve(
  args: string[],
): Promise<{ port: number; banner: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [BIN, 'dashboard', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      const found = /at http:\/\/\S+:(\d+)\//.exec(output);
      if (found && output.includes('Ctrl-C stops')) resolve(Number(found[1]));
    });
    child.on('exit', (code) =>
      reject(new Error(`jobsctl dashboard exited with ${code}: ${output}`)),
    );
  });
  return {
    port,
    banner: output,
    stop: async () => {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/** The status of GET `path` from 127.0.0.1:`port` with this `Host` header. */
function statusFor(port: number, host: string, path = '/jobs'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('jobs dashboard: hosts', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-cli-dashboard-hosts-'));
  const db = join(dir, 'jobs.db');
  beforeAll(() => ok(['migrate', '--db', db]));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('answers localhost, IP addresses and --allowed-host names; refuses others with 421', async () => {
    const server = await serve([
      '--db',
      db,
      '--port',
      '0',
      '--allowed-host',
      'ops.example.test',
      '--allowed-host',
      'jobs.lan',
    ]);
    try {
      expect(server.banner).toContain(
        'hosts allowed: localhost, IP addresses, ops.example.test, jobs.lan; others get 421 (add one with --allowed-host <name>)',
      );
      const { port } = server;
      expect(await statusFor(port, `127.0.0.1:${port}`)).toBe(200);
      expect(await statusFor(port, `localhost:${port}`)).toBe(200);
      expect(await statusFor(port, 'OPS.example.test')).toBe(200);
      expect(await statusFor(port, 'jobs.lan')).toBe(200);
      expect(await statusFor(port, `evil.example:${port}`)).toBe(421);
      expect(await statusFor(port, 'evil.example', '/api/stats')).toBe(421);
    } finally {
      await server.stop();
    }
  });

  it('allows its --host name, and on every interface says how to allow the machine’s name', async () => {
    const named = await serve(['--db', db, '--port', '0', '--host', 'localhost']);
    try {
      expect(named.banner).toContain('hosts allowed: localhost, IP addresses;');
    } finally {
      await named.stop();
    }
    const everywhere = await serve(['--db', db, '--port', '0', '--host', '0.0.0.0']);
    try {
      expect(everywhere.banner).toContain(
        `listening on every interface: open it by an IP address of this machine, or allow its name (--allowed-host ${hostname()})`,
      );
      // Every interface is not every host: a name nobody allowed is still refused.
      expect(await statusFor(everywhere.port, 'evil.example')).toBe(421);
      expect(await statusFor(everywhere.port, `127.0.0.1:${everywhere.port}`)).toBe(200);
    } finally {
      await everywhere.stop();
    }
  });

  it('refuses a URL as --allowed-host as a usage error', async () => {
    const result = await jobs([
      'dashboard',
      '--db',
      db,
      '--allowed-host',
      'https://ops.example.test/',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--host/--allowed-host');
    expect(result.stderr).toContain('give the host name alone, e.g. "ops.example.test"');
  });
});
