export * from './clock.js';
export * from './engine/admin.js';
export type { ChildRunOptions } from './engine/children.js';
export * from './engine/engine.js';
export {
  FLOW_TYPE,
  type FlowNodeEnd,
  type FlowNodeOptions,
  MAX_FLOW_NODE_NAME_CHARS,
  MAX_FLOW_NODES,
} from './engine/flow-model.js';
export type { FlowSummary } from './engine/flow-run.js';
export type { FlowNodeState, FlowNodeView, FlowStatus, FlowView } from './engine/flow-view.js';
export type { BatchItem, FlowDefinition, FlowNode } from './engine/flows.js';
export type { EngineHealth } from './engine/health.js';
export * from './engine/run-worker.js';
// The logger's streak helper lives with the engine runtime, its one user.
export { ErrorStreaks } from './engine/runtime.js';
// For settlers outside the engine (`@jobs/http`'s remote workers): a child job's outcome reaches
// its parent through the same signals as the engine's own settles send.
export {
  childCancelled,
  completedPayload,
  parentOf,
  sendChildOutcome,
  wakeParentsIfDone,
} from './engine/settlement.js';
export { MAX_STEP_NAME_CHARS, type StepOptions } from './engine/steps.js';
export * from './engine/types.js';
// Explicit: the other checks in validate.ts are the engine's, not public API.
export { checkMeta, MAX_META_ENTRIES, MAX_META_VALUE, MAX_SCOPE_LIMIT } from './engine/validate.js';
export { isParked } from './engine/waits.js';
export * from './errors.js';
export * from './logger.js';
export * from './memory-store.js';
export * from './rate-window.js';
// Explicit: MAX_RETRIES is the option checks', not public API. The retry rule is in rules.ts.
export { DEFAULT_RETRIES, DEFAULT_RETRY_POLICY, parseRetryPolicy, retryDelayMs } from './retry.js';
// Explicit: the payload checks in rules.ts are the engine's, not public API.
export {
  type AfterFailure,
  afterFailure,
  afterLeaseExpiry,
  assertIdentifier,
  assertKnownOptions,
  assertPositiveInteger,
  compareAcquisitionOrder,
  decideRetry,
  dueTime,
  type FailedAttempt,
  HISTORY_PRUNE_BATCH,
  HISTORY_RESULT_MAX_BYTES,
  type HistoryResultMarker,
  historyCursor,
  historyResultJson,
  initialState,
  isJobId,
  keepsOutcome,
  LEASE_EXPIRED_MESSAGE,
  type LeaseExpiry,
  type LeaseStartRule,
  leaseStarts,
  limitedScopeOf,
  payloadJson,
  type RetryDecision,
  readHistoryCursor,
  readLogs,
  readSteps,
  refOf,
  rememberPayloadText,
  StoreSubscribers,
  stepsJson,
  takeCheckedPayload,
  toHistoryRecord,
  type WrittenJobFacts,
  writtenJob,
} from './rules.js';
export * from './schedule/index.js';
export * from './schedule/iso8601.js';
export * from './store.js';
