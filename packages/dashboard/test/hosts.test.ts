/**
 * Which hosts a dashboard answers (DNS rebinding) and what it does with malformed input, over
 * real HTTP (node:http) on a SQLite store. The store is wrapped to count its calls, so "reads
 * nothing" is what the store saw, not what a page shows.
 */
import { once } from 'node:events';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  JobEngine,
  type JobStore,
  type Logger,
  silentLogger,
  UnrecoverableError,
  ValidationError,
} from '@jobs/core';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CSS_FILE } from '../src/assets.js';
import { hostAllowed, hostRule, parseHost } from '../src/hosts.js';
import { createDashboard, type DashboardOptions } from '../src/index.js';
import { type Backend, sqliteBackend } from './backends.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One HTTP request to 127.0.0.1:`port` with the given `Host` header (fetch cannot set it). */
function send(
  port: number,
  path: string,
  options: { method?: string; host?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        headers: { host: options.host ?? `127.0.0.1:${port}`, ...options.headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** `store` with every method call it answers counted by name. */
function counted(store: JobStore): { store: JobStore; calls: string[] } {
  const calls: string[] = [];
  // Methods of the store and of its abilities (`views.queueStats`, …) count alike.
  const counting = <T extends object>(target: T, prefix: string): T =>
    new Proxy(target, {
      get(inner, name, receiver) {
        const value = Reflect.get(inner, name, receiver);
        if (typeof value === 'object' && value !== null && prefix === '') {
          return counting(value, `${String(name)}.`);
        }
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          calls.push(`${prefix}${String(name)}`);
          return (value as (...a: unknown[]) => unknown).apply(inner, args);
        };
      },
    });
  return { store: counting(store, ''), calls };
}

/** What the live table holds, to prove a refused request changed nothing. */
async function snapshot(store: JobStore): Promise<string> {
  const jobs = await store.listJobs({ limit: 1_000, offset: 0 });
  const schedules = await store.listSchedules();
  return JSON.stringify({
    jobs: jobs.map((job) => [job.id, job.state, job.retriesLeft]),
    schedules: schedules.map((s) => [s.name, s.paused]),
  });
}

describe('allowedHosts: the option', () => {
  it('takes names, .domains, IP addresses and any, and says what to write for a wrong one', () => {
    const rule = hostRule([
      'Ops.Example.com',
      '.tenants.example',
      '10.0.0.7',
      '[::1]',
      'bücher.example',
    ]);
    expect([...rule.names]).toEqual(['ops.example.com', 'xn--bcher-kva.example']);
    expect(rule.domains).toEqual(['.tenants.example']);
    expect(hostRule('any').any).toBe(true);
    expect(hostRule(undefined)).toMatchObject({ any: false, domains: [] });

    const refusal = (value: unknown): string => {
      try {
        hostRule(value);
      } catch (error) {
        expect(error).toBeInstanceOf(ValidationError);
        return (error as Error).message;
      }
      throw new Error(`accepted ${JSON.stringify(value)}`);
    };
    expect(refusal('ops.example.com')).toBe(
      `allowedHosts: [@jobs/dashboard] createDashboard: must be an array of host names (e.g. ['ops.example.com']) or 'any', got "ops.example.com"`,
    );
    expect(refusal(true)).toContain("or 'any', got true");
    expect(refusal(['ok.example', 'https://ops.example.com/jobs'])).toBe(
      'allowedHosts[1]: [@jobs/dashboard] createDashboard: "https://ops.example.com/jobs" is a URL: give the host name alone, e.g. "ops.example.com"',
    );
    expect(refusal(['ops.example.com:8080'])).toContain('without the port');
    expect(refusal(['*.example.com'])).toContain('as ".example.com"');
    expect(refusal(['*'])).toContain("allowedHosts: 'any'");
    expect(refusal([''])).toContain('empty string');
    expect(refusal([42])).toContain('allowedHosts[0]');
    for (const name of ['ops example', 'ops.example.com/jobs', 'bü/cher.example', 'a..b']) {
      expect(refusal([name]), name).toContain('is not a host name');
    }
    expect(() => createDashboard({ store: {} as JobStore, allowedHosts: ['a/b'] })).toThrow(
      ValidationError,
    );
  });

  it('reads a Host header: port dropped, case folded, IPv6 brackets, trailing dot', () => {
    expect(parseHost('LOCALHOST:8080')).toEqual({ name: 'localhost', ip: false });
    expect(parseHost('localhost.')).toEqual({ name: 'localhost', ip: false });
    expect(parseHost('[::1]:3000')).toEqual({ name: '::1', ip: true });
    expect(parseHost('127.0.0.1')).toEqual({ name: '127.0.0.1', ip: true });
    expect(parseHost('Evil.Example:80')).toEqual({ name: 'evil.example', ip: false });
    for (const bad of [
      '',
      'evil.example@127.0.0.1',
      'a b',
      '[evil.example]',
      'x:99999',
      '::1',
      'a/b',
    ]) {
      expect(parseHost(bad), bad).toBeNull();
    }
    const rule = hostRule(['ops.example.com', '.tenants.example']);
    const allowed = (header: string): boolean =>
      hostAllowed(rule, parseHost(header) ?? { name: '', ip: false });
    expect(
      [
        'localhost:1',
        'app.localhost',
        '192.168.1.20:8080',
        '[fe80::1]',
        'OPS.example.com',
        'tenants.example',
        'a.tenants.example',
      ].map(allowed),
    ).toEqual([true, true, true, true, true, true, true]);
    expect(
      [
        'evil.example',
        'ops.example.com.evil.example',
        'xtenants.example',
        'localhost.evil.example',
      ].map(allowed),
    ).toEqual([false, false, false, false]);
  });
});

describe('dashboard over HTTP on 127.0.0.1', () => {
  let backend: Backend;
  let base: JobStore;
  let store: JobStore;
  let calls: string[];
  let server: Server;
  let port: number;
  let deadId = '';
  let waitingId = '';
  const warnings: string[] = [];
  const logger: Logger = { ...silentLogger, warn: (message) => void warnings.push(message) };
  /** Dashboards by path prefix, each created with its own options over the counted store. */
  const mounts = new Map<string, ReturnType<typeof createDashboard>>();
  const mount = (prefix: string, options: Partial<DashboardOptions> = {}): void => {
    mounts.set(
      prefix,
      createDashboard({ store, basePath: prefix, logger, authorize: () => true, ...options }),
    );
  };

  beforeAll(async () => {
    backend = sqliteBackend();
    base = await backend.open();
    ({ store, calls } = counted(base));
    // A dead-letter job: its handler fails for good.
    const engine = new JobEngine({
      store: base,
      logger: silentLogger,
      pollIntervalMs: 50,
      handlers: {
        dead: async () => {
          throw new UnrecoverableError('boom');
        },
      },
    });
    await engine.start();
    deadId = (await engine.enqueue('dead', { secret: 'payload-marker' })).id;
    for (let i = 0; i < 200 && (await base.getJob(deadId))?.state !== 'deadletter'; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await engine.stop();
    waitingId = (await engine.enqueue('waiting', {}, { runAt: new Date(Date.now() + 3_600_000) }))
      .id;
    await engine.schedule('nightly', { cron: '0 3 * * *', type: 'report' });
    expect((await base.getJob(deadId))?.state).toBe('deadletter');

    // Like `jobsctl dashboard --allow-actions`: anyone who reaches it may act.
    mount('/default');
    mount('/named', { allowedHosts: ['ops.example.com', '.tenants.example'] });
    mount('/any', { allowedHosts: 'any' });
    server = createServer((req, res) => {
      const prefix = `/${(req.url ?? '/').split('/')[1] ?? ''}`;
      const dashboard = mounts.get(prefix);
      if (dashboard) return dashboard.handler(req, res);
      res.statusCode = 404;
      res.end('app 404');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    server?.close();
    await base?.close();
    await backend?.drop();
  });

  it('answers loopback names and IP addresses, with any port and case', async () => {
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `LOCALHOST:${port}`,
      `[::1]:${port}`,
      'app.localhost',
      '10.1.2.3:80',
    ]) {
      const answer = await send(port, '/default/jobs', { host });
      expect(answer.status, host).toBe(200);
      expect(answer.text).toContain('<h1>Jobs');
    }
  });

  it('refuses a foreign Host with 421 on every route, before reading the store (DNS rebinding)', async () => {
    const before = await snapshot(base);
    // A valid CSRF pair, from a page seen at the right address: the worst case for the attacker's page.
    const view = await send(port, `/default/jobs/${deadId}`);
    const cookie = String(view.headers['set-cookie'] ?? '').split(';')[0] ?? '';
    const token = /name="_csrf" value="([^"]+)"/.exec(view.text)?.[1] ?? '';
    expect(token).not.toBe('');
    calls.length = 0;
    const evil = 'evil.example';
    const gets = [
      '/',
      '/jobs',
      `/jobs/${deadId}`,
      '/deadletter',
      '/schedules',
      '/history',
      '/api/stats',
      '/api/jobs',
      `/api/jobs/${deadId}`,
      `/assets/${CSS_FILE}`,
      '/assets/__proto__',
      '/nowhere',
      '/jobs?done=__proto__',
    ];
    for (const path of gets) {
      const answer = await send(port, `/default${path}`, { host: `${evil}:${port}` });
      expect(answer.status, path).toBe(421);
      expect(answer.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(answer.text).not.toContain('payload-marker');
      expect(answer.text).not.toContain('_csrf');
    }
    const form = {
      cookie,
      'content-type': 'application/x-www-form-urlencoded',
      origin: `http://${evil}:${port}`,
    };
    for (const [path, body] of [
      [`/jobs/${deadId}/delete`, `_csrf=${token}`],
      ['/deadletter/bulk', `_csrf=${token}&op=delete&type=dead&dryRun=0`],
      ['/schedules/nightly/pause', `_csrf=${token}`],
    ] as const) {
      const answer = await send(port, `/default${path}`, {
        method: 'POST',
        host: evil,
        headers: form,
        body,
      });
      expect(answer.status, path).toBe(421);
    }
    expect(calls).toEqual([]);
    expect(await snapshot(base)).toBe(before);

    // The refusal says what it refused and which option allows it.
    const refused = await send(port, '/default/', { host: `Evil.Example:${port}` });
    expect(refused.text).toContain('does not answer for the host "evil.example"');
    expect(refused.text).toContain('DNS rebinding');
    expect(refused.text).toContain("createDashboard({ store, allowedHosts: ['evil.example'] })");
    expect(refused.text).toContain('jobs dashboard --allowed-host evil.example');
    // Logged once per host, with the same advice.
    expect(warnings.filter((w) => w.includes('"evil.example"'))).toHaveLength(1);
    expect(warnings[0]).toContain("allowedHosts: ['evil.example']");

    // The same forms at the right address do act: the refusals above were the host check.
    const deleted = await send(port, `/default/jobs/${deadId}/delete`, {
      method: 'POST',
      headers: { ...form, origin: `http://127.0.0.1:${port}` },
      body: `_csrf=${token}`,
    });
    expect(deleted.status).toBe(303);
    expect(await base.getJob(deadId)).toBeNull();
  });

  it('answers names listed in allowedHosts (and under a .domain); any turns the check off', async () => {
    expect((await send(port, '/named/jobs', { host: 'ops.example.com' })).status).toBe(200);
    expect((await send(port, '/named/jobs', { host: 'eu.tenants.example:443' })).status).toBe(200);
    expect((await send(port, '/named/jobs', { host: 'localhost' })).status).toBe(200);
    const other = await send(port, '/named/jobs', { host: 'evil.example' });
    expect(other.status).toBe(421);
    expect(other.text).toContain('plus ops.example.com, .tenants.example');
    expect((await send(port, '/any/jobs', { host: 'evil.example' })).status).toBe(200);
  });

  it('answers a malformed Host header with 400', async () => {
    calls.length = 0;
    for (const host of ['evil.example@127.0.0.1', 'a b', `127.0.0.1:${port}/x`]) {
      const answer = await send(port, '/default/jobs', { host });
      expect(answer.status, host).toBe(400);
      expect(answer.text).toContain('Host header');
    }
    expect(calls).toEqual([]);
  });

  it('checks the Host under an Express mount path and leaves the app’s other routes alone', async () => {
    const app = express();
    const dashboard = createDashboard({ store, logger });
    app.use('/ops', dashboard.handler);
    app.get('/health', (_req, res) => void res.send('ok'));
    const appServer = app.listen(0, '127.0.0.1');
    await once(appServer, 'listening');
    const appPort = (appServer.address() as AddressInfo).port;
    try {
      expect((await send(appPort, '/ops/jobs', { host: 'evil.example' })).status).toBe(421);
      expect((await send(appPort, '/ops/jobs')).status).toBe(200);
      expect((await send(appPort, '/health', { host: 'evil.example' })).text).toBe('ok');
    } finally {
      appServer.close();
    }
  });

  it('answers malformed parameters with 400 saying which, before reading the store', async () => {
    const before = await snapshot(base);
    const cases: [string, string][] = [
      ['/?done=__proto__', 'the query parameter "done" names no notice'],
      ['/jobs?done=constructor', 'the query parameter "done"'],
      ['/history?cursor=1.5x%00', 'the query parameter "cursor" must be'],
      ['/history?cursor=999999999999999.1', 'the query parameter "cursor" must be'],
      ['/history?cursor=abc', 'the query parameter "cursor" must be'],
      ['/jobs?type=%00', 'the query parameter "type" holds a control character'],
      ['/deadletter?type=%00', 'the query parameter "type"'],
      ['/history?type=%0A', 'the query parameter "type"'],
      ['/jobs?state=bogus', 'the query parameter "state" must be one of timer, async'],
      ['/history?outcome=__proto__', 'the query parameter "outcome" must be one of'],
      ['/jobs?after=1&offset=1.5', 'the query parameter "offset" must be a whole number'],
      ['/jobs?after=1&offset=-3', 'the query parameter "offset"'],
      ['/jobs?after=1&offset=99999999999', 'the query parameter "offset"'],
      ['/?done=deleted&n=1e3', 'the query parameter "n"'],
      [`/jobs?queue=${'q'.repeat(256)}`, 'is 256 characters long; names have at most 255'],
      [`/jobs?after=${'9'.repeat(300)}`, 'the query parameter "after" is 300 characters long'],
      ['/jobs?type=%zz', 'is not valid percent-encoded UTF-8'],
      ['/jobs?type=%E0%A4%A', 'is not valid percent-encoded UTF-8'],
      ['/jobs?%ff=1', 'is not valid percent-encoded UTF-8'],
      ['/jobs/%E0%A4%A', 'the path segment "%E0%A4%A" is not valid percent-encoded UTF-8'],
      ['/jobs/%00', 'the path segment "%00" holds a control character'],
      [`/jobs/${'1'.repeat(300)}`, 'is 300 characters long'],
    ];
    calls.length = 0;
    for (const [path, message] of cases) {
      const answer = await send(port, `/default${path}`);
      expect(answer.status, path).toBe(400);
      expect(answer.text, path).toContain(message.replace(/"/g, '&quot;'));
      expect(answer.headers['content-type']).toContain('text/html');
    }
    // The JSON API says the same as JSON.
    const api = await send(port, '/default/api/jobs?type=%00');
    expect(api.status).toBe(400);
    expect(JSON.parse(api.text)).toEqual({
      error: 'Bad request: the query parameter "type" holds a control character (NUL, newline, …).',
    });
    expect(calls).toEqual([]);

    // Assets are looked up among the package's own: anything else is a 404.
    for (const path of [
      '/assets/__proto__',
      '/assets/constructor',
      '/assets/toString',
      '/assets/app.css',
    ]) {
      expect((await send(port, `/default${path}`)).status, path).toBe(404);
    }
    expect((await send(port, `/default/assets/${CSS_FILE}`)).status).toBe(200);
    expect(calls).toEqual([]);

    // Well-formed values still work, unknown parameters are let through.
    for (const path of [
      '/?done=deleted&n=3&running=1',
      '/jobs?state=&type=&utm_source=x',
      '/history?cursor=1.5',
      `/jobs?after=${waitingId}&offset=50`,
    ]) {
      expect((await send(port, `/default${path}`)).status, path).toBe(200);
    }
    expect(await snapshot(base)).toBe(before);
  });

  it('answers a malformed form with 400 and changes nothing', async () => {
    const view = await send(port, `/default/jobs/${waitingId}`);
    const cookie = String(view.headers['set-cookie'] ?? '').split(';')[0] ?? '';
    const token = /name="_csrf" value="([^"]+)"/.exec(view.text)?.[1] ?? '';
    const before = await snapshot(base);
    for (const body of [
      `_csrf=${token}&op=delete&type=%00&dryRun=0`,
      `_csrf=${token}&op=delete&type=%zz&dryRun=0`,
    ]) {
      const answer = await send(port, '/default/deadletter/bulk', {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
      expect(answer.status, body).toBe(400);
      expect(answer.text).toContain('Bad form: the field');
    }
    expect(await snapshot(base)).toBe(before);
  });
});
