export type { WorkerClientConfig } from './auth.js';
export { openApiDocument } from './openapi.js';
export type { Problem, ProblemKind } from './problems.js';
export type {
  TraceParentContext,
  TraceSpan,
  TraceSpanContext,
  TraceStateEntries,
  WorkerApiTracer,
} from './tracing.js';
export {
  createWorkerApi,
  WORKER_API_ROUTES,
  type WorkerApi,
  type WorkerApiOptions,
  type WorkerApiRoute,
} from './worker-api.js';
