/**
 * A span per `ctx.sleep`, `ctx.waitFor` and `ctx.run` on the SQLite store: a child of its run's
 * span like a step's, named `<kind> <name>`, with the call's attributes; a call that parks the
 * job ends its span with `jobs.wait.parked = true` and no error, and on the runs after it the
 * calls an earlier run answered are `replayed`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import { context, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instrument } from '../src/index.js';
import { inMemoryTelemetry } from './fixtures/telemetry.js';

let dir = '';
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  dir = mkdtempSync(join(tmpdir(), 'jobs-otel-waits-'));
});
afterAll(() => {
  context.disable();
  rmSync(dir, { recursive: true, force: true });
});

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const startMs = (span: ReadableSpan) => span.startTime[0] * 1e3 + span.startTime[1] / 1e6;

describe('wait spans', () => {
  it('ctx.sleep, ctx.waitFor and ctx.run are child spans of their run; a park ends its span as parked, not failed', async () => {
    const { spans, tracerProvider, meterProvider } = inMemoryTelemetry();
    const store = new SqliteJobStore({ filename: join(dir, 'waits.db') });
    await store.migrate();
    const engine = new JobEngine({
      store,
      logger: quiet,
      pollIntervalMs: 25,
      handlers: {
        order: async (job, ctx) => {
          await ctx.sleep('nap', 20);
          const approval = await ctx.waitFor('approval', { key: job.id, timeoutMs: 60_000 });
          const label = await ctx.run('label', 'label', {});
          return { approval, label };
        },
        label: async () => 'L-1',
      },
    });
    const removed = instrument(engine, { tracerProvider, meterProvider });
    let parent = '';
    const completed = new Promise<unknown>((resolve) =>
      engine.on('completed', ({ job }) => {
        if (job.id === parent) resolve(job.id);
      }),
    );
    const waiting = new Promise<void>((resolve) =>
      engine.on('sleeping', ({ name }) => {
        if (name === 'approval') resolve();
      }),
    );
    await engine.start();
    parent = (await engine.enqueue('order', {})).id;
    await waiting;
    await engine.signal('approval', { key: parent, payload: { ok: true } });
    await completed;
    await engine.stop();
    await store.close();
    removed();

    const finished = spans.getFinishedSpans();
    const runs = finished
      .filter((s) => s.name === 'jobs.run order')
      .sort((a, b) => startMs(a) - startMs(b));
    expect(runs).toHaveLength(4);
    const waitsOf = (run: ReadableSpan) =>
      finished
        .filter(
          (s) =>
            /^(sleep|waitFor|run) /.test(s.name) &&
            s.parentSpanContext?.spanId === run.spanContext().spanId,
        )
        .sort((a, b) => startMs(a) - startMs(b))
        .map((s) => [s.name, s.attributes['jobs.step.replayed'], s.attributes['jobs.wait.parked']]);
    expect(runs.map(waitsOf)).toEqual([
      // Run 1 sleeps; run 2 finds the sleep over and waits for the signal; run 3 takes it and
      // parks for the child; run 4 reads the child's result.
      [['sleep nap', false, true]],
      [
        ['sleep nap', true, false],
        ['waitFor approval', false, true],
      ],
      [
        ['sleep nap', true, false],
        ['waitFor approval', false, false],
        ['run label', false, true],
      ],
      [
        ['sleep nap', true, false],
        ['waitFor approval', true, false],
        ['run label', false, false],
      ],
    ]);
    const calls = finished.filter((s) => /^(sleep|waitFor|run) /.test(s.name));
    for (const span of calls) {
      expect(span.kind).toBe(SpanKind.INTERNAL);
      expect(span.status.code).toBe(SpanStatusCode.UNSET);
      expect(span.attributes['jobs.job.id']).toBe(parent);
      expect(span.attributes['jobs.job.type']).toBe('order');
    }
    const kinds = new Map(calls.map((s) => [s.name, s.attributes]));
    expect(kinds.get('sleep nap')).toMatchObject({
      'jobs.wait.kind': 'sleep',
      'jobs.step.name': 'nap',
    });
    expect(kinds.get('waitFor approval')).toMatchObject({
      'jobs.wait.kind': 'waitFor',
      'jobs.wait.signal': 'approval',
    });
    expect(kinds.get('run label')).toMatchObject({
      'jobs.wait.kind': 'run',
      'jobs.wait.child_type': 'label',
    });
  });

  it('a ctx.run whose child failed ends its span with the ChildJobError', async () => {
    const { spans, tracerProvider, meterProvider } = inMemoryTelemetry();
    const store = new SqliteJobStore({ filename: join(dir, 'child-failed.db') });
    await store.migrate();
    const engine = new JobEngine({
      store,
      logger: quiet,
      pollIntervalMs: 25,
      handlers: {
        order: async (_job, ctx) => {
          try {
            await ctx.run('label', 'label', {}, { retries: 0 });
          } catch (error) {
            if (error instanceof Error && error.name === 'ChildJobError') return 'no label';
            throw error;
          }
        },
        label: async () => {
          throw new Error('printer on fire');
        },
      },
    });
    const removed = instrument(engine, { tracerProvider, meterProvider });
    let parent = '';
    const completed = new Promise<void>((resolve) =>
      engine.on('completed', ({ job }) => {
        if (job.id === parent) resolve();
      }),
    );
    await engine.start();
    parent = (await engine.enqueue('order', {})).id;
    await completed;
    await engine.stop();
    await store.close();
    removed();
    const labels = spans
      .getFinishedSpans()
      .filter((s) => s.name === 'run label')
      .sort((a, b) => startMs(a) - startMs(b));
    expect(labels.map((s) => [s.attributes['jobs.wait.parked'], s.status.code])).toEqual([
      [true, SpanStatusCode.UNSET],
      [undefined, SpanStatusCode.ERROR],
    ]);
  });
});
