/**
 * `instrument(engine, options)`: OpenTelemetry traces and metrics for a `JobEngine`, through its
 * hooks (`engine.use`) and events. The enqueuing code's trace context travels in each job's
 * `meta`, written by the same INSERT as the job, so a run in any process, any time later, joins
 * the trace it came from.
 */
import {
  checkMeta,
  type EngineHooks,
  type EnqueueDraft,
  isParked,
  type Job,
  type JobEngine,
  JobsError,
  type WaitCall,
} from '@jobs/core';
import {
  type Attributes,
  type Context,
  context,
  type Link,
  type MeterProvider,
  metrics,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapPropagator,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import { createJobMetrics } from './metrics.js';
import {
  ATTR_JOB_ATTEMPT,
  ATTR_JOB_ID,
  ATTR_JOB_OUTCOME,
  ATTR_JOB_TYPE,
  ATTR_MESSAGING_BATCH_MESSAGE_COUNT,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_SYSTEM,
  ATTR_STEP_NAME,
  ATTR_STEP_REPLAYED,
  ATTR_STEP_TRANSACTION,
  ATTR_WAIT_CHILD_TYPE,
  ATTR_WAIT_KIND,
  ATTR_WAIT_PARKED,
  ATTR_WAIT_SIGNAL,
  MESSAGING_SYSTEM,
  type RunOutcome,
} from './semconv.js';
import { metaCarrier, w3cTraceContext } from './trace-context.js';

/** The instrumentation scope of the tracer and the meter. */
const SCOPE = '@jobs/otel';
const OPTION_KEYS = new Set([
  'tracerProvider',
  'meterProvider',
  'link',
  'propagator',
  'queueStatsCacheMs',
]);

export interface InstrumentOptions {
  /** Where spans go. Default: the global tracer provider (the Node SDK registers one). */
  tracerProvider?: TracerProvider;
  /** Where metrics go. Default: the global meter provider (the Node SDK registers one). */
  meterProvider?: MeterProvider;
  /**
   * How a run's span relates to the `jobs.enqueue` span of the code that enqueued the job.
   * `'link'` (default, as the messaging conventions advise: a job may run much later, or many
   * times): each run starts its own trace, with a span link to the producer span. `'child'`:
   * the run is a child of the producer span, so request and job are one trace.
   */
  link?: 'link' | 'child';
  /**
   * Writes the trace context into a job's `meta` and reads it back. Default: W3C Trace Context
   * (`traceparent`, `tracestate`). `propagation` from `@opentelemetry/api` uses the app's global
   * propagator (e.g. with baggage); headers that would break `meta`'s limits are left out.
   */
  propagator?: TextMapPropagator;
  /** How long one read of `store.views.queueStats()` serves the queue gauges, in ms. Default 5 000. */
  queueStatsCacheMs?: number;
}

/** What `instrument` needs of an engine. */
export type InstrumentableEngine = Pick<JobEngine, 'use' | 'on' | 'store'>;

/** A run whose span is open: from its handler's start until the engine reports its outcome. */
interface OpenRun {
  span: Span;
  startedAt: number;
  /** When the handler returned or threw (`performance.now()`); null while it runs. */
  handlerEndedAt: number | null;
  /** What the handler threw, recorded on the span when the run fails. */
  thrown: unknown;
}

/**
 * Traces and measures `engine`; returns the function that stops it (open spans are ended).
 *
 * Spans: `jobs.enqueue` (producer) around each `enqueue` / `enqueueMany` call, whose context is
 * stored in every job's `meta`; `jobs.run <type>` (consumer) per run, active while the handler
 * runs (its own spans are children), linked to or a child of the producer span (`link`), ended
 * when the outcome is known, with `jobs.job.outcome` and the error of a failed run;
 * `step <name>` (internal) per `ctx.step` call, a child of the run span, active while the
 * step's function runs, with `jobs.step.name`, `jobs.step.transaction`, `jobs.step.replayed`
 * (a step an earlier run completed: a short span, its function not run) and the error it threw;
 * `sleep <name>`, `waitFor <name>` and `run <name>` (internal) per `ctx.sleep`, `ctx.waitFor`
 * and `ctx.run` call, children of the run span like steps, with `jobs.wait.kind`,
 * `jobs.step.name`, `jobs.step.replayed` (an earlier run's checkpoint answered it),
 * `jobs.wait.signal` or `jobs.wait.child_type`, and `jobs.wait.parked` — true when the call
 * parked the job (the span ends with the run, status unset: not an error). Metrics: `jobs.started`, `jobs.completed`, `jobs.failed` (counters by type and queue),
 * `jobs.run.duration` (histogram, s), `jobs.queue.depth` and `jobs.queue.oldest_due.age`
 * (gauges per queue, read from `store.views.queueStats()`).
 *
 * @example
 * import { instrument } from '@jobs/otel';
 * const uninstrument = instrument(engine, { tracerProvider, meterProvider });
 * // …
 * uninstrument();
 */
export function instrument(
  engine: InstrumentableEngine,
  options: InstrumentOptions = {},
): () => void {
  const settings = checkOptions(engine, options);
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE);
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE);
  const jobMetrics = createJobMetrics(meter, engine.store, settings.queueStatsCacheMs);
  const runs = new Map<Job, OpenRun>();

  const removeHooks = engine.use({
    enqueue: (drafts, next) => traceEnqueue(tracer, settings.propagator, drafts, next),
    run: (job, next) => {
      const { parent, links } = producerOf(job, settings);
      const span = tracer.startSpan(
        `jobs.run ${job.type}`,
        { kind: SpanKind.CONSUMER, attributes: runAttributes(job), links },
        parent,
      );
      const run: OpenRun = {
        span,
        startedAt: performance.now(),
        handlerEndedAt: null,
        thrown: null,
      };
      runs.set(job, run);
      return context.with(trace.setSpan(parent, span), next).then(
        (value) => {
          run.handlerEndedAt = performance.now();
          return value;
        },
        (error: unknown) => {
          run.handlerEndedAt = performance.now();
          run.thrown = error;
          throw error;
        },
      );
    },
    step: (job, step, next) => traceStep(tracer, runs.get(job)?.span, job, step, next),
    wait: (job, wait, next) => traceWait(tracer, runs.get(job)?.span, job, wait, next),
  });

  const end = (
    job: Job,
    outcome: RunOutcome,
    error?: { message: string; stack: string | null },
  ) => {
    const run = runs.get(job);
    if (!run) return;
    runs.delete(job);
    const seconds = ((run.handlerEndedAt ?? performance.now()) - run.startedAt) / 1000;
    jobMetrics.ended(job.type, job.queue, outcome, seconds);
    run.span.setAttribute(ATTR_JOB_OUTCOME, outcome);
    if (error) {
      run.span.recordException(
        run.thrown instanceof Error
          ? run.thrown
          : { name: 'Error', message: error.message, stack: error.stack ?? undefined },
      );
      run.span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    } else if (outcome === 'lease-lost') {
      run.span.setStatus({ code: SpanStatusCode.ERROR, message: 'lease lost' });
    }
    run.span.end();
  };
  const listeners = [
    engine.on('started', ({ job }) => jobMetrics.started(job.type, job.queue)),
    engine.on('completed', ({ job }) => end(job, 'completed')),
    engine.on('failed', ({ job, error, willRetry }) =>
      end(job, willRetry ? 'retried' : 'deadletter', error),
    ),
    engine.on('lease-lost', ({ job }) => end(job, 'lease-lost')),
    engine.on('sleeping', ({ job }) => end(job, 'sleeping')),
    engine.on('cancelled', ({ job }) => end(job, 'cancelled')),
    engine.on('released', ({ jobs }) => {
      for (const job of jobs) end(job, 'released');
    }),
  ];

  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    removeHooks();
    for (const off of listeners) off();
    jobMetrics.close();
    for (const run of runs.values()) run.span.end();
    runs.clear();
  };
}

interface Settings {
  link: 'link' | 'child';
  propagator: TextMapPropagator;
  queueStatsCacheMs: number;
}

function checkOptions(engine: InstrumentableEngine, options: InstrumentOptions): Settings {
  const fail = (message: string): never => {
    throw new JobsError('VALIDATION', `[@jobs/otel] instrument: ${message}`);
  };
  if (typeof engine?.use !== 'function' || typeof engine.on !== 'function') {
    fail('expected a JobEngine of @jobs/core (with use() and on())');
  }
  if (typeof options !== 'object' || options === null) fail('options must be an object');
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key))
      fail(`unknown option ${key} (expected one of ${[...OPTION_KEYS].join(', ')})`);
  }
  const link = options.link ?? 'link';
  if (link !== 'link' && link !== 'child') {
    fail(`link must be 'link' or 'child', got ${JSON.stringify(link)}`);
  }
  const queueStatsCacheMs = options.queueStatsCacheMs ?? 5_000;
  if (typeof queueStatsCacheMs !== 'number' || !(queueStatsCacheMs >= 0)) {
    fail(`queueStatsCacheMs must be a number of ms ≥ 0, got ${String(queueStatsCacheMs)}`);
  }
  return { link, propagator: options.propagator ?? w3cTraceContext, queueStatsCacheMs };
}

/** The producer span around one enqueue call; its context goes into every job's `meta`. */
function traceEnqueue(
  tracer: Tracer,
  propagator: TextMapPropagator,
  drafts: readonly EnqueueDraft[],
  next: () => Promise<Job[]>,
): Promise<Job[]> {
  const attributes: Attributes = {
    [ATTR_MESSAGING_SYSTEM]: MESSAGING_SYSTEM,
    [ATTR_MESSAGING_OPERATION_TYPE]: 'send',
    [ATTR_MESSAGING_OPERATION_NAME]: 'enqueue',
  };
  const queues = new Set(drafts.map((d) => d.queue));
  const types = new Set(drafts.map((d) => d.type));
  if (queues.size === 1) attributes[ATTR_MESSAGING_DESTINATION_NAME] = [...queues][0];
  if (types.size === 1) attributes[ATTR_JOB_TYPE] = [...types][0];
  if (drafts.length > 1) attributes[ATTR_MESSAGING_BATCH_MESSAGE_COUNT] = drafts.length;
  const parent = context.active();
  const span = tracer.startSpan('jobs.enqueue', { kind: SpanKind.PRODUCER, attributes }, parent);
  const active = trace.setSpan(parent, span);
  const headers: Record<string, string> = {};
  propagator.inject(active, headers, metaCarrier);
  for (const draft of drafts) addHeaders(draft.meta, headers);
  return context.with(active, next).then(
    (jobs) => {
      const [only] = jobs;
      if (jobs.length === 1 && only) {
        span.setAttributes({ [ATTR_MESSAGING_MESSAGE_ID]: only.id, [ATTR_JOB_ID]: only.id });
      }
      span.end();
      return jobs;
    },
    (error: unknown) => endFailed(span, error),
  );
}

/**
 * Adds the propagation headers to a job's `meta`: the caller's own entries win, and headers
 * that would break `meta`'s limits are left out (`traceparent` alone if it still fits) — the
 * instrumentation never makes an enqueue fail.
 */
function addHeaders(meta: Record<string, string>, headers: Record<string, string>): void {
  const added = Object.entries(headers).filter(([key]) => !Object.hasOwn(meta, key));
  const fits = (entries: [string, string][]): boolean => {
    try {
      checkMeta({ ...meta, ...Object.fromEntries(entries) });
      return true;
    } catch {
      return false;
    }
  };
  const chosen = fits(added) ? added : added.filter(([key]) => key === 'traceparent');
  if (chosen.length > 0 && (chosen === added || fits(chosen)))
    Object.assign(meta, Object.fromEntries(chosen));
}

type StepCall = Parameters<NonNullable<EngineHooks['step']>>[1];

/**
 * The parent of a step's or wait's span: the active span when it belongs to the run's trace (the
 * run span, or a span the handler opened around the call), else the run span.
 */
function stepParent(runSpan: Span | undefined): Context {
  const parent = context.active();
  const active = trace.getSpanContext(parent);
  const run = runSpan?.spanContext();
  return runSpan && run && active?.traceId !== run.traceId
    ? trace.setSpan(parent, runSpan)
    : parent;
}

/**
 * The span of one `ctx.step` call, active while its function runs so the function's own spans
 * are its children. Its parent is the active span when that belongs to the run's trace (the run
 * span, or a span the handler opened around the step), else the run span.
 */
function traceStep(
  tracer: Tracer,
  runSpan: Span | undefined,
  job: Job,
  step: StepCall,
  next: () => Promise<unknown>,
): Promise<unknown> {
  const parent = stepParent(runSpan);
  const span = tracer.startSpan(
    `step ${step.name}`,
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        [ATTR_JOB_ID]: job.id,
        [ATTR_JOB_TYPE]: job.type,
        [ATTR_JOB_ATTEMPT]: job.attempts,
        [ATTR_STEP_NAME]: step.name,
        [ATTR_STEP_TRANSACTION]: step.transaction,
        [ATTR_STEP_REPLAYED]: step.replayed,
      },
    },
    parent,
  );
  return context.with(trace.setSpan(parent, span), next).then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => endFailed(span, error),
  );
}

/**
 * The span of one `ctx.sleep`, `ctx.waitFor` or `ctx.run` call, parented as a step's is. It
 * ends when the call returns in this run, or when it parks the job (`jobs.wait.parked`, not an
 * error: the run ends there and the job waits in the store), or fails.
 */
function traceWait(
  tracer: Tracer,
  runSpan: Span | undefined,
  job: Job,
  wait: WaitCall,
  next: () => Promise<unknown>,
): Promise<unknown> {
  const parent = stepParent(runSpan);
  const attributes: Attributes = {
    [ATTR_JOB_ID]: job.id,
    [ATTR_JOB_TYPE]: job.type,
    [ATTR_JOB_ATTEMPT]: job.attempts,
    [ATTR_WAIT_KIND]: wait.kind,
    [ATTR_STEP_NAME]: wait.name,
    [ATTR_STEP_REPLAYED]: wait.replayed,
  };
  if (wait.signal !== undefined) attributes[ATTR_WAIT_SIGNAL] = wait.signal;
  if (wait.childType !== undefined) attributes[ATTR_WAIT_CHILD_TYPE] = wait.childType;
  const span = tracer.startSpan(
    `${wait.kind} ${wait.name}`,
    { kind: SpanKind.INTERNAL, attributes },
    parent,
  );
  return context.with(trace.setSpan(parent, span), next).then(
    (value) => {
      span.setAttribute(ATTR_WAIT_PARKED, false);
      span.end();
      return value;
    },
    (error: unknown) => {
      if (!isParked(error)) return endFailed(span, error);
      span.setAttribute(ATTR_WAIT_PARKED, true);
      span.end();
      throw error;
    },
  );
}

/** Ends `span` as failed by `error` (the exception recorded, status ERROR), then throws it on. */
function endFailed(span: Span, error: unknown): never {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: error instanceof Error ? error.message : String(error),
  });
  span.end();
  throw error;
}

/** The context a run starts in, and its links, from the trace context in the job's `meta`. */
function producerOf(job: Job, settings: Settings): { parent: Context; links: Link[] } {
  const extracted = job.meta
    ? settings.propagator.extract(ROOT_CONTEXT, job.meta, metaCarrier)
    : ROOT_CONTEXT;
  const producer = trace.getSpanContext(extracted);
  // Never the engine's ambient context: a run belongs to its job, not to whatever was active
  // when the engine started (`deleteSpan` keeps extracted baggage, if any).
  if (settings.link === 'child' || !producer) return { parent: extracted, links: [] };
  return { parent: trace.deleteSpan(extracted), links: [{ context: producer }] };
}

function runAttributes(job: Job): Attributes {
  return {
    [ATTR_MESSAGING_SYSTEM]: MESSAGING_SYSTEM,
    [ATTR_MESSAGING_OPERATION_TYPE]: 'process',
    [ATTR_MESSAGING_OPERATION_NAME]: 'run',
    [ATTR_MESSAGING_DESTINATION_NAME]: job.queue,
    [ATTR_MESSAGING_MESSAGE_ID]: job.id,
    [ATTR_JOB_ID]: job.id,
    [ATTR_JOB_TYPE]: job.type,
    [ATTR_JOB_ATTEMPT]: job.attempts,
  };
}
