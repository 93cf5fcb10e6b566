/**
 * The OpenAPI document against the real API: it describes exactly the routes served, each
 * route answers (no 404/405), and real answers match the document's response schemas.
 */
import { JobEngine, MemoryJobStore } from '@jobs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerApi, WORKER_API_ROUTES, type WorkerApi } from '../src/index.js';
import { newToken } from './harness.js';

type Schema = Record<string, unknown>;

/** Problems of `value` against the subset of JSON Schema the document uses. */
function check(doc: Schema, schema: Schema, value: unknown, at = '$'): string[] {
  if (typeof schema.$ref === 'string') {
    const target = (schema.$ref as string)
      .slice(2)
      .split('/')
      .reduce<unknown>((node, key) => (node as Schema)[key], doc) as Schema;
    return check(doc, target, value, at);
  }
  const problems: string[] = [];
  if (Array.isArray(schema.oneOf)) {
    const fits = (schema.oneOf as Schema[]).filter((s) => check(doc, s, value, at).length === 0);
    return fits.length === 1 ? [] : [`${at}: matches ${fits.length} of oneOf`];
  }
  if ('const' in schema && value !== schema.const)
    problems.push(`${at}: not ${String(schema.const)}`);
  if (Array.isArray(schema.enum) && !schema.enum.includes(value))
    problems.push(`${at}: not in enum`);
  const types = schema.type === undefined ? null : ([] as unknown[]).concat(schema.type);
  if (types) {
    const actual =
      value === null
        ? 'null'
        : Array.isArray(value)
          ? 'array'
          : Number.isInteger(value)
            ? 'integer'
            : typeof value;
    const ok = types.includes(actual) || (actual === 'integer' && types.includes('number'));
    if (!ok) return [`${at}: ${actual}, expected ${types.join('|')}`];
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const key of (schema.required as string[] | undefined) ?? []) {
      if (!(key in value)) problems.push(`${at}.${key}: missing`);
    }
    const properties = (schema.properties ?? {}) as Record<string, Schema>;
    for (const [key, sub] of Object.entries(properties)) {
      if (key in value) problems.push(...check(doc, sub, (value as Schema)[key], `${at}.${key}`));
    }
    if (schema.additionalProperties === false) {
      for (const key of Object.keys(value))
        if (!(key in properties)) problems.push(`${at}.${key}: not allowed`);
    }
  }
  if (Array.isArray(value) && schema.items) {
    value.forEach((item, i) => {
      problems.push(...check(doc, schema.items as Schema, item, `${at}[${i}]`));
    });
  }
  return problems;
}

describe('the OpenAPI document', () => {
  const store = new MemoryJobStore();
  const engine = new JobEngine({ store });
  const token = newToken();
  let api: WorkerApi;
  let doc: Schema;
  const base = 'http://workers.test/api/workers';
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await api.fetch(
      new Request(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
    const text = await response.text();
    return { status: response.status, type: response.headers.get('content-type'), text };
  };
  /** Checks a real answer against the document's schema for that operation and status. */
  const conforms = (
    path: string,
    method: string,
    status: number,
    text: string,
    type: string | null,
  ) => {
    const op = (doc.paths as Schema)[path] as Schema;
    const responses = (op[method] as Schema).responses as Record<string, Schema>;
    let response = responses[String(status)];
    expect(response, `${method} ${path} documents ${status}`).toBeDefined();
    if (typeof response?.$ref === 'string')
      response = ((doc.components as Schema).responses as Schema).Problem as Schema;
    const content = response?.content as Record<string, { schema: Schema }>;
    const mediaType = (type ?? '').split(';')[0] as string;
    expect(Object.keys(content), `${method} ${path} ${status} media type`).toContain(mediaType);
    if (mediaType.includes('json')) {
      const schema = content[mediaType]?.schema as Schema;
      expect(check(doc, schema, JSON.parse(text))).toEqual([]);
    }
  };

  beforeAll(async () => {
    api = createWorkerApi({
      store,
      basePath: '/api/workers',
      clients: [{ token, types: ['doc'] }],
    });
    const answer = await call('GET', '/openapi.json');
    expect(answer.status).toBe(200);
    doc = JSON.parse(answer.text);
  });
  afterAll(() => api.close());

  it('is OpenAPI 3.1 and describes exactly the routes served', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: '/api/workers' }]);
    const documented = Object.entries(doc.paths as Record<string, Schema>).flatMap(([path, ops]) =>
      Object.keys(ops).map(
        (method) => `${method.toUpperCase()} ${path} ${(ops[method] as Schema).operationId}`,
      ),
    );
    const served = WORKER_API_ROUTES.map((r) => `${r.method} ${r.path} ${r.operationId}`);
    expect(documented.sort()).toEqual(served.sort());
  });

  it('every documented route answers, and its answers match the document', async () => {
    const job = await engine.enqueue('doc', { n: 1 }, { retries: 0 });
    await engine.enqueue('doc', { n: 2 });
    const acquired = await call('POST', '/acquire', { max: 1, leaseMs: 5_000 });
    conforms('/acquire', 'post', acquired.status, acquired.text, acquired.type);
    const held = JSON.parse(acquired.text).jobs[0];
    expect(held.id).toBe(job.id);
    const id = held.id;
    const extended = await call('POST', `/jobs/${id}/extend`, { token: held.token, progress: 50 });
    conforms('/jobs/{id}/extend', 'post', extended.status, extended.text, extended.type);
    const failed = await call('POST', `/jobs/${id}/fail`, { token: held.token, error: 'x' });
    conforms('/jobs/{id}/fail', 'post', failed.status, failed.text, failed.type);
    const refused = await call('POST', `/jobs/${id}/complete`, { token: held.token });
    expect(refused.status).toBe(409);
    conforms('/jobs/{id}/complete', 'post', refused.status, refused.text, refused.type);
    const next = JSON.parse((await call('POST', '/acquire', {})).text).jobs[0];
    const released = await call('POST', `/jobs/${next.id}/release`, { token: next.token });
    conforms('/jobs/{id}/release', 'post', released.status, released.text, released.type);
    const again = JSON.parse((await call('POST', '/acquire', {})).text).jobs[0];
    const completed = await call('POST', `/jobs/${again.id}/complete`, {
      token: again.token,
      result: [1],
    });
    conforms('/jobs/{id}/complete', 'post', completed.status, completed.text, completed.type);
    await engine.enqueue('doc', { n: 3 });
    const last = JSON.parse((await call('POST', '/acquire', {})).text).jobs[0];
    const many = await call('POST', '/complete', {
      jobs: [
        { id: last.id, token: last.token },
        { id: '999999', token: 'x' },
      ],
    });
    conforms('/complete', 'post', many.status, many.text, many.type);
    const health = await call('GET', '/health');
    conforms('/health', 'get', health.status, health.text, health.type);
    const metrics = await call('GET', '/metrics');
    conforms('/metrics', 'get', metrics.status, metrics.text, metrics.type);
    expect(metrics.text).toMatch(/jobs_http_jobs_total\{event="completed",client="client-1"\} 2/);
    expect(metrics.text).not.toContain(token);
    for (const route of WORKER_API_ROUTES) {
      const path = route.path.replace('{id}', id);
      const answer = await call(route.method, path, route.method === 'POST' ? {} : undefined);
      expect([404, 405], `${route.method} ${route.path}`).not.toContain(answer.status);
      const wrong = await call(route.method === 'GET' ? 'POST' : 'GET', path);
      expect(wrong.status).toBe(405);
    }
    expect((await call('GET', '/nothing-here')).status).toBe(404);
  });
});
