/**
 * OpenTelemetry through the worker API, into an in-memory exporter: acquire answers each job's
 * stored trace context; a request is a server span, a child of its `traceparent` header; a remote
 * run ends as a `jobs.run <type>` span linked to (or a child of) the job's trace context, with the
 * attribute names `@jobs/otel` gives an engine's run and the outcome of its settle; the
 * TypeScript client sends the trace context it is given, and each job's own on its settles.
 */
import { JobEngine, MemoryJobStore } from '@jobs/core';
import { instrument } from '@jobs/otel';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerClient } from '../src/client.js';
import { CALLER, type InMemorySpans, inMemorySpans } from './fixtures/spans.js';
import { newToken, newType, post, type Served, serveApi } from './harness.js';

describe('tracing through the worker API', () => {
  const store = new MemoryJobStore();
  const engine = new JobEngine({ store });
  const token = newToken();
  const types = {
    acquire: newType('acquire'),
    run: newType('run'),
    fail: newType('fail'),
    lost: newType('lost'),
    child: newType('child'),
    client: newType('client'),
  };
  let spans: InMemorySpans;
  let served: Served;
  let childServed: Served;

  beforeAll(async () => {
    spans = inMemorySpans();
    const common = {
      store,
      clients: [{ token, types: Object.values(types) }],
      pollMs: 50,
      tracer: spans.tracerProvider.getTracer('@jobs/http'),
    };
    served = await serveApi(common);
    childServed = await serveApi({ ...common, link: 'child' });
  });
  afterAll(async () => {
    await served.close();
    await childServed.close();
    await store.close();
  });

  const acquire = (url: string, type: string, headers: Record<string, string> = {}) =>
    post(`${url}/acquire`, token, { types: [type], leaseMs: 5_000 }, headers);
  const settle = (url: string, id: string, action: string, body: object) =>
    post(`${url}/jobs/${id}/${action}`, token, body);
  const runSpan = (type: string) => spans.named(`jobs.run ${type}`);

  it("acquire answers each job's stored trace context as traceparent and tracestate", async () => {
    const traced = await engine.enqueue(
      types.acquire,
      {},
      { meta: { traceparent: CALLER.traceparent, tracestate: 'vendor=a1' } },
    );
    const plain = await engine.enqueue(types.acquire, {});
    const answer = await post(`${served.url}/acquire`, token, { types: [types.acquire], max: 2 });
    const byId = new Map(answer.body.jobs.map((j: { id: string }) => [j.id, j]));
    expect(byId.get(traced.id)).toMatchObject({
      traceparent: CALLER.traceparent,
      tracestate: 'vendor=a1',
    });
    expect(byId.get(plain.id)).toMatchObject({ traceparent: null, tracestate: null });
  });

  it('a request is a server span, a child of its traceparent header (tracestate kept)', async () => {
    spans.exporter.reset();
    await acquire(served.url, types.acquire, {
      traceparent: CALLER.traceparent,
      tracestate: 'vendor=b2',
    });
    await acquire(served.url, types.acquire);
    await acquire(served.url, types.acquire, { traceparent: '00-not-a-trace-context' });
    const [child, root, malformed] = spans.named('POST /acquire');
    expect(child?.kind).toBe(SpanKind.SERVER);
    expect(child?.spanContext().traceId).toBe(CALLER.traceId);
    expect(child?.parentSpanContext?.spanId).toBe(CALLER.spanId);
    expect(child?.spanContext().traceState?.serialize()).toBe('vendor=b2');
    expect(child?.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/acquire',
      'http.response.status_code': 200,
    });
    // No header, or a malformed one: a new trace.
    for (const span of [root, malformed]) {
      expect(span?.parentSpanContext).toBeUndefined();
      expect(span?.spanContext().traceId).not.toBe(CALLER.traceId);
    }
    // A refused call is traced too, under its route; an unknown path by its method alone.
    await settle(served.url, '1', 'complete', { token: 'stale' });
    await post(`${served.url}/nowhere`, token, {});
    expect(
      spans.named('POST /jobs/{id}/complete')[0]?.attributes['http.response.status_code'],
    ).toBe(409);
    expect(spans.named('POST')[0]?.attributes['http.response.status_code']).toBe(404);
  });

  it("a completed remote run is a consumer span linked to the job's trace context, with @jobs/otel's attribute names", async () => {
    // An engine run under @jobs/otel, for its span's attribute names.
    const native = new JobEngine({ store, handlers: { [types.child]: async () => 'ok' } });
    const uninstrument = instrument(native, { tracerProvider: spans.tracerProvider });
    const nativeDone = new Promise((resolve) => native.on('completed', resolve));
    await native.enqueue(types.child, {});
    await native.start();
    await nativeDone;
    await native.stop({ timeoutMs: 1_000 });
    uninstrument();
    const [engineRun] = runSpan(types.child);

    const job = await engine.enqueue(types.run, {}, { meta: { traceparent: CALLER.traceparent } });
    const [held] = (await acquire(served.url, types.run)).body.jobs;
    expect((await settle(served.url, job.id, 'complete', { token: held.token })).status).toBe(200);
    const [remote] = runSpan(types.run);
    expect(remote?.kind).toBe(SpanKind.CONSUMER);
    expect(remote?.parentSpanContext).toBeUndefined();
    expect(remote?.links.map((l) => l.context.spanId)).toEqual([CALLER.spanId]);
    expect(remote?.attributes).toMatchObject({
      'messaging.system': 'jobs',
      'messaging.operation.type': 'process',
      'jobs.job.id': job.id,
      'jobs.job.type': types.run,
      'jobs.job.attempt': 1,
      'jobs.job.outcome': 'completed',
    });
    expect(Object.keys(remote?.attributes ?? {}).sort()).toEqual(
      Object.keys(engineRun?.attributes ?? {}).sort(),
    );
    expect(remote?.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('a failed run records its error and retried or deadletter; a release is released', async () => {
    const job = await engine.enqueue(types.fail, {}, { retries: 1 });
    const [first] = (await acquire(served.url, types.fail)).body.jobs;
    await settle(served.url, job.id, 'fail', {
      token: first.token,
      error: { message: 'disk full', stack: 'at copy()' },
      retryInMs: 0,
    });
    const [second] = (
      await post(`${served.url}/acquire`, token, { types: [types.fail], waitMs: 5_000 })
    ).body.jobs;
    await settle(served.url, job.id, 'fail', { token: second.token, error: 'still full' });
    const released = await engine.enqueue(types.fail, {});
    const [third] = (await acquire(served.url, types.fail)).body.jobs;
    await settle(served.url, released.id, 'release', { token: third.token });

    const [retried, deadletter, gaveBack] = runSpan(types.fail);
    expect(retried?.attributes['jobs.job.outcome']).toBe('retried');
    expect(retried?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'disk full' });
    expect(retried?.events.map((e) => e.attributes?.['exception.message'])).toEqual(['disk full']);
    expect(deadletter?.attributes).toMatchObject({
      'jobs.job.outcome': 'deadletter',
      'jobs.job.attempt': 2,
    });
    expect(gaveBack?.attributes['jobs.job.outcome']).toBe('released');
    expect(gaveBack?.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('a settle refused because the lease was taken over ends the run as lease-lost', async () => {
    const job = await engine.enqueue(types.lost, {});
    const [stale] = (
      await post(`${served.url}/acquire`, token, { types: [types.lost], leaseMs: 100 })
    ).body.jobs;
    // Another worker takes it over once the lease lapsed (the API recovers it).
    const [fresh] = (
      await post(`${served.url}/acquire`, token, { types: [types.lost], waitMs: 10_000 })
    ).body.jobs;
    expect(fresh.id).toBe(job.id);
    expect((await settle(served.url, job.id, 'complete', { token: stale.token })).status).toBe(409);
    const [lost] = runSpan(types.lost);
    expect(lost?.attributes).toMatchObject({ 'jobs.job.outcome': 'lease-lost' });
    expect(lost?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'lease lost' });
    await settle(served.url, job.id, 'complete', { token: fresh.token });
    expect(runSpan(types.lost).map((s) => s.attributes['jobs.job.outcome'])).toEqual([
      'lease-lost',
      'completed',
    ]);
  });

  it("with link: 'child', a run is a child of the job's trace context", async () => {
    spans.exporter.reset();
    const job = await engine.enqueue(
      types.child,
      {},
      { meta: { traceparent: CALLER.traceparent } },
    );
    const [held] = (await acquire(childServed.url, types.child)).body.jobs;
    await settle(childServed.url, job.id, 'complete', { token: held.token });
    const [run] = runSpan(types.child);
    expect(run?.spanContext().traceId).toBe(CALLER.traceId);
    expect(run?.parentSpanContext?.spanId).toBe(CALLER.spanId);
    expect(run?.links).toEqual([]);
  });

  it("the TypeScript client sends the trace context it is given, and work() each job's own on its settle", async () => {
    spans.exporter.reset();
    const client = createWorkerClient({ url: served.url, token });
    await client.acquire({ types: [types.client], trace: { traceparent: CALLER.traceparent } });
    expect(spans.named('POST /acquire')[0]?.parentSpanContext?.spanId).toBe(CALLER.spanId);

    const producer = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await engine.enqueue(types.client, {}, { meta: { traceparent: producer } });
    const stop = new AbortController();
    await client.work(
      [types.client],
      async () => {
        setImmediate(() => stop.abort());
        return 'done';
      },
      { waitMs: 1_000, signal: stop.signal },
    );
    const [complete] = spans.named('POST /jobs/{id}/complete');
    expect(complete?.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(complete?.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
  });
});
