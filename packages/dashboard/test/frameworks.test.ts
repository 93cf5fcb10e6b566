/**
 * Mounted as the README says: Express (with a body parser in front), Fastify (raw handler) and
 * Hono (fetch). Each serves its pages under the mount path and runs a CSRF-checked action.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { JobEngine, MemoryJobStore, silentLogger } from '@jobs/core';
import express from 'express';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { createDashboard, type DashboardRequest } from '../src/index.js';

const isAdmin = (req: DashboardRequest): boolean => {
  const cookie = req instanceof Request ? req.headers.get('cookie') : req.headers.cookie;
  return /(?:^|;\s*)user=admin(?:;|$)/.test(cookie ?? '');
};

async function storeWithJob(): Promise<{ store: MemoryJobStore; id: string }> {
  const store = new MemoryJobStore();
  const engine = new JobEngine({ store, logger: silentLogger });
  const job = await engine.enqueue(
    'mounted',
    { ok: true },
    { runAt: new Date(Date.now() + 3_600_000) },
  );
  return { store, id: job.id };
}

/** Views a page as the admin, then deletes job `id` with the page's CSRF token. */
async function deleteThroughForms(
  send: (path: string, init?: RequestInit) => Promise<Response>,
  base: string,
  id: string,
): Promise<void> {
  const view = await send(`${base}/jobs/${id}`, { headers: { cookie: 'user=admin' } });
  expect(view.status).toBe(200);
  const html = await view.text();
  expect(html).toContain(`href="${base}/deadletter"`);
  const cookie = (view.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const token = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
  const action = /<form method="post" action="([^"]+\/delete)"/.exec(html)?.[1] ?? '';
  expect(action).toBe(`${base}/jobs/${id}/delete`);
  const post = (body: string): Promise<Response> =>
    send(action, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: `user=admin; ${cookie}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body,
    });
  expect((await post('_csrf=wrong')).status).toBe(403);
  const done = await post(`_csrf=${encodeURIComponent(token)}`);
  expect(done.status).toBe(303);
  expect(done.headers.get('location')).toBe(`${base}/jobs?done=deleted&n=1`);
}

async function listen(server: Server): Promise<string> {
  if (!server.listening) {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  }
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('mounting', () => {
  it('Express: app.use(path, login, handler) with express.urlencoded() in front', async () => {
    const { store, id } = await storeWithJob();
    const app = express();
    app.use(express.urlencoded({ extended: false }));
    const dashboard = createDashboard({ store, authorize: isAdmin, logger: silentLogger });
    app.use(
      '/admin/jobs',
      (req, res, next) => (req.headers.cookie ? next() : res.status(401).end()),
      dashboard.handler,
    );
    const server = app.listen(0, '127.0.0.1');
    const origin = await listen(server);
    try {
      expect((await fetch(`${origin}/admin/jobs/`)).status).toBe(401);
      await deleteThroughForms((path, init) => fetch(`${origin}${path}`, init), '/admin/jobs', id);
      expect(await store.getJob(id)).toBeNull();
    } finally {
      server.close();
    }
  });

  it('Fastify: raw handler on a hijacked reply, form bodies left unparsed', async () => {
    const { store, id } = await storeWithJob();
    const fastify = Fastify();
    const dashboard = createDashboard({
      store,
      basePath: '/jobs',
      authorize: isAdmin,
      logger: silentLogger,
    });
    fastify.addContentTypeParser('application/x-www-form-urlencoded', (_req, _payload, done) =>
      done(null),
    );
    const route = (request: FastifyRequest, reply: FastifyReply): void => {
      reply.hijack();
      dashboard.handler(request.raw, reply.raw);
    };
    fastify.all('/jobs', route);
    fastify.all('/jobs/*', route);
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    const origin = await listen(fastify.server);
    try {
      await deleteThroughForms((path, init) => fetch(`${origin}${path}`, init), '/jobs', id);
      expect(await store.getJob(id)).toBeNull();
    } finally {
      await fastify.close();
    }
  });

  it('Hono: dashboard.fetch on the raw Request', async () => {
    const { store, id } = await storeWithJob();
    const app = new Hono();
    const dashboard = createDashboard({
      store,
      basePath: '/ops',
      authorize: isAdmin,
      logger: silentLogger,
      allowedHosts: ['app.test'],
    });
    app.all('/ops', (c) => dashboard.fetch(c.req.raw));
    app.all('/ops/*', (c) => dashboard.fetch(c.req.raw));
    await deleteThroughForms(
      async (path, init) => app.request(`http://app.test${path}`, init),
      '/ops',
      id,
    );
    expect(await store.getJob(id)).toBeNull();
    // The fetch Request's URL names the host: another one is refused.
    expect((await app.request('http://evil.test/ops/jobs')).status).toBe(421);
  });
});
