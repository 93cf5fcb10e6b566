/**
 * Traces printed to the console: a tracer provider whose spans go, one by one, to
 * `ConsoleSpanExporter`. In production swap the exporter for OTLP (or use the Node SDK) — the
 * engine's instrumentation does not change.
 */
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

// Without a context manager there is no "active span": `jobs.enqueue` could not join the
// request's trace, nor a handler's own spans the run's.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

export const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())],
});
