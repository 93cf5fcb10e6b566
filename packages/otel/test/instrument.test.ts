/**
 * `instrument` in one process, on a MemoryJobStore: what it does when there is no trace context,
 * when a propagator's headers do not fit a job's `meta`, when removed; its option checks; the
 * W3C `traceparent` codec; and the queue gauges' read cache.
 */
import { JobEngine, MemoryJobStore } from '@jobs/core';
import {
  type Context,
  context,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatTraceparent, instrument, parseTraceparent, w3cTraceContext } from '../src/index.js';
import { inMemoryTelemetry } from './fixtures/telemetry.js';

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterAll(() => {
  context.disable();
});

const engines: JobEngine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.stop({ timeoutMs: 1_000 })));
});

function setup(
  handlers: ConstructorParameters<typeof JobEngine>[0]['handlers'] = {},
  options: { leaseMs?: number } = {},
) {
  const { spans, tracerProvider } = inMemoryTelemetry();
  const store = new MemoryJobStore();
  const engine = new JobEngine({ store, handlers, ...options });
  engines.push(engine);
  return { spans, tracerProvider, store, engine };
}

/** Resolves once `engine` reported `count` ended runs (completed or failed). */
function runsEnded(engine: JobEngine, count: number): Promise<void> {
  return new Promise((resolve) => {
    let ended = 0;
    const one = (): void => {
      ended += 1;
      if (ended === count) resolve();
    };
    engine.on('completed', one);
    engine.on('failed', one);
  });
}

describe('instrument', () => {
  it('a job enqueued outside any trace runs in a root span with no link; its meta stays as given', async () => {
    const { spans, tracerProvider, engine } = setup({ work: async () => undefined });
    const removed = instrument(engine, {
      tracerProvider,
      meterProvider: inMemoryTelemetry().meterProvider,
    });
    // No tracer: enqueued by a client engine that is not instrumented.
    const client = new JobEngine({ store: engine.store });
    const job = await client.enqueue('work', {}, { meta: { tenant: 'a' } });
    expect(job.meta).toEqual({ tenant: 'a' });
    const ended = runsEnded(engine, 1);
    await engine.start();
    await ended;
    const [run] = spans.getFinishedSpans();
    expect(run?.name).toBe('jobs.run work');
    expect(run?.parentSpanContext).toBeUndefined();
    expect(run?.links).toEqual([]);
    removed();
  });

  it('leaves out propagation headers that would break meta’s limits, and the enqueue succeeds', async () => {
    const { spans, tracerProvider, engine } = setup();
    // A propagator that also writes a value far over the 1 024-character limit (big baggage).
    const bulky: TextMapPropagator = {
      inject(ctx: Context, carrier: unknown, setter: TextMapSetter) {
        w3cTraceContext.inject(ctx, carrier, setter);
        setter.set(carrier, 'baggage', 'x'.repeat(5_000));
      },
      extract: (ctx, carrier, getter) => w3cTraceContext.extract(ctx, carrier, getter),
      fields: () => ['traceparent', 'baggage'],
    };
    instrument(engine, {
      tracerProvider,
      meterProvider: inMemoryTelemetry().meterProvider,
      propagator: bulky,
    });
    const job = await engine.enqueue('work', {}, { meta: { traceparent: 'caller-set' } });
    // The caller's own entry wins; the bulky one is dropped.
    expect(job.meta).toEqual({ traceparent: 'caller-set' });
    const other = await engine.enqueue('work');
    const [, producer] = spans.getFinishedSpans();
    expect(Object.keys(other.meta ?? {})).toEqual(['traceparent']);
    expect(parseTraceparent(other.meta?.traceparent ?? '')?.spanId).toBe(
      producer?.spanContext().spanId,
    );
  });

  it('a run an operator cancels ends its span with outcome cancelled, while the engine runs', async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { spans, tracerProvider, engine } = setup(
      {
        work: async (_job, ctx) => {
          started();
          await new Promise<void>((resolve) =>
            ctx.signal.addEventListener('abort', () => resolve()),
          );
        },
        // The cancel reaches the handler at the next renewal (every leaseMs / 3).
      },
      { leaseMs: 1_500 },
    );
    instrument(engine, { tracerProvider, meterProvider: inMemoryTelemetry().meterProvider });
    const cancelled = new Promise<void>((resolve) => engine.on('cancelled', () => resolve()));
    const job = await engine.enqueue('work');
    await engine.start();
    await running;
    expect(await engine.admin.cancel(job.id)).toBe('requested');
    await cancelled;
    const run = spans.getFinishedSpans().find((span) => span.name === 'jobs.run work');
    expect(run?.attributes['jobs.job.outcome']).toBe('cancelled');
  });

  it('after the returned function is called, nothing is traced or added to meta', async () => {
    const { spans, tracerProvider, engine } = setup();
    const remove = instrument(engine, {
      tracerProvider,
      meterProvider: inMemoryTelemetry().meterProvider,
    });
    remove();
    remove();
    const job = await engine.enqueue('work');
    expect(job.meta).toBeNull();
    expect(spans.getFinishedSpans()).toEqual([]);
  });

  it('rejects unknown options, a bad link mode and a bad cache time, naming @jobs/otel', () => {
    const { engine } = setup();
    expect(() => instrument(engine, { links: 'child' } as never)).toThrow(
      /\[@jobs\/otel\] instrument: unknown option links/,
    );
    expect(() => instrument(engine, { link: 'parent' as never })).toThrow(/link must be/);
    expect(() => instrument(engine, { queueStatsCacheMs: -1 })).toThrow(/queueStatsCacheMs/);
    expect(() => instrument({} as never)).toThrow(/expected a JobEngine/);
  });

  it('the queue gauges read queueStats() once per cache period, however often the meter collects', async () => {
    const { engine, store } = setup();
    let reads = 0;
    const queueStats = store.views.queueStats;
    store.views.queueStats = () => {
      reads += 1;
      return queueStats();
    };
    const { metrics: exporter, reader, meterProvider } = inMemoryTelemetry();
    instrument(engine, { meterProvider, queueStatsCacheMs: 3_600_000 });
    await engine.enqueue('work', {}, { queue: 'mail' });
    await reader.forceFlush();
    await engine.enqueue('work', {}, { queue: 'mail' });
    await reader.forceFlush();
    expect(reads).toBe(1);
    const depth = exporter
      .getMetrics()
      .at(-1)
      ?.scopeMetrics.flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === 'jobs.queue.depth');
    // The cached read: one job, though two are stored now.
    expect(
      depth?.dataPoints.map((p) => [p.attributes['messaging.destination.name'], p.value]),
    ).toEqual([['mail', 1]]);
  });
});

describe('traceparent', () => {
  it('formats and parses a span context', () => {
    const spanContext = {
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: 1,
    };
    const header = formatTraceparent(spanContext);
    expect(header).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    expect(parseTraceparent(header)).toEqual({ ...spanContext, isRemote: true });
  });

  it.each([
    ['an empty string', ''],
    ['version ff', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
    ['an all-zero trace id', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
    ['an all-zero span id', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'],
    ['upper-case hex', '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01'],
    ['version 00 with extra fields', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x'],
  ])('rejects %s', (_, header) => {
    expect(parseTraceparent(header)).toBeNull();
  });

  it('accepts a future version with extra fields', () => {
    expect(
      parseTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-future')?.spanId,
    ).toBe('00f067aa0ba902b7');
  });
});
