/**
 * `@jobs/otel`: OpenTelemetry traces and metrics for a `@jobs/core` engine.
 *
 * @example
 * import { instrument } from '@jobs/otel';
 * instrument(engine, { tracerProvider, meterProvider });
 */
export { type InstrumentableEngine, type InstrumentOptions, instrument } from './instrument.js';
export type { RunOutcome } from './semconv.js';
export * from './semconv.js';
export { formatTraceparent, parseTraceparent, w3cTraceContext } from './trace-context.js';
