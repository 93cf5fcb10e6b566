/**
 * A span per `ctx.step` on the SQLite store: a child of the run span with the step's attributes,
 * active while the function runs (its own spans nest in it), the error of a step that throws,
 * and — on the retry — short `replayed` spans for the steps the first attempt completed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import { context, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Database } from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instrument } from '../src/index.js';
import { inMemoryTelemetry } from './fixtures/telemetry.js';

let dir = '';
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  // A file, not `:memory:`: a transaction step needs a second connection to the database.
  dir = mkdtempSync(join(tmpdir(), 'jobs-otel-steps-'));
});
afterAll(() => {
  context.disable();
  rmSync(dir, { recursive: true, force: true });
});

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

describe('step spans', () => {
  it('each ctx.step is a child span of its run; a retry shows the completed steps as replayed, not run', async () => {
    const { spans, tracerProvider, meterProvider } = inMemoryTelemetry();
    const store = new SqliteJobStore({ filename: join(dir, 'retry.db') });
    await store.migrate();
    const ran: string[] = [];
    let attempt = 0;
    const engine = new JobEngine({
      store,
      logger: quiet,
      pollIntervalMs: 25,
      handlers: {
        order: async (_job, ctx) => {
          attempt += 1;
          const charge = await ctx.step('charge', () => {
            ran.push('charge');
            tracerProvider.getTracer('app').startSpan('psp call').end();
            return { chargeId: 'ch_1' };
          });
          await ctx.step(
            'reserve',
            async (tx: Database) => {
              ran.push('reserve');
              return tx.prepare('select 1 as one').get();
            },
            { transaction: true },
          );
          await ctx.step('ship', () => {
            ran.push('ship');
            if (attempt === 1) throw new Error('carrier down');
            return 'shipped';
          });
          return charge;
        },
      },
    });
    const removed = instrument(engine, { tracerProvider, meterProvider });
    const ended = new Promise<void>((resolve, reject) => {
      engine.on('completed', () => resolve());
      engine.on('failed', ({ error, willRetry }) => {
        if (!willRetry) reject(new Error(`the job failed for good: ${error.message}`));
      });
    });
    await engine.start();
    const job = await engine.enqueue(
      'order',
      {},
      { retries: 1, retry: { kind: 'fixed', delayMs: 0 } },
    );
    await ended;
    await engine.stop();
    await store.close();
    removed();

    // Steps run once each, but the one that threw, which ran again.
    expect(ran).toEqual(['charge', 'reserve', 'ship', 'ship']);
    const finished = spans.getFinishedSpans();
    const runs = finished.filter((s) => s.name === 'jobs.run order');
    expect(runs.map((s) => s.attributes['jobs.job.attempt'])).toEqual([1, 2]);
    const [first, second] = runs as [ReadableSpan, ReadableSpan];
    const stepsOf = (run: ReadableSpan) =>
      finished.filter(
        (s) => s.name.startsWith('step ') && parentOf(s) === run.spanContext().spanId,
      );

    const attempt1 = stepsOf(first);
    expect(attempt1.map((s) => s.name)).toEqual(['step charge', 'step reserve', 'step ship']);
    for (const span of attempt1) {
      expect(span.kind).toBe(SpanKind.INTERNAL);
      expect(span.spanContext().traceId).toBe(first.spanContext().traceId);
      expect(span.attributes['jobs.job.id']).toBe(job.id);
      expect(span.attributes['jobs.job.type']).toBe('order');
      expect(span.attributes['jobs.step.replayed']).toBe(false);
    }
    const [charge, reserve, ship] = attempt1 as [ReadableSpan, ReadableSpan, ReadableSpan];
    expect(charge.attributes).toMatchObject({
      'jobs.step.name': 'charge',
      'jobs.step.transaction': false,
    });
    expect(charge.status.code).toBe(SpanStatusCode.UNSET);
    expect(reserve.attributes['jobs.step.transaction']).toBe(true);
    expect(ship.status).toEqual({ code: SpanStatusCode.ERROR, message: 'carrier down' });
    expect(ship.events.map((e) => e.name)).toEqual(['exception']);
    // The function's own spans are children of the step span.
    const call = finished.find((s) => s.name === 'psp call');
    expect(call && parentOf(call)).toBe(charge.spanContext().spanId);

    const attempt2 = stepsOf(second);
    expect(attempt2.map((s) => [s.name, s.attributes['jobs.step.replayed']])).toEqual([
      ['step charge', true],
      ['step reserve', true],
      ['step ship', false],
    ]);
    expect(attempt2.map((s) => s.status.code)).toEqual([
      SpanStatusCode.UNSET,
      SpanStatusCode.UNSET,
      SpanStatusCode.UNSET,
    ]);
    // Only attempt 1 ran the charge: one `psp call` in all.
    expect(finished.filter((s) => s.name === 'psp call')).toHaveLength(1);
  });

  it('a step inside a span the handler opened nests in that span; removing the instrumentation stops step spans', async () => {
    const { spans, tracerProvider, meterProvider } = inMemoryTelemetry();
    const store = new SqliteJobStore({ filename: join(dir, 'nested.db') });
    await store.migrate();
    const engine = new JobEngine({
      store,
      logger: quiet,
      pollIntervalMs: 25,
      handlers: {
        work: (_job, ctx) =>
          tracerProvider.getTracer('app').startActiveSpan('batch', async (span) => {
            await ctx.step('a', () => 1);
            span.end();
          }),
      },
    });
    const removed = instrument(engine, { tracerProvider, meterProvider });
    let completed = 0;
    let next: () => void = () => undefined;
    engine.on('completed', () => {
      completed += 1;
      next();
    });
    const done = () => new Promise<void>((resolve) => (next = resolve));
    await engine.start();
    let ended = done();
    await engine.enqueue('work', {});
    await ended;
    const batch = spans.getFinishedSpans().find((s) => s.name === 'batch');
    const step = spans.getFinishedSpans().find((s) => s.name === 'step a');
    expect(step && parentOf(step)).toBe(batch?.spanContext().spanId);

    removed();
    spans.reset();
    ended = done();
    await engine.enqueue('work', {});
    await ended;
    expect(completed).toBe(2);
    // The app's own span is still made; the engine's spans no longer.
    expect(spans.getFinishedSpans().map((s) => s.name)).toEqual(['batch']);
    await engine.stop();
    await store.close();
  });
});
