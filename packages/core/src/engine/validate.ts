/**
 * Enqueue input checks. Everything is checked before anything is written, and a failure names
 * the option that was wrong.
 */
import { ValidationError } from '../errors.js';
import { parseRetryPolicy } from '../retry.js';
import type { NewJob } from '../store.js';
import type { EnqueueJobOptions } from './types.js';

const ENQUEUE_OPTION_KEYS = new Set<keyof EnqueueJobOptions>([
  'runAt',
  'delayMs',
  'retries',
  'retry',
  'priority',
  'scope',
  'exclusive',
  'key',
  'tenantId',
  'queue',
  'tx',
]);

const MAX_TEXT = 255;
const MAX_PRIORITY = 2_147_483_647;

export interface JobDefaults {
  retries: number;
  maxPayloadBytes: number;
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

/** Serialises the payload once, to prove it is JSON and measure it. */
export function checkPayload(payload: unknown, maxBytes: number, field = 'payload'): unknown {
  if (payload === undefined) return null;
  let text: string | undefined;
  try {
    text = JSON.stringify(payload, (key, value: unknown) => {
      if (typeof value === 'function' || typeof value === 'symbol') {
        throw new ValidationError(
          key === '' ? field : `${field}.${key}`,
          `is a ${typeof value}, which is not JSON-serialisable`,
        );
      }
      return value;
    });
  } catch (error) {
    if (error instanceof ValidationError) throw error;
    throw new ValidationError(field, `is not JSON-serialisable: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (text === undefined) {
    throw new ValidationError(field, 'is not JSON-serialisable');
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) {
    throw new ValidationError(
      field,
      `is ${bytes} bytes of JSON, more than the limit of ${maxBytes}`,
    );
  }
  return JSON.parse(text) as unknown;
}

/**
 * Turns `enqueue(type, payload, options)` into a `NewJob`, or throws `ValidationError`.
 * `typeRetries` / `typeRetry` are the handler's defaults for this type, when known.
 */
export function toNewJob(
  type: unknown,
  payload: unknown,
  options: EnqueueJobOptions | undefined,
  defaults: JobDefaults & { typeRetries?: number },
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
    dueAt = opts.runAt;
  }
  let delayMs = 0;
  if (opts.delayMs !== undefined) {
    if (dueAt) throw new ValidationError('delayMs', 'give either runAt or delayMs, not both');
    if (typeof opts.delayMs !== 'number' || !Number.isFinite(opts.delayMs) || opts.delayMs < 0) {
      throw new ValidationError(
        'delayMs',
        `must be a number of ms ≥ 0, got ${describe(opts.delayMs)}`,
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
  if (opts.retries !== undefined) retries = assertInteger(opts.retries, 'retries', 0, 1000);

  const scope = optionalText(opts.scope, 'scope');
  const exclusive = opts.exclusive ?? false;
  if (typeof exclusive !== 'boolean') {
    throw new ValidationError('exclusive', `must be a boolean, got ${describe(exclusive)}`);
  }
  if (exclusive && scope === null) {
    throw new ValidationError('exclusive', 'an exclusive job needs a scope (options.scope)');
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
    exclusive,
    key: optionalText(opts.key, 'key'),
    tenantId: optionalText(opts.tenantId, 'tenantId'),
    queue: opts.queue === undefined ? 'default' : assertText(opts.queue, 'queue'),
    retryPolicy,
    schedule: null,
    occurrence: null,
    shard: null,
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
