/**
 * Input checks for enqueue options and admin filters. Everything is checked before anything is
 * written, and a failure names the option that was wrong.
 */
import { ValidationError } from '../errors.js';
import { MAX_RETRIES, parseRetryPolicy } from '../retry.js';
import { checkPayload } from '../rules.js';
import {
  JOB_STATES,
  type Job,
  type JobFilter,
  type JobState,
  type JobStore,
  type KeyMode,
  type NewJob,
} from '../store.js';
import type { EnqueueJobOptions, RateLimit } from './types.js';

/** The options `enqueue` takes (a flow node takes them too, but for its key and run time). */
export const ENQUEUE_OPTION_KEYS: ReadonlySet<keyof EnqueueJobOptions> = new Set<
  keyof EnqueueJobOptions
>([
  'runAt',
  'delayMs',
  'retries',
  'retry',
  'priority',
  'scope',
  'exclusive',
  'scopeLimit',
  'key',
  'keyMode',
  'tenantId',
  'queue',
  'meta',
  'timeoutMs',
  'tx',
]);

/** Longest time limit of a run: a week. */
export const MAX_TIMEOUT_MS = 7 * 24 * 3_600_000;

const MAX_TEXT = 255;
const MAX_PRIORITY = 2_147_483_647;
/** Largest payload limit an engine may set: MariaDB's default packet is 16 MiB per statement. */
export const MAX_PAYLOAD_LIMIT_BYTES = 8 * 1024 * 1024;
/** Due times every store's time column holds (MySQL DATETIME ends in year 9999). */
export const EARLIEST_DUE = Date.UTC(1970, 0, 1);
export const LATEST_DUE = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/** Longest delay: a century. */
export const MAX_DELAY_MS = 100 * 365.25 * 24 * 3_600_000;

/**
 * Characters no store keeps verbatim in a name or a JSON string: NUL and the other C0
 * controls and DEL (PostgreSQL refuses NUL in text and jsonb), and unpaired UTF-16 surrogates
 * (not encodable as UTF-8).
 */
export const UNSTORABLE_IN_NAME =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are what it finds
  /[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
export interface JobDefaults {
  retries: number;
  maxPayloadBytes: number;
}

/** Largest scope limit (`scopeLimit`): a limited job's check reads at most this many rows. */
export const MAX_SCOPE_LIMIT = 1000;

const KEY_MODES: ReadonlySet<string> = new Set<KeyMode>(['keep', 'replace', 'debounce']);

/**
 * Refuses what `store` cannot keep: a scope limit above 1 without `capabilities.scopeLimits`, a
 * key mode other than `keep` without `capabilities.keyModes`. `where` names the input.
 */
export function assertStoreCanLimit(
  store: Pick<JobStore, 'name' | 'capabilities'>,
  input: { scopeLimit?: number | null; keyMode?: KeyMode; timeoutMs?: number | null },
  where: string,
): void {
  if ((input.timeoutMs ?? null) !== null && !store.capabilities.timeLimits) {
    throw new ValidationError(
      `${where}.timeoutMs`,
      `the ${store.name} store keeps no per-job time limit (capabilities.timeLimits is not set); give the type a timeoutMs instead`,
    );
  }
  if ((input.scopeLimit ?? 1) > 1 && !store.capabilities.scopeLimits) {
    throw new ValidationError(
      `${where}.scopeLimit`,
      `the ${store.name} store keeps no scope limits above 1 (capabilities.scopeLimits is not set); use exclusive for a limit of 1`,
    );
  }
  if ((input.keyMode ?? 'keep') !== 'keep' && !store.capabilities.keyModes) {
    throw new ValidationError(
      `${where}.keyMode`,
      `the ${store.name} store supports only keyMode 'keep' (capabilities.keyModes is not set)`,
    );
  }
}

/** Rejects unknown keys in an options object (a typo must not silently do nothing). */
export function assertKnownKeys(value: object, allowed: ReadonlySet<string>, where: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.has(key)) {
      throw new ValidationError(
        `${where}.${key}`,
        `unknown option (expected one of ${[...allowed].join(', ')})`,
      );
    }
  }
}

export function assertText(value: unknown, field: string, max = MAX_TEXT): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ValidationError(field, `must be a non-empty string, got ${describe(value)}`);
  }
  if (value.length > max) {
    throw new ValidationError(field, `must be at most ${max} characters, got ${value.length}`);
  }
  if (UNSTORABLE_IN_NAME.test(value)) {
    throw new ValidationError(
      field,
      `must not contain control characters (NUL, newline, …) or unpaired surrogates, got ${describe(value)}`,
    );
  }
  return value;
}

function optionalText(value: unknown, field: string): string | null {
  return value === undefined || value === null ? null : assertText(value, field);
}

export function assertInteger(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(
      field,
      `must be a whole number from ${min} to ${max}, got ${describe(value)}`,
    );
  }
  return value;
}

/** Most entries of a job's `meta`. */
export const MAX_META_ENTRIES = 16;
/** Longest value in a job's `meta` (a W3C `tracestate` is at most 512). */
export const MAX_META_VALUE = 1024;

/**
 * Checks a job's `meta` headers: a plain object of at most `MAX_META_ENTRIES` string values of at
 * most `MAX_META_VALUE` characters, keys as names (1–255 characters), no control characters.
 * Returns a copy, or null when there are none.
 */
export function checkMeta(value: unknown, field = 'meta'): Record<string, string> | null {
  if (value === undefined || value === null) return null;
  const proto = typeof value === 'object' ? Object.getPrototypeOf(value) : undefined;
  if (proto !== Object.prototype && proto !== null) {
    throw new ValidationError(
      field,
      `must be a plain object of string values, got ${describe(value)}`,
    );
  }
  const entries = Object.entries(value as object);
  if (entries.length > MAX_META_ENTRIES) {
    throw new ValidationError(
      field,
      `must have at most ${MAX_META_ENTRIES} entries, got ${entries.length}`,
    );
  }
  if (entries.length === 0) return null;
  for (const [key, text] of entries) {
    assertText(key, `${field} key`);
    if (typeof text !== 'string') {
      throw new ValidationError(`${field}.${key}`, `must be a string, got ${describe(text)}`);
    }
    if (text.length > MAX_META_VALUE) {
      throw new ValidationError(
        `${field}.${key}`,
        `must be at most ${MAX_META_VALUE} characters, got ${text.length}`,
      );
    }
    if (UNSTORABLE_IN_NAME.test(text)) {
      throw new ValidationError(
        `${field}.${key}`,
        `must not contain control characters or unpaired surrogates, got ${describe(text)}`,
      );
    }
  }
  // defineProperty semantics: a `__proto__` key stays a plain entry.
  return Object.fromEntries(entries);
}

/**
 * Turns `enqueue(type, payload, options)` into a `NewJob`, or throws `ValidationError`.
 * `typeRetries` / `typeRetry` are the handler's defaults for this type, when known.
 */
export function toNewJob(
  type: unknown,
  payload: unknown,
  options: EnqueueJobOptions | undefined,
  defaults: JobDefaults & { typeRetries?: number; typeScopeLimit?: number },
): NewJob {
  const jobType = assertText(type, 'type');
  const opts = options ?? {};
  if (typeof opts !== 'object' || opts === null) {
    throw new ValidationError('options', `must be an object, got ${describe(opts)}`);
  }
  assertKnownKeys(opts, ENQUEUE_OPTION_KEYS as ReadonlySet<string>, 'options');

  let dueAt: Date | null = null;
  if (opts.runAt !== undefined) {
    if (!(opts.runAt instanceof Date) || Number.isNaN(opts.runAt.getTime())) {
      throw new ValidationError('runAt', `must be a valid Date, got ${describe(opts.runAt)}`);
    }
    const at = opts.runAt.getTime();
    if (at < EARLIEST_DUE || at > LATEST_DUE) {
      throw new ValidationError(
        'runAt',
        `must be between 1970-01-01 and 9999-12-31, got ${opts.runAt.toISOString()}`,
      );
    }
    dueAt = opts.runAt;
  }
  let delayMs = 0;
  if (opts.delayMs !== undefined) {
    if (dueAt) throw new ValidationError('delayMs', 'give either runAt or delayMs, not both');
    if (
      typeof opts.delayMs !== 'number' ||
      !Number.isFinite(opts.delayMs) ||
      opts.delayMs < 0 ||
      opts.delayMs > MAX_DELAY_MS
    ) {
      throw new ValidationError(
        'delayMs',
        `must be a number of ms from 0 to ${MAX_DELAY_MS} (a century), got ${describe(opts.delayMs)}`,
      );
    }
    delayMs = Math.round(opts.delayMs);
  }

  let retryPolicy = null;
  let retries = defaults.typeRetries ?? defaults.retries;
  if (opts.retry !== undefined) {
    const parsed = parseRetryPolicy(opts.retry, 'retry');
    retryPolicy = parsed.policy;
    if (parsed.retries !== null) retries = parsed.retries;
  }
  if (opts.retries !== undefined) retries = assertInteger(opts.retries, 'retries', 0, MAX_RETRIES);

  const scope = optionalText(opts.scope, 'scope');
  const exclusive = opts.exclusive ?? false;
  if (typeof exclusive !== 'boolean') {
    throw new ValidationError('exclusive', `must be a boolean, got ${describe(exclusive)}`);
  }
  if (exclusive && scope === null) {
    throw new ValidationError('exclusive', 'an exclusive job needs a scope (options.scope)');
  }
  let scopeLimit: number | null = null;
  if (opts.scopeLimit !== undefined) {
    scopeLimit = assertInteger(opts.scopeLimit, 'scopeLimit', 1, MAX_SCOPE_LIMIT);
    if (scope === null) {
      throw new ValidationError('scopeLimit', 'a scope limit needs a scope (options.scope)');
    }
    if (exclusive && scopeLimit !== 1) {
      throw new ValidationError(
        'scopeLimit',
        `exclusive means a scope limit of 1, got exclusive: true with scopeLimit ${scopeLimit}`,
      );
    }
  } else if (exclusive) {
    scopeLimit = 1;
  } else if (opts.exclusive === undefined && scope !== null && defaults.typeScopeLimit) {
    scopeLimit = defaults.typeScopeLimit;
  }
  const key = optionalText(opts.key, 'key');
  let keyMode: KeyMode = 'keep';
  if (opts.keyMode !== undefined) {
    if (typeof opts.keyMode !== 'string' || !KEY_MODES.has(opts.keyMode)) {
      throw new ValidationError(
        'keyMode',
        `must be 'keep', 'replace' or 'debounce', got ${describe(opts.keyMode)}`,
      );
    }
    keyMode = opts.keyMode;
    if (key === null && keyMode !== 'keep') {
      throw new ValidationError('keyMode', `keyMode '${keyMode}' needs a key (options.key)`);
    }
  }

  return {
    type: jobType,
    payload: checkPayload(payload, defaults.maxPayloadBytes),
    dueAt,
    delayMs,
    priority:
      opts.priority === undefined
        ? 0
        : assertInteger(opts.priority, 'priority', -MAX_PRIORITY, MAX_PRIORITY),
    retries,
    scope,
    exclusive: scopeLimit === 1,
    ...(scopeLimit === null ? {} : { scopeLimit }),
    key,
    ...(keyMode === 'keep' ? {} : { keyMode }),
    tenantId: optionalText(opts.tenantId, 'tenantId'),
    queue: opts.queue === undefined ? 'default' : assertText(opts.queue, 'queue'),
    retryPolicy,
    schedule: null,
    occurrence: null,
    shard: null,
    meta: checkMeta(opts.meta),
    ...(opts.timeoutMs === undefined
      ? {}
      : { timeoutMs: assertInteger(opts.timeoutMs, 'timeoutMs', 1, MAX_TIMEOUT_MS) }),
  };
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value instanceof Date)
    return `Date(${Number.isNaN(value.getTime()) ? 'Invalid' : value.toISOString()})`;
  if (typeof value === 'string')
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'object') return Array.isArray(value) ? 'an array' : 'an object';
  return `${typeof value} ${String(value)}`;
}

/** The fields of a job filter (`admin.listJobs`, `suspend`, bulk actions). */
export const FILTER_KEYS = new Set(['state', 'type', 'scope', 'tenantId', 'queue', 'schedule']);
export const LIST_KEYS = new Set([...FILTER_KEYS, 'limit', 'offset']);
export const HISTORY_KEYS = new Set(['type', 'outcome', 'since', 'until', 'limit', 'cursor']);

export function assertDate(value: unknown, field: string): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new ValidationError(field, 'must be a valid Date');
  }
  return value;
}

/** Checks an admin filter: only `keys`, known states, names as names. */
export function checkFilter(
  filter: JobFilter,
  keys: ReadonlySet<string>,
  where: string,
): JobFilter {
  if (filter === null || typeof filter !== 'object') {
    throw new ValidationError(where, 'must be an object');
  }
  assertKnownKeys(filter, keys, where);
  const states =
    filter.state === undefined ? [] : Array.isArray(filter.state) ? filter.state : [filter.state];
  for (const state of states) {
    if (!JOB_STATES.includes(state as JobState)) {
      throw new ValidationError(
        `${where}.state`,
        `unknown state ${JSON.stringify(state)} (expected ${JOB_STATES.join(', ')})`,
      );
    }
  }
  for (const key of ['type', 'scope', 'tenantId', 'queue', 'schedule'] as const) {
    if (filter[key] !== undefined) assertText(filter[key], `${where}.${key}`);
  }
  return filter;
}

/** Longest window or push-back: a day. */
export const MAX_RATE_WINDOW_MS = 86_400_000;

/** A type's rate limit, validated. */
export interface ResolvedRateLimit {
  max: number;
  perMs: number;
  key: ((job: Job) => string) | null;
}

/** Validates `handlers.<type>.rateLimit`. */
export function resolveRateLimit(
  value: unknown,
  field: string,
  store: Pick<JobStore, 'name' | 'rateLimits'>,
): ResolvedRateLimit {
  if (typeof value !== 'object' || value === null) {
    throw new ValidationError(field, 'must be { max, perMs, key? }');
  }
  const { max, perMs, key, ...rest } = value as RateLimit;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw new ValidationError(`${field}.${unknown}`, 'unknown option (expected max, perMs, key)');
  }
  if (key !== undefined && typeof key !== 'function') {
    throw new ValidationError(`${field}.key`, 'must be a function (job) => string');
  }
  if (!store.rateLimits) {
    throw new ValidationError(
      field,
      `the ${store.name} store keeps no rate limits (it has no \`rateLimits\`)`,
    );
  }
  return {
    max: assertInteger(max, `${field}.max`, 1, 1_000_000),
    perMs: assertInteger(perMs, `${field}.perMs`, 1, MAX_RATE_WINDOW_MS),
    key: key ?? null,
  };
}
