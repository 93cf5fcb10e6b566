/**
 * Enqueue in this process, run in another: the job's row carries the producer span's context,
 * and the worker's run spans join it — linked (default) or as children — with the messaging
 * attributes, the error of a failed run, and the run metrics and queue gauges. Each process has
 * its own tracer and meter providers with in-memory exporters; the worker sends its spans and
 * metrics back over IPC.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import { context, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instrument, parseTraceparent } from '../src/index.js';
import type { PlainMetrics, PlainPoint, PlainSpan } from './fixtures/plain.js';
import { inMemoryTelemetry } from './fixtures/telemetry.js';

const WORKER = fileURLToPath(new URL('./fixtures/otel-worker.ts', import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));

let contextManager: AsyncLocalStorageContextManager;
beforeAll(() => {
  contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
});
afterAll(() => {
  context.disable();
});

/** Runs the worker on `filename` until `expectedRuns` runs ended; what it recorded. */
function runWorker(
  filename: string,
  link: 'link' | 'child',
  expectedRuns: number,
): Promise<{ spans: PlainSpan[]; metrics: PlainMetrics }> {
  return new Promise((resolve, reject) => {
    const child = fork(WORKER, [filename, link, String(expectedRuns)], {
      cwd: PACKAGE_DIR,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    let stderr = '';
    let report: { spans: PlainSpan[]; metrics: PlainMetrics } | null = null;
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('message', (message) => {
      report = message as { spans: PlainSpan[]; metrics: PlainMetrics };
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (report && code === 0) resolve(report);
      else reject(new Error(`worker exited with ${code} and no report:\n${stderr}`));
    });
  });
}

const sum = (points: PlainPoint[] | undefined, match: Record<string, unknown>): number =>
  (points ?? [])
    .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
    .reduce((total, p) => total + (typeof p.value === 'number' ? p.value : 0), 0);

describe.each(['link', 'child'] as const)(
  'a job enqueued here and run in another process (%s)',
  (link) => {
    it('runs in a span that joins the enqueuing trace, with messaging attributes, outcome, error and metrics', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'jobs-otel-'));
      const filename = join(dir, 'jobs.db');
      const { spans, tracerProvider, meterProvider } = inMemoryTelemetry();
      const store = new SqliteJobStore({ filename });
      try {
        await store.migrate();
        const client = new JobEngine({ store });
        const uninstrument = instrument(client, { tracerProvider, meterProvider });
        const now = await store.now();
        // The app's own span around the enqueue: the producer span is its child.
        const request = tracerProvider.getTracer('app');
        const [ok, boom, flaky] = await request.startActiveSpan('POST /orders', async (span) => {
          const okJob = await client.enqueue('ok', { order: 1 }, { queue: 'orders' });
          const batch = await client.enqueueMany([
            { type: 'boom', options: { retries: 0 } },
            { type: 'flaky', options: { retries: 1, retry: { kind: 'fixed', delayMs: 10 } } },
            // Never run (the worker has no handler): its due time makes the oldest-due gauge.
            {
              type: 'backlog-job',
              options: { queue: 'backlog', runAt: new Date(now.getTime() - 90_000) },
            },
          ]);
          span.end();
          return [okJob, ...batch];
        });
        uninstrument();

        const producers = spans.getFinishedSpans().filter((s) => s.name === 'jobs.enqueue');
        expect(producers).toHaveLength(2);
        const [single, batch] = producers as [(typeof producers)[0], (typeof producers)[0]];
        const requestSpan = spans.getFinishedSpans().find((s) => s.name === 'POST /orders');
        expect(single.kind).toBe(SpanKind.PRODUCER);
        expect(single.parentSpanContext?.spanId).toBe(requestSpan?.spanContext().spanId);
        expect(single.attributes).toMatchObject({
          'messaging.system': 'jobs',
          'messaging.operation.type': 'send',
          'messaging.operation.name': 'enqueue',
          'messaging.destination.name': 'orders',
          'messaging.message.id': ok!.id,
          'jobs.job.id': ok!.id,
          'jobs.job.type': 'ok',
        });
        expect(batch.attributes).toMatchObject({ 'messaging.batch.message_count': 3 });
        expect(batch.attributes['messaging.destination.name']).toBeUndefined();

        // The trace context is in the row the INSERT wrote, read around the store.
        const db = new Database(filename, { readonly: true });
        const metaOf = (id: string): Record<string, string> =>
          JSON.parse(
            (
              db.prepare('SELECT meta FROM jobs_jobs WHERE id = ?').get(Number(id)) as {
                meta: string;
              }
            ).meta,
          );
        const producerOf = { [ok!.id]: single, [boom!.id]: batch, [flaky!.id]: batch };
        for (const [id, producer] of Object.entries(producerOf)) {
          const stored = parseTraceparent(metaOf(id).traceparent ?? '');
          expect(stored?.traceId).toBe(producer.spanContext().traceId);
          expect(stored?.spanId).toBe(producer.spanContext().spanId);
        }
        expect(ok!.meta?.traceparent).toBe(metaOf(ok!.id).traceparent);
        db.close();

        // ok: 1 run; boom: 1 (deadletter); flaky: 2 (retried, then completed).
        const { spans: runSpans, metrics } = await runWorker(filename, link, 4);
        const runsOf = (type: string) => runSpans.filter((s) => s.name === `jobs.run ${type}`);
        const [okRun] = runsOf('ok');
        const [boomRun] = runsOf('boom');
        const flakyRuns = runsOf('flaky');
        expect(okRun && boomRun && flakyRuns.length === 2).toBe(true);

        const joined = (run: PlainSpan, producer: typeof single): void => {
          const { traceId, spanId } = producer.spanContext();
          if (link === 'child') {
            expect(run.traceId).toBe(traceId);
            expect(run.parentSpanId).toBe(spanId);
            expect(run.links).toEqual([]);
          } else {
            expect(run.links).toEqual([{ traceId, spanId }]);
            expect(run.traceId).not.toBe(traceId);
            expect(run.parentSpanId).toBeNull();
          }
        };
        joined(okRun!, single);
        joined(boomRun!, batch);
        for (const run of flakyRuns) joined(run, batch);

        expect(okRun!.kind).toBe(SpanKind.CONSUMER);
        expect(okRun!.attributes).toEqual({
          'messaging.system': 'jobs',
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'run',
          'messaging.destination.name': 'orders',
          'messaging.message.id': ok!.id,
          'jobs.job.id': ok!.id,
          'jobs.job.type': 'ok',
          'jobs.job.attempt': 1,
          'jobs.job.outcome': 'completed',
        });
        expect(okRun!.status.code).not.toBe(SpanStatusCode.ERROR);
        // The handler's own span is a child of the run span.
        const work = runSpans.find((s) => s.name === 'handler-work');
        expect(work?.traceId).toBe(okRun!.traceId);
        expect(work?.parentSpanId).toBe(okRun!.spanId);

        expect(boomRun!.attributes['jobs.job.outcome']).toBe('deadletter');
        expect(boomRun!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'boom: bad input' });
        expect(boomRun!.events).toContainEqual(
          expect.objectContaining({
            name: 'exception',
            attributes: expect.objectContaining({
              'exception.type': 'TypeError',
              'exception.message': 'boom: bad input',
            }),
          }),
        );
        expect(
          flakyRuns.map((s) => [
            s.attributes['jobs.job.attempt'],
            s.attributes['jobs.job.outcome'],
          ]),
        ).toEqual([
          [1, 'retried'],
          [2, 'completed'],
        ]);

        const ofType = (type: string, more: Record<string, unknown> = {}) => ({
          'jobs.job.type': type,
          ...more,
        });
        expect(sum(metrics['jobs.started'], {})).toBe(4);
        expect(
          sum(metrics['jobs.started'], ofType('ok', { 'messaging.destination.name': 'orders' })),
        ).toBe(1);
        expect(sum(metrics['jobs.completed'], ofType('ok'))).toBe(1);
        expect(sum(metrics['jobs.completed'], ofType('flaky'))).toBe(1);
        expect(
          sum(metrics['jobs.failed'], ofType('boom', { 'jobs.job.outcome': 'deadletter' })),
        ).toBe(1);
        expect(
          sum(metrics['jobs.failed'], ofType('flaky', { 'jobs.job.outcome': 'retried' })),
        ).toBe(1);
        const durations = metrics['jobs.run.duration'] ?? [];
        expect(durations.reduce((n, p) => n + ((p.value as { count: number }).count ?? 0), 0)).toBe(
          4,
        );
        // Gauges, from queueStats() at collection: the dead-lettered job and the backlog.
        expect(
          sum(metrics['jobs.queue.depth'], {
            'messaging.destination.name': 'default',
            'jobs.job.state': 'deadletter',
          }),
        ).toBe(1);
        expect(
          sum(metrics['jobs.queue.depth'], {
            'messaging.destination.name': 'backlog',
            'jobs.job.state': 'async',
          }),
        ).toBe(1);
        const backlogAge = sum(metrics['jobs.queue.oldest_due.age'], {
          'messaging.destination.name': 'backlog',
        });
        expect(backlogAge).toBeGreaterThanOrEqual(90);
      } finally {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  },
);
