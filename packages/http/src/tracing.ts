/**
 * OpenTelemetry for the worker API, with no dependency on OpenTelemetry: a span per request
 * (server kind, a child of the caller's W3C `traceparent` / `tracestate` headers) and a span per
 * remote run (consumer kind, from acquire to settle, linked to or a child of the trace context
 * stored in the job's `meta`, with the attributes `@jobs/otel` gives an engine's runs). The
 * tracer is any OpenTelemetry `Tracer`; the types here are the part of it this file uses, and a
 * parent context is built the way `@opentelemetry/api` builds one (its span key is a
 * `Symbol.for`, shared by every copy of the API on purpose).
 */
import type { Job, JobError } from '@jobs/core';

/** A span's identity (OpenTelemetry's `SpanContext`). */
export interface TraceSpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: TraceStateEntries;
}

/** The vendor entries of a `tracestate` header (OpenTelemetry's `TraceState`). */
export interface TraceStateEntries {
  get(key: string): string | undefined;
  set(key: string, value: string): TraceStateEntries;
  unset(key: string): TraceStateEntries;
  serialize(): string;
}

/** What a span's parent is read from (OpenTelemetry's `Context`). */
export interface TraceParentContext {
  getValue(key: symbol): unknown;
  setValue(key: symbol, value: unknown): TraceParentContext;
  deleteValue(key: symbol): TraceParentContext;
}

/** The part of an OpenTelemetry `Span` the API uses. */
export interface TraceSpan {
  setAttribute(key: string, value: string | number | boolean): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: { name: string; message: string; stack?: string }): unknown;
  end(endTime?: number | Date): void;
}

/**
 * The part of an OpenTelemetry `Tracer` the API uses: pass
 * `trace.getTracer('@jobs/http')` (or a tracer provider's `getTracer`).
 */
export interface WorkerApiTracer {
  startSpan(
    name: string,
    options?: {
      kind?: number;
      attributes?: Record<string, string | number | boolean>;
      links?: { context: TraceSpanContext }[];
      startTime?: number | Date;
    },
    context?: TraceParentContext,
  ): TraceSpan;
}

/** How a remote run ended, as `jobs.job.outcome` (the engine's outcomes, plus `cancelled`). */
export type RemoteRunOutcome =
  | 'completed'
  | 'retried'
  | 'deadletter'
  | 'released'
  | 'lease-lost'
  | 'cancelled';

/** The request being traced, as the API reads it. */
export interface TracedRequest {
  method: string;
  path: string;
  header(name: string): string | null;
}

export interface WorkerApiTracing {
  /** Starts the span of a request (`route`: its OpenAPI path, when it has one). */
  requestStarted(request: TracedRequest, route: string | null): { end(status: number): void };
  /** Records a remote run of `job`, from its start at acquire until `endMs` (epoch ms). */
  runEnded(job: Job, outcome: RemoteRunOutcome, endMs: number, error?: JobError): void;
}

// OpenTelemetry's SpanKind and SpanStatusCode values.
const SERVER = 1;
const CONSUMER = 4;
const STATUS_ERROR = 2;
/** `@opentelemetry/api`'s key of the active span in a context. */
const SPAN_KEY = Symbol.for('OpenTelemetry Context Key SPAN');
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** version-traceid-parentid-flags; a future version may append fields after a dash. */
const TRACEPARENT_FORMAT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The span context of a `traceparent` (with its `tracestate`), or null when it is absent,
 * malformed, of the forbidden version ff, or all zeros — a caller's bad header starts a new trace.
 */
export function parseTraceContext(
  traceparent: string | null | undefined,
  tracestate: string | null | undefined,
): TraceSpanContext | null {
  const match = TRACEPARENT_FORMAT.exec(traceparent?.trim() ?? '');
  if (!match) return null;
  const [, version, traceId, spanId, flags, rest] = match as unknown as string[];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (/^0+$/.test(traceId as string) || /^0+$/.test(spanId as string)) return null;
  const context: TraceSpanContext = {
    traceId: traceId as string,
    spanId: spanId as string,
    traceFlags: Number.parseInt(flags as string, 16),
    isRemote: true,
  };
  if (tracestate) context.traceState = TraceState.parse(tracestate);
  return context;
}

/** Entries of a `tracestate` header: `key=value`, comma-separated, at most 32 (W3C). */
class TraceState implements TraceStateEntries {
  private constructor(private readonly entries: readonly (readonly [string, string])[]) {}

  static parse(header: string): TraceState {
    const entries: [string, string][] = [];
    for (const member of header.split(',')) {
      const at = member.indexOf('=');
      if (at > 0) entries.push([member.slice(0, at).trim(), member.slice(at + 1).trim()]);
    }
    return new TraceState(entries.slice(0, 32));
  }

  get(key: string): string | undefined {
    return this.entries.find(([k]) => k === key)?.[1];
  }

  set(key: string, value: string): TraceState {
    return new TraceState([[key, value], ...this.entries.filter(([k]) => k !== key)]);
  }

  unset(key: string): TraceState {
    return new TraceState(this.entries.filter(([k]) => k !== key));
  }

  serialize(): string {
    return this.entries.map(([k, v]) => `${k}=${v}`).join(',');
  }
}

/** An immutable context: the values `@opentelemetry/api` and SDKs look up by their keys. */
class ParentContext implements TraceParentContext {
  static readonly root = new ParentContext(new Map());

  private constructor(private readonly values: ReadonlyMap<symbol, unknown>) {}

  getValue(key: symbol): unknown {
    return this.values.get(key);
  }

  setValue(key: symbol, value: unknown): ParentContext {
    return new ParentContext(new Map(this.values).set(key, value));
  }

  deleteValue(key: symbol): ParentContext {
    const values = new Map(this.values);
    values.delete(key);
    return new ParentContext(values);
  }
}

/** A context whose span is the remote `parent` (the API's non-recording span), or the root. */
function contextOf(parent: TraceSpanContext | null): TraceParentContext {
  if (parent === null) return ParentContext.root;
  return ParentContext.root.setValue(SPAN_KEY, {
    spanContext: () => parent,
    isRecording: () => false,
  });
}

/** `@jobs/otel`'s attributes of a run (`messaging.*`, `jobs.job.*`). */
function runAttributes(job: Job, outcome: RemoteRunOutcome): Record<string, string | number> {
  return {
    'messaging.system': 'jobs',
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'run',
    'messaging.destination.name': job.queue,
    'messaging.message.id': job.id,
    'jobs.job.id': job.id,
    'jobs.job.type': job.type,
    'jobs.job.attempt': job.attempts,
    'jobs.job.outcome': outcome,
  };
}

/**
 * The API's spans through `tracer`. `link`, as `@jobs/otel`'s: `'link'` starts each run's own
 * trace with a link to the job's stored context, `'child'` makes the run its child.
 */
export function createTracing(tracer: WorkerApiTracer, link: 'link' | 'child'): WorkerApiTracing {
  return {
    requestStarted(request, route) {
      const method = request.method.toUpperCase();
      const known = METHODS.has(method) ? method : '_OTHER';
      const parent = parseTraceContext(request.header('traceparent'), request.header('tracestate'));
      const span = tracer.startSpan(
        route === null ? known : `${known} ${route}`,
        {
          kind: SERVER,
          attributes: {
            'http.request.method': known,
            'url.path': request.path,
            ...(route === null ? {} : { 'http.route': route }),
          },
        },
        contextOf(parent),
      );
      return {
        end(status) {
          span.setAttribute('http.response.status_code', status);
          if (status >= 500) span.setStatus({ code: STATUS_ERROR });
          span.end();
        },
      };
    },

    runEnded(job, outcome, endMs, error) {
      const producer = parseTraceContext(job.meta?.traceparent, job.meta?.tracestate);
      const child = link === 'child' && producer !== null;
      const span = tracer.startSpan(
        `jobs.run ${job.type}`,
        {
          kind: CONSUMER,
          attributes: runAttributes(job, outcome),
          links: producer !== null && !child ? [{ context: producer }] : [],
          startTime: job.startedAt ?? endMs,
        },
        contextOf(child ? producer : null),
      );
      if (error) {
        span.recordException({
          name: 'Error',
          message: error.message,
          ...(error.stack ? { stack: error.stack } : {}),
        });
        span.setStatus({ code: STATUS_ERROR, message: error.message });
      } else if (outcome === 'lease-lost') {
        span.setStatus({ code: STATUS_ERROR, message: 'lease lost' });
      }
      span.end(endMs);
    },
  };
}
