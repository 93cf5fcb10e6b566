/**
 * W3C Trace Context (`traceparent`, `tracestate`) for a job's `meta`, as an OpenTelemetry
 * `TextMapPropagator`, so it works without a global propagator registered (a bare
 * `BasicTracerProvider`). Pass `propagation` (the global API) as `instrument`'s `propagator` to
 * use the app's own (baggage, B3…) instead.
 */
import {
  type Context,
  createTraceState,
  isSpanContextValid,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  trace,
} from '@opentelemetry/api';

const TRACEPARENT = 'traceparent';
const TRACESTATE = 'tracestate';
/** version-traceid-parentid-flags; a future version may append fields after a dash. */
const TRACEPARENT_FORMAT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** Reads a `traceparent` value; null when malformed, of the invalid version ff, or all zeros. */
export function parseTraceparent(value: string): SpanContext | null {
  const match = TRACEPARENT_FORMAT.exec(value.trim());
  if (!match) return null;
  const [, version, traceId, spanId, flags, rest] = match as unknown as string[];
  // Version 00 has exactly four fields; ff is forbidden.
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  const context: SpanContext = {
    traceId: traceId as string,
    spanId: spanId as string,
    traceFlags: Number.parseInt(flags as string, 16),
    isRemote: true,
  };
  return isSpanContextValid(context) ? context : null;
}

/** The `traceparent` value of a span context (version 00). */
export function formatTraceparent(context: SpanContext): string {
  const flags = (context.traceFlags & 0xff).toString(16).padStart(2, '0');
  return `00-${context.traceId}-${context.spanId}-${flags}`;
}

/** The W3C trace context propagator `instrument` uses unless given another. */
export const w3cTraceContext: TextMapPropagator = {
  inject(context: Context, carrier: unknown, setter: TextMapSetter): void {
    const spanContext = trace.getSpanContext(context);
    if (!spanContext || !isSpanContextValid(spanContext)) return;
    setter.set(carrier, TRACEPARENT, formatTraceparent(spanContext));
    const state = spanContext.traceState?.serialize();
    if (state) setter.set(carrier, TRACESTATE, state);
  },
  extract(context: Context, carrier: unknown, getter: TextMapGetter): Context {
    const header = getter.get(carrier, TRACEPARENT);
    const value = Array.isArray(header) ? header[0] : header;
    if (typeof value !== 'string') return context;
    const spanContext = parseTraceparent(value);
    if (!spanContext) return context;
    const state = getter.get(carrier, TRACESTATE);
    const stateText = Array.isArray(state) ? state.join(',') : state;
    if (typeof stateText === 'string' && stateText !== '') {
      spanContext.traceState = createTraceState(stateText);
    }
    return trace.setSpanContext(context, spanContext);
  },
  fields: () => [TRACEPARENT, TRACESTATE],
};

/** Reads and writes a job's `meta` (a plain object of strings) as a propagation carrier. */
export const metaCarrier: TextMapGetter<Record<string, string>> &
  TextMapSetter<Record<string, string>> = {
  get: (carrier, key) => carrier[key],
  keys: (carrier) => Object.keys(carrier),
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};
