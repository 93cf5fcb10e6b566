/**
 * Engine options: checks what `new JobEngine(options)` was given, fills in the defaults and
 * resolves each handler with its own retry settings. Bad input throws before anything runs.
 */

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { type Clock, StoreSyncedClock } from '../clock.js';
import { JobsError, ValidationError } from '../errors.js';
import { consoleLogger } from '../logger.js';
import { DEFAULT_RETRIES, DEFAULT_RETRY_POLICY, MAX_RETRIES, parseRetryPolicy } from '../retry.js';
import { durationToMs, parseDuration } from '../schedule/iso8601.js';
import type { HistoryKeep, HistorySettings, JobStore, RetryPolicy } from '../store.js';
import { FLOW_TYPE } from './flow-model.js';
import { runFlow } from './flow-run.js';
import type {
  BatchHandler,
  BatchHandlerDefinition,
  BatchOptions,
  EngineOptions,
  HandlerDefinition,
  HistoryOptions,
  JobHandler,
  Logger,
} from './types.js';
import {
  assertInteger,
  assertKnownKeys,
  assertStoreCanLimit,
  assertText,
  describe,
  MAX_PAYLOAD_LIMIT_BYTES,
  MAX_SCOPE_LIMIT,
  MAX_TIMEOUT_MS,
  type ResolvedRateLimit,
  resolveRateLimit,
} from './validate.js';

const ENGINE_OPTION_KEYS = new Set([
  'store',
  'handlers',
  'concurrency',
  'prefetch',
  'maxPrefetch',
  'leaseMs',
  'pollIntervalMs',
  'queues',
  'tenants',
  'retry',
  'retries',
  'maxPayloadBytes',
  'owner',
  'clock',
  'logger',
  'history',
  'signalRetention',
  'childRecheckMs',
]);

/** Failed attempts a flow job (`$flow`) is allowed: it fails only when the store does. */
const FLOW_RETRIES = 20;

/** How often a parent parked for its children looks at them, by default (`childRecheckMs`). */
export const DEFAULT_CHILD_RECHECK_MS = 60_000;

/** The history kept unless the engine is told otherwise: everything, for a week. */
export const DEFAULT_HISTORY: Readonly<HistorySettings> = {
  keep: 'all',
  retentionMs: 7 * 24 * 3_600_000,
};
/** How long a signal nobody took is kept, unless the engine is told otherwise: a week. */
export const DEFAULT_SIGNAL_RETENTION_MS = 7 * 24 * 3_600_000;
const MIN_RETENTION_MS = 60_000;
const MAX_RETENTION_MS = 3650 * 24 * 3_600_000;
const HISTORY_KEEPS: readonly HistoryKeep[] = ['all', 'failed', 'none'];

/**
 * Largest batch the default adaptive prefetch grows to (`concurrency + maxPrefetch`), unless the
 * store asks for another (`StoreCapabilities.batchLimit`).
 */
export const DEFAULT_BATCH_LIMIT = 1_000;

/**
 * The adaptive prefetch holds no more jobs than start within this many ms at the handlers'
 * average run time (`concurrency × PREFETCH_HORIZON_MS / runMs`).
 */
export const PREFETCH_HORIZON_MS = 500;

/** How long a batch waits to fill unless its handler says (`BatchOptions.waitMs`). */
export const DEFAULT_BATCH_WAIT_MS = 20;
/** The largest `BatchOptions.size`. */
export const MAX_BATCH_SIZE = 1_000;
/** The longest `BatchOptions.waitMs`. */
export const MAX_BATCH_WAIT_MS = 60_000;

/** Fastest idle poll for stores without notifications; doubles while idle up to `pollIntervalMs`. */
export const MIN_POLL_MS = 25;

/** The fallback poll of an engine whose store notifies, unless the store asks for another. */
const DEFAULT_NOTIFIED_POLL_MS = 5_000;

export interface ResolvedHandler {
  handler: JobHandler;
  policy: RetryPolicy | null;
  retries: number | undefined;
  /** Default scope limit of the type's scoped jobs (`HandlerDefinition.scopeLimit`). */
  scopeLimit?: number;
  /** The type's rate limit (`HandlerDefinition.rateLimit`). */
  rateLimit?: ResolvedRateLimit;
  /** The type's time limit of a run (`HandlerDefinition.timeoutMs`). */
  timeoutMs?: number;
  /**
   * Set for a batch handler (`BatchHandlerDefinition`): its jobs are run in batches by
   * `dispatch.ts`, and `handler` is never called.
   */
  batch?: ResolvedBatch;
}

/** A batch handler with its checked `BatchOptions`. */
export interface ResolvedBatch {
  handler: BatchHandler;
  size: number;
  waitMs: number;
}

/** Engine options after validation, with every default filled in. */
export interface ResolvedEngineOptions {
  store: JobStore;
  handlers: ReadonlyMap<string, ResolvedHandler>;
  /** The job types this engine runs (the keys of `handlers`). */
  types: string[];
  concurrency: number;
  /** Prefetch at start; it adapts between `minPrefetch` and `maxPrefetch` (equal when fixed). */
  prefetch: number;
  minPrefetch: number;
  maxPrefetch: number;
  leaseMs: number;
  pollIntervalMs: number;
  queues: string[] | null;
  tenants: string[] | null;
  retryPolicy: RetryPolicy;
  retries: number;
  maxPayloadBytes: number;
  owner: string;
  logger: Logger;
  clock: Clock;
  /** The default clock, kept in sync with the store; null when the caller gave a clock. */
  syncedClock: StoreSyncedClock | null;
  /** What the store's history keeps (`EngineOptions.history`). */
  history: HistorySettings;
  /** The caller gave `history` (a store without history then gets a warning). */
  historyGiven: boolean;
  /** Signals nobody took are deleted after this many ms (`EngineOptions.signalRetention`). */
  signalRetentionMs: number;
  /** A parent parked for its children looks at them again after this many ms at most. */
  childRecheckMs: number;
}

export function resolveEngineOptions(options: EngineOptions): ResolvedEngineOptions {
  if (options === null || typeof options !== 'object') {
    throw new JobsError('VALIDATION', '[@jobs/core] JobEngine: options must be an object');
  }
  assertKnownKeys(options, ENGINE_OPTION_KEYS, 'JobEngine');
  if (!options.store || typeof options.store.acquire !== 'function') {
    throw new JobsError('VALIDATION', '[@jobs/core] JobEngine: options.store must be a JobStore');
  }
  const store = options.store;
  const concurrency = assertInteger(options.concurrency ?? 10, 'concurrency', 1, 10_000);
  const fixedPrefetch =
    options.prefetch === undefined ? null : assertInteger(options.prefetch, 'prefetch', 0, 100_000);
  const batchLimit = assertInteger(
    store.capabilities.batchLimit ?? DEFAULT_BATCH_LIMIT,
    `capabilities.batchLimit of the ${store.name} store`,
    1,
    100_000,
  );
  const maxPrefetch =
    fixedPrefetch ??
    assertInteger(
      options.maxPrefetch ?? Math.max(concurrency, batchLimit - concurrency),
      'maxPrefetch',
      0,
      100_000,
    );
  if (fixedPrefetch !== null && options.maxPrefetch !== undefined) {
    throw new JobsError(
      'VALIDATION',
      '[@jobs/core] JobEngine: give prefetch (fixed) or maxPrefetch (adaptive), not both',
    );
  }
  const prefetch = fixedPrefetch ?? Math.min(concurrency, maxPrefetch);
  const leaseMs = assertInteger(options.leaseMs ?? 30_000, 'leaseMs', 30, 24 * 3600_000);
  const notifies = store.capabilities.notifications && typeof store.subscribe === 'function';
  const pollIntervalMs = assertInteger(
    options.pollIntervalMs ?? (notifies ? storePollMs(store) : 1_000),
    'pollIntervalMs',
    MIN_POLL_MS,
    3600_000,
  );
  const queues = nameList(options.queues, 'queues');
  const tenants = nameList(options.tenants, 'tenants');
  const retryPolicy = options.retry
    ? parseRetryPolicy(options.retry, 'retry').policy
    : DEFAULT_RETRY_POLICY;
  const retries = assertInteger(options.retries ?? DEFAULT_RETRIES, 'retries', 0, MAX_RETRIES);
  const maxPayloadBytes = assertInteger(
    options.maxPayloadBytes ?? 1024 * 1024,
    'maxPayloadBytes',
    1,
    MAX_PAYLOAD_LIMIT_BYTES,
  );
  const owner =
    options.owner === undefined
      ? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
      : assertText(options.owner, 'owner', 200);
  const logger = options.logger ?? consoleLogger('info');
  const syncedClock = options.clock ? null : new StoreSyncedClock(() => store.now());
  const clock = options.clock ?? (syncedClock as StoreSyncedClock);

  const handlers = new Map<string, ResolvedHandler>();
  for (const [type, given] of Object.entries(options.handlers ?? {})) {
    // An `undefined` handler is refused by resolveHandler, with the type's name.
    const definition = given as JobHandler | HandlerDefinition | BatchHandlerDefinition;
    // A handler's name is the job type it runs, checked as enqueue checks a type: a name no
    // store can hold (NUL stops every acquisition on PostgreSQL) fails here, not in the loop.
    assertText(type, 'handlers');
    const resolved = resolveHandler(type, definition);
    assertStoreCanLimit(store, { scopeLimit: resolved.scopeLimit ?? null }, `handlers.${type}`);
    if (typeof definition === 'object' && definition?.rateLimit !== undefined) {
      resolved.rateLimit = resolveRateLimit(
        definition.rateLimit,
        `handlers.${type}.rateLimit`,
        store,
      );
    }
    if (resolved.batch && resolved.batch.size > concurrency) {
      logger.warn(
        `handlers.${type}.batch.size is ${resolved.batch.size}, over concurrency ${concurrency}: each job of a batch takes a slot, so batches hold at most ${concurrency} jobs`,
        { type },
      );
    }
    handlers.set(type, resolved);
  }
  // Every engine that runs jobs on a store that can keep workflows waiting runs flow jobs too
  // (`engine.flow`): a flow moves on wherever an engine is.
  if (handlers.size > 0 && store.steps && store.waits && !handlers.has(FLOW_TYPE)) {
    handlers.set(
      FLOW_TYPE,
      resolveHandler(FLOW_TYPE, { handler: runFlow as JobHandler, retries: FLOW_RETRIES }),
    );
  }
  return {
    store,
    handlers,
    types: [...handlers.keys()],
    concurrency,
    prefetch,
    minPrefetch: fixedPrefetch ?? Math.min(concurrency, maxPrefetch),
    maxPrefetch,
    leaseMs,
    pollIntervalMs,
    queues,
    tenants,
    retryPolicy,
    retries,
    maxPayloadBytes,
    owner,
    logger,
    clock,
    syncedClock,
    history: resolveHistory(options.history),
    signalRetentionMs: resolveSignalRetention(options.signalRetention),
    historyGiven: options.history !== undefined,
    childRecheckMs: assertInteger(
      options.childRecheckMs ?? DEFAULT_CHILD_RECHECK_MS,
      'childRecheckMs',
      10,
      24 * 3600_000,
    ),
  };
}

/** The default `pollIntervalMs` on a store with notifications (`StoreCapabilities.pollIntervalMs`). */
function storePollMs(store: JobStore): number {
  return assertInteger(
    store.capabilities.pollIntervalMs ?? DEFAULT_NOTIFIED_POLL_MS,
    `capabilities.pollIntervalMs of the ${store.name} store`,
    MIN_POLL_MS,
    3600_000,
  );
}

/**
 * The queues or tenants an engine takes jobs of (`EngineOptions.queues`/`tenants`): null for
 * all, else names checked as enqueue checks a job's `queue` / `tenantId`.
 */
function nameList(value: readonly string[] | undefined | null, field: string): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) {
    throw new ValidationError(field, `must be an array of names, got ${describe(value)}`);
  }
  return value.map((name, i) => assertText(name, `${field}.${i}`));
}

/** Checks `EngineOptions.signalRetention`: ms, the default when absent. */
export function resolveSignalRetention(retention: string | undefined): number {
  if (retention === undefined) return DEFAULT_SIGNAL_RETENTION_MS;
  const ms = durationToMs(parseDuration(retention, 'signalRetention'));
  if (ms < MIN_RETENTION_MS || ms > MAX_RETENTION_MS) {
    throw new ValidationError(
      'signalRetention',
      `must be from PT1M to P3650D, got ${JSON.stringify(retention)}`,
    );
  }
  return ms;
}

/** Checks `EngineOptions.history` and fills in its defaults. */
export function resolveHistory(options: HistoryOptions | undefined): HistorySettings {
  if (options === undefined) return { ...DEFAULT_HISTORY };
  if (options === null || typeof options !== 'object') {
    throw new ValidationError(
      'history',
      "must be an object like { keep: 'all', retention: 'P7D' }",
    );
  }
  assertKnownKeys(options, new Set(['keep', 'retention']), 'history');
  const keep = options.keep ?? DEFAULT_HISTORY.keep;
  if (!HISTORY_KEEPS.includes(keep)) {
    throw new ValidationError(
      'history.keep',
      `must be one of ${HISTORY_KEEPS.map((k) => `'${k}'`).join(', ')}, got ${JSON.stringify(keep)}`,
    );
  }
  if (options.retention === undefined) return { keep, retentionMs: DEFAULT_HISTORY.retentionMs };
  const retentionMs = durationToMs(parseDuration(options.retention, 'history.retention'));
  if (retentionMs < MIN_RETENTION_MS || retentionMs > MAX_RETENTION_MS) {
    throw new ValidationError(
      'history.retention',
      `must be from PT1M to P3650D, got ${JSON.stringify(options.retention)}`,
    );
  }
  return { keep, retentionMs };
}

function resolveHandler(
  type: string,
  definition: JobHandler | HandlerDefinition | BatchHandlerDefinition,
): ResolvedHandler {
  if (typeof definition === 'function') {
    return { handler: definition, policy: null, retries: undefined };
  }
  if (!definition || typeof definition.handler !== 'function') {
    throw new JobsError(
      'VALIDATION',
      `[@jobs/core] JobEngine: handlers.${type} must be a function or { handler, retry?, retries? }`,
    );
  }
  assertKnownKeys(
    definition,
    new Set(['handler', 'retry', 'retries', 'scopeLimit', 'rateLimit', 'timeoutMs', 'batch']),
    `handlers.${type}`,
  );
  const parsed = definition.retry
    ? parseRetryPolicy(definition.retry, `handlers.${type}.retry`)
    : null;
  const batch =
    definition.batch !== undefined
      ? resolveBatch(type, definition as BatchHandlerDefinition)
      : undefined;
  return {
    handler: batch ? batchOnly(type) : (definition.handler as JobHandler),
    ...(batch ? { batch } : {}),
    policy: parsed?.policy ?? null,
    retries:
      definition.retries !== undefined
        ? assertInteger(definition.retries, `handlers.${type}.retries`, 0, MAX_RETRIES)
        : (parsed?.retries ?? undefined),
    ...(definition.scopeLimit === undefined
      ? {}
      : {
          scopeLimit: assertInteger(
            definition.scopeLimit,
            `handlers.${type}.scopeLimit`,
            1,
            MAX_SCOPE_LIMIT,
          ),
        }),
    ...(definition.timeoutMs === undefined
      ? {}
      : {
          timeoutMs: assertInteger(
            definition.timeoutMs,
            `handlers.${type}.timeoutMs`,
            1,
            MAX_TIMEOUT_MS,
          ),
        }),
  };
}

/** Checks `handlers.<type>.batch` (`BatchOptions`). */
function resolveBatch(type: string, definition: BatchHandlerDefinition): ResolvedBatch {
  const field = `handlers.${type}.batch`;
  const options: BatchOptions | undefined = definition.batch;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ValidationError(
      field,
      `must be an object like { size: 100 }, got ${describe(options)}`,
    );
  }
  assertKnownKeys(options, new Set(['size', 'waitMs']), field);
  return {
    handler: definition.handler,
    size: assertInteger(options.size, `${field}.size`, 1, MAX_BATCH_SIZE),
    waitMs:
      options.waitMs === undefined
        ? DEFAULT_BATCH_WAIT_MS
        : assertInteger(options.waitMs, `${field}.waitMs`, 0, MAX_BATCH_WAIT_MS),
  };
}

/** The single-job handler of a batch type: never called (`Dispatcher` runs batches). */
function batchOnly(type: string): JobHandler {
  return () => {
    throw new JobsError(
      'INVALID_STATE',
      `[@jobs/core] handlers.${type} is a batch handler; it runs jobs in batches only`,
    );
  };
}
