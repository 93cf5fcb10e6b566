/**
 * The rules every store and the engine share — no I/O — in one file, so the memory store, the
 * SQL core's JavaScript parts, custom stores, the engine and `@jobs/http` apply them alike:
 * - the lifecycle's pure rules: when a job is due, the job a store writes for a new one, the
 *   acquisition order, what a failed attempt (the retry rule) and a lapsed lease do, which ids
 *   are job ids, whether a starting job waited as a timer;
 * - the payload rules: what JSON a payload, result or checkpoint may hold, and its text kept
 *   once so a store does not serialise it again;
 * - what a store author needs beside the contract: option checks, change subscribers, the
 *   stored forms of logs and steps;
 * - history records: which outcomes are kept, the result text a record holds, the cursor.
 *
 * `@jobs/core` exports the store-facing ones by name (`index.ts`). Each section below keeps its
 * own header.
 */

import { ValidationError } from './errors.js';
import { retryDelayMs } from './retry.js';
import type {
  HistoryKeep,
  HistoryOutcome,
  Job,
  JobError,
  JobFailure,
  JobHistoryRecord,
  JobLogLine,
  JobRef,
  JobState,
  JobStep,
  NewJob,
  RetryPolicy,
} from './store.js';

// ─── due time ────────────────────────────────────────────────────────────────────────────────────
/* When a new job is due, and the state it waits in. */

/** The due time of a new job: `(dueAt ?? now) + delayMs`, `now` on the store's clock. */
export function dueTime(job: Pick<NewJob, 'dueAt' | 'delayMs'>, now: Date): Date {
  return new Date((job.dueAt ?? now).getTime() + job.delayMs);
}

/** The state a job due at `due` waits in at `now`: `timer` while due later, else `async`. */
export function initialState(due: Date, now: Date): 'timer' | 'async' {
  return due.getTime() > now.getTime() ? 'timer' : 'async';
}

// ─── refs and timers ─────────────────────────────────────────────────────────────────────────────

/**
 * The ref an owner settles `job` with: its id and lease token, and its scope when it is limited
 * (so a store with blocked sets lets the scope's next job in).
 */
export function refOf(job: Job): JobRef {
  const ref: JobRef = { id: job.id, token: job.lockToken as string };
  const scope = limitedScopeOf(job);
  if (scope !== undefined) ref.scope = scope;
  return ref;
}

/** The scope of a limited job (exclusive or `scopeLimit`); undefined for any other. */
export function limitedScopeOf(job: Job): string | undefined {
  return job.scope !== null && (job.exclusive || (job.scopeLimit ?? null) !== null)
    ? job.scope
    : undefined;
}

/** Whether a job starting now waited as a timer (a due time after its creation, or a retry). */
export function firedFromTimer(job: Job): boolean {
  return job.dueAt.getTime() > job.createdAt.getTime() || job.attempts > 1;
}

// ─── job ids ─────────────────────────────────────────────────────────────────────────────────────
/* Job ids: canonical decimal integers that fit a signed 64-bit column (every store's id). */

/** Whether `id` is a job id any store could hold: `0`, or digits without a leading 0, ≤ 2⁶³−1. */
export function isJobId(id: string): boolean {
  return (
    typeof id === 'string' &&
    /^(0|[1-9][0-9]{0,18})$/.test(id) &&
    (id.length < 19 || BigInt(id) <= 9_223_372_036_854_775_807n)
  );
}

// ─── acquisition order ───────────────────────────────────────────────────────────────────────────
/*
 * The acquisition order (DESIGN invariant 9): higher priority first, then earlier due time,
 * then insertion order (ids grow with insertion). The SQL stores say the same in their
 * `ORDER BY`; this is it for code.
 */

/**
 * Negative when `a` is acquired before `b`. Ids are canonical decimals of any size: the
 * shorter is smaller, else they compare as text (no BigInt: this runs for every pair of a
 * large batch, and most pairs tie on priority and due time).
 */
export function compareAcquisitionOrder(
  a: { priority: number; dueAt: Date; id: string },
  b: { priority: number; dueAt: Date; id: string },
): number {
  return (
    b.priority - a.priority ||
    a.dueAt.getTime() - b.dueAt.getTime() ||
    a.id.length - b.id.length ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}

// ─── lease expiry and start ──────────────────────────────────────────────────────────────────────
/*
 * What the end of a lapsed lease does to a job (`JobStore.recoverExpiredLeases`, invariants 4
 * and 20): the one rule every store applies, whatever it stores.
 */

/** Error message stored when a lease expires (crash, OOM, blocked event loop). */
export const LEASE_EXPIRED_MESSAGE =
  'lease expired: the owner stopped renewing it (crash or stall)';

/** How a lapsed lease ends for a job (see `afterLeaseExpiry`). */
export type LeaseExpiry = 'cancelled' | 'released' | 'requeued' | 'deadletter';

/**
 * A cancel-requested job ends `cancelled`; one whose handler never started (`startedAt` null on
 * a store that records starts) is `released` — waiting again, its attempt given back, nothing
 * charged; any other is charged: `requeued` with a retry fewer while it has retries left, else
 * `deadletter`.
 */
export function afterLeaseExpiry(job: {
  cancelRequested?: boolean;
  startedAt?: Date | null;
  retriesLeft: number;
}): LeaseExpiry {
  if (job.cancelRequested) return 'cancelled';
  if (job.startedAt === null) return 'released';
  return job.retriesLeft > 0 ? 'requeued' : 'deadletter';
}

/**
 * Which jobs of a lease it records as started (`AcquireRequest.start`, `startAhead`), by rank
 * in acquisition order from 0: those ranked below `always`, and those ranked below
 * `withRetriesLeft` that have retries left. With `start` given (an engine that starts only what
 * its free slots take) a job without retries left is never recorded by the lease: its start is
 * recorded by a renewal just before its handler starts, so an answer that came back after the
 * lease lapsed, or an owner that died before starting it, can never dead-letter it unrun.
 * Without `start` (the caller starts every job at once) all `count` are recorded.
 */
export function leaseStarts(
  request: { start?: number; startAhead?: number },
  count: number,
): LeaseStartRule {
  const always = request.start === undefined ? count : 0;
  const withRetriesLeft =
    request.start === undefined ? count : request.start + (request.startAhead ?? 0);
  return {
    always,
    withRetriesLeft,
    records: (rank, retriesLeft) => rank < always || (rank < withRetriesLeft && retriesLeft > 0),
  };
}

/** `leaseStarts`'s answer: the two bounds, and the rule they make for one job. */
export interface LeaseStartRule {
  always: number;
  withRetriesLeft: number;
  /** Whether the job ranked `rank` (from 0) with `retriesLeft` retries is recorded as started. */
  records(rank: number, retriesLeft: number): boolean;
}

// ─── failure: the retry rule ─────────────────────────────────────────────────────────────────────
/*
 * What a failed attempt does to a job. `decideRetry`: whether it runs again and after how long —
 * the one retry rule, for the engine's handlers and `@jobs/http`'s remote workers alike.
 * `afterFailure`: what the store records (`JobStore.fail`, invariant 6), whatever it stores.
 */

/** How an attempt failed, as the retry rule reads it. */
export interface FailedAttempt {
  /**
   * No retry, whatever is left: the handler threw `UnrecoverableError`, or a remote worker
   * failed the job with `unrecoverable`.
   */
  unrecoverable: boolean;
  /** The wait before the next attempt when the worker named one (a remote worker's `retryInMs`). */
  delayMs?: number | null;
}

/** What a failed attempt leads to. */
export interface RetryDecision {
  /** True: the job waits as a timer for `delayMs`, then runs again. False: dead-letter. */
  willRetry: boolean;
  /** The wait before the next attempt; 0 when the job goes to the dead-letter area. */
  delayMs: number;
}

/**
 * The retry rule: with retries left and not `unrecoverable`, another attempt after the wait the
 * worker named, else the backoff of the job's own policy, else of `typePolicy` (the handler's,
 * the engine's, or the HTTP API's `retry`) for this failure (`job.attempts`); otherwise the
 * dead-letter area.
 *
 * @example
 * const { willRetry, delayMs } = decideRetry(job, { unrecoverable: false }, DEFAULT_RETRY_POLICY);
 * await store.fail([{ ...refOf(job), error, deadletter: !willRetry, retryDelayMs: delayMs }]);
 */
export function decideRetry(
  job: Pick<Job, 'retriesLeft' | 'attempts' | 'retryPolicy'>,
  attempt: FailedAttempt,
  typePolicy: RetryPolicy,
): RetryDecision {
  if (attempt.unrecoverable || job.retriesLeft <= 0) return { willRetry: false, delayMs: 0 };
  const delayMs =
    attempt.delayMs ?? retryDelayMs(job.retryPolicy ?? typePolicy, Math.max(1, job.attempts));
  return { willRetry: true, delayMs };
}

/** The fields a recorded failure changes (the lease is cleared too). */
export interface AfterFailure {
  state: Extract<JobState, 'timer' | 'deadletter'>;
  /** When it is due again (`timer`); unchanged for a dead-letter job. */
  dueAt: Date | null;
  /** Retries left after this failure: one fewer for a retry, unchanged for a dead-letter job. */
  retriesLeft: number;
  lastError: JobError;
}

/**
 * `deadletter`: to the dead-letter area, retries untouched. Otherwise back to `timer`, due
 * `retryDelayMs` after the store's `nowMs`, with one retry fewer. Either way the error is kept.
 *
 * @example
 * const next = afterFailure(job, failure, clock.now());
 * Object.assign(job, { state: next.state, retriesLeft: next.retriesLeft, lastError: next.lastError });
 * if (next.dueAt) job.dueAt = next.dueAt;
 */
export function afterFailure(
  job: { retriesLeft: number },
  failure: Pick<JobFailure, 'deadletter' | 'retryDelayMs' | 'error'>,
  nowMs: number,
): AfterFailure {
  const lastError = { message: failure.error.message, stack: failure.error.stack ?? null };
  if (failure.deadletter) {
    return { state: 'deadletter', dueAt: null, retriesLeft: job.retriesLeft, lastError };
  }
  return {
    state: 'timer',
    dueAt: new Date(nowMs + failure.retryDelayMs),
    retriesLeft: job.retriesLeft - 1,
    lastError,
  };
}

// ─── the written job ─────────────────────────────────────────────────────────────────────────────
/* A new job as its store writes it: the one mapping from `NewJob` to the `Job` read back. */

/** What the store decided for a job it just inserted; the rest comes from its `NewJob`. */
export interface WrittenJobFacts {
  id: string;
  /** When it was written, on the store's clock (ms precision, as every store keeps times). */
  createdAt: Date;
  /** Default: `dueTime(input, createdAt)`. */
  dueAt?: Date;
  /** Default: `initialState(dueAt, createdAt)`. */
  state?: 'timer' | 'async';
  /**
   * The payload as the store reads it back: a JSON copy of the input's (e.g. the engine's
   * checked copy, see `takeCheckedPayload`). Default: the input's, through JSON text.
   */
  payload?: unknown;
}

/**
 * The job a store has just written for `input`, exactly as reading its row back would give it
 * (a waiting job: no lease, no error, no attempts yet), without reading it back. JSON-valued
 * fields are copies, so the caller's objects and the job share nothing. The memory store, the
 * SQL core and custom stores build new jobs with it.
 */
export function writtenJob(input: NewJob, facts: WrittenJobFacts): Job {
  const dueAt = facts.dueAt ?? dueTime(input, facts.createdAt);
  // A limit of 1 (`exclusive`, or `scopeLimit: 1`) is the exclusive kind; none is no limit.
  const limit = input.exclusive ? 1 : (input.scopeLimit ?? null);
  return {
    id: facts.id,
    type: input.type,
    payload: 'payload' in facts ? facts.payload : jsonCopy(input.payload),
    state: facts.state ?? initialState(dueAt, facts.createdAt),
    priority: input.priority,
    dueAt,
    retriesLeft: input.retries,
    attempts: 0,
    scope: input.scope,
    exclusive: limit === 1,
    scopeLimit: limit,
    key: input.key,
    tenantId: input.tenantId,
    queue: input.queue,
    lastError: null,
    // Its own Date: the jobs of one batch share a write time, never the object.
    createdAt: new Date(facts.createdAt.getTime()),
    lockOwner: null,
    lockExpiresAt: null,
    lockToken: null,
    retryPolicy: input.retryPolicy ? (jsonCopy(input.retryPolicy) as Job['retryPolicy']) : null,
    suspendedFrom: null,
    schedule: input.schedule,
    occurrence: input.occurrence ? new Date(input.occurrence.getTime()) : null,
    shard: input.shard ? { index: input.shard.index, count: input.shard.count } : null,
    meta: input.meta ? { ...input.meta } : null,
    progress: null,
    cancelRequested: false,
    startedAt: null,
    logs: [],
    steps: [],
    timeoutMs: input.timeoutMs ?? null,
  };
}

/** `value` as a store reads it back from JSON text (undefined: null). */
function jsonCopy(value: unknown): unknown {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}

// ─── payload checks ──────────────────────────────────────────────────────────────────────────────
/*
 * Payload checks: a job's payload (and a handler's progress value, and a schedule's payload)
 * must read back from every store exactly as given, so it is serialised once here and refused
 * with the path of what JSON would drop or change, or no store would keep.
 */

/** Deepest nesting of a payload every store's JSON column holds (MySQL's limit is 100). */
export const MAX_PAYLOAD_DEPTH = 64;
/**
 * Like `UNSTORABLE_IN_NAME` (`engine/validate.ts`), but a JSON string may hold tab, newline and
 * carriage return.
 */
export const UNSTORABLE_IN_JSON =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are what it finds
  /[\u0000-\u0008\u000b\u000c\u000e-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Serialises the payload once, to prove every store reads it back as given, and to measure
 * it; returns the value as every store reads it back (a copy). Refused, with the path (e.g.
 * `payload.items.3.price`): functions, symbols, `BigInt`, `NaN` and `Infinity`; NUL and
 * unpaired surrogates in strings or keys; `Map`, `Set`, typed arrays, `ArrayBuffer` and the
 * other built-ins whose contents JSON drops; holes and `undefined` in arrays (JSON writes
 * null); class instances whose state JSON cannot see (no enumerable fields, or getters); cycles;
 * more than `MAX_PAYLOAD_DEPTH` levels; a getter or `toJSON` that throws (its error is the
 * `cause`). An object's `toJSON` (a `Date`'s) gives what is stored; an `undefined` property is
 * left out, as JSON does.
 */
export function checkPayload(payload: unknown, maxBytes: number, field = 'payload'): unknown {
  if (payload === undefined) return null;
  const text = jsonText(payload, field);
  // UTF-8 takes at most 3 bytes per UTF-16 unit: most texts need no count.
  if (text.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > maxBytes) {
      throw new ValidationError(
        field,
        `is ${bytes} bytes of JSON, more than the limit of ${maxBytes}`,
      );
    }
  }
  const copy = JSON.parse(text) as unknown;
  // Its text, so a store need not serialise it again (see `payloadJson`).
  rememberPayloadText(copy, text);
  return copy;
}

/**
 * The JSON text of `value`, which every store reads back as `JSON.parse` of it, or a
 * `ValidationError` naming the path (under `field`) of what JSON would not keep as given.
 */
export function jsonText(value: unknown, field: string): string {
  // Most payloads are plain JSON data: proven so by a walk, they need no copy (a call per
  // value, a path string per key: most of what a bulk enqueue spent in the engine).
  let plain = false;
  try {
    plain = isPlainJson(value, 0);
  } catch {
    // A getter threw: the walk below reports it with its path.
  }
  if (plain) {
    const text = JSON.stringify(value);
    if (text !== undefined) return text;
  }
  const copy = toJsonValue(value, '', field, 0, new Set());
  if (copy === OMITTED) {
    throw new ValidationError(field, 'is undefined, which JSON cannot hold');
  }
  return JSON.stringify(copy);
}

/**
 * True when JSON keeps `value` exactly as it is: null, booleans, finite numbers, strings and
 * plain objects and arrays of them (no `toJSON`, no holes), nothing a store could not hold, at
 * most `MAX_PAYLOAD_DEPTH` deep. False is no verdict: `toJsonValue` then decides, with the path.
 */
function isPlainJson(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
      return !UNSTORABLE_IN_JSON.test(value);
    case 'number':
      return Number.isFinite(value);
    case 'boolean':
      return true;
    case 'object': {
      if (value === null) return true;
      if (depth >= MAX_PAYLOAD_DEPTH) return false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (!(i in value) || !isPlainJson(value[i], depth + 1)) return false;
        }
        return true;
      }
      const proto = Object.getPrototypeOf(value);
      if ((proto !== Object.prototype && proto !== null) || 'toJSON' in value) return false;
      for (const key in value) {
        if (!Object.hasOwn(value, key) || UNSTORABLE_IN_JSON.test(key)) return false;
        if (!isPlainJson((value as Record<string, unknown>)[key], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/** What `toJsonValue` gives for a value JSON leaves out (`undefined`). */
const OMITTED = Symbol('omitted');

/**
 * Built-ins (by `Object.prototype.toString` tag) whose contents live outside their enumerable
 * properties, so JSON would store `{}` or something else than what was given; and what to pass
 * instead.
 */
const BUILT_INS: Readonly<Record<string, string>> = {
  Map: 'JSON stores as {} (pass Object.fromEntries(map) or [...map])',
  Set: 'JSON stores as {} (pass [...set])',
  WeakMap: 'JSON stores as {}',
  WeakSet: 'JSON stores as {}',
  WeakRef: 'JSON stores as {}',
  ArrayBuffer: 'JSON stores as {} (pass an array of numbers or base64 text)',
  SharedArrayBuffer: 'JSON stores as {} (pass an array of numbers or base64 text)',
  DataView: 'JSON stores as {} (pass an array of numbers or base64 text)',
  RegExp: 'JSON stores as {} (pass its source text)',
  Error: 'JSON stores as {} (pass its message)',
  Promise: 'JSON stores as {} (await it first)',
  Number: 'JSON stores as a plain number (pass the number itself)',
  String: 'JSON stores as a plain string (pass the string itself)',
  Boolean: 'JSON stores as a plain boolean (pass the boolean itself)',
};

/**
 * Why JSON would not keep instance `value` (an object whose prototype is not Object's) as
 * given, or null when its own enumerable fields are all there is to it.
 */
function lostInJson(value: object): string | null {
  const tag = Object.prototype.toString.call(value).slice(8, -1);
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  const kind = typeof name === 'string' && name !== '' ? name : tag;
  const a = /^[AEIO]/.test(kind) ? 'an' : 'a';
  if (ArrayBuffer.isView(value)) {
    return `is ${a} ${kind}, which JSON stores as an object of numbered keys (pass Array.from(…) or base64 text)`;
  }
  const builtIn = BUILT_INS[tag];
  if (builtIn) return `is ${a} ${kind}, which ${builtIn}`;
  if (Object.keys(value).length === 0) {
    return `is an instance of ${kind} without enumerable fields, which JSON stores as {} (its private fields and getters are lost); pass plain data or give ${kind} a toJSON()`;
  }
  for (let proto = Object.getPrototypeOf(value); proto && proto !== Object.prototype; ) {
    for (const [key, descriptor] of Object.entries(Object.getOwnPropertyDescriptors(proto))) {
      if (descriptor.get) {
        return `is an instance of ${kind} whose getter ${key} JSON leaves out; pass plain data or give ${kind} a toJSON()`;
      }
    }
    proto = Object.getPrototypeOf(proto);
  }
  return null;
}

/** The message of an error a getter or `toJSON` threw. */
function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A copy of `value` (the property `key` of its holder, at `path`) as JSON.stringify would see
 * it, `toJSON` applied, or a `ValidationError` naming the path of what JSON would not keep.
 * `ancestors` are the objects on the way down (a cycle refers back to one of them).
 */
function toJsonValue(
  value: unknown,
  key: string,
  path: string,
  depth: number,
  ancestors: Set<object>,
): unknown {
  if (value !== null && typeof value === 'object' && 'toJSON' in value) {
    if (value instanceof Date && Number.isNaN(value.getTime())) {
      throw new ValidationError(path, 'is an invalid Date, which JSON stores as null');
    }
    const toJSON = (value as { toJSON: unknown }).toJSON;
    if (typeof toJSON === 'function') {
      try {
        value = toJSON.call(value, key);
      } catch (error) {
        throw new ValidationError(path, `threw in toJSON(): ${reason(error)}`, { cause: error });
      }
    }
  }
  switch (typeof value) {
    case 'string':
      if (UNSTORABLE_IN_JSON.test(value)) {
        throw new ValidationError(
          path,
          'holds a control character (NUL, …) or an unpaired surrogate, which not every database stores',
        );
      }
      return value;
    case 'number':
      if (!Number.isFinite(value)) {
        throw new ValidationError(
          path,
          `is ${value}, which JSON cannot hold (it would become null)`,
        );
      }
      return value;
    case 'boolean':
      return value;
    case 'undefined':
      return OMITTED;
    case 'bigint':
      throw new ValidationError(
        path,
        'is a BigInt, which JSON cannot hold (pass it as a string or a number)',
      );
    case 'function':
    case 'symbol':
      throw new ValidationError(path, `is a ${typeof value}, which is not JSON-serialisable`);
  }
  if (value === null) return null;
  const object = value as object;
  if (depth >= MAX_PAYLOAD_DEPTH) {
    throw new ValidationError(path, `is nested deeper than ${MAX_PAYLOAD_DEPTH} levels`);
  }
  if (ancestors.has(object)) {
    throw new ValidationError(
      path,
      'refers back to an object that holds it (a cycle), which JSON cannot hold',
    );
  }
  ancestors.add(object);
  try {
    if (Array.isArray(object)) return arrayCopy(object, path, depth, ancestors);
    const proto = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      const lost = lostInJson(object);
      if (lost) throw new ValidationError(path, lost);
    }
    // A prototype-less copy: a `__proto__` key stays a plain entry.
    const copy: Record<string, unknown> = Object.create(null);
    let names: string[];
    try {
      names = Object.keys(object);
    } catch (error) {
      throw new ValidationError(path, `threw when its keys were read: ${reason(error)}`, {
        cause: error,
      });
    }
    for (const name of names) {
      const at = `${path}.${name}`;
      if (UNSTORABLE_IN_JSON.test(name)) {
        throw new ValidationError(at, 'has a key with a control character or unpaired surrogate');
      }
      const entry = toJsonValue(read(object, name, at), name, at, depth + 1, ancestors);
      if (entry !== OMITTED) copy[name] = entry;
    }
    return copy;
  } finally {
    ancestors.delete(object);
  }
}

function arrayCopy(
  array: readonly unknown[],
  path: string,
  depth: number,
  ancestors: Set<object>,
): unknown[] {
  const copy: unknown[] = [];
  for (let i = 0; i < array.length; i++) {
    const at = `${path}.${i}`;
    if (!(i in array)) {
      throw new ValidationError(at, 'is a hole in a sparse array, which JSON stores as null');
    }
    const entry = toJsonValue(read(array, String(i), at), String(i), at, depth + 1, ancestors);
    if (entry === OMITTED) {
      throw new ValidationError(at, 'is undefined in an array, which JSON stores as null');
    }
    copy.push(entry);
  }
  return copy;
}

/** `holder[key]`, or a `ValidationError` at `path` with the getter's error as its cause. */
function read(holder: object, key: string, path: string): unknown {
  try {
    return (holder as Record<string, unknown>)[key];
  } catch (error) {
    throw new ValidationError(path, `threw when read: ${reason(error)}`, { cause: error });
  }
}

// ─── store support ───────────────────────────────────────────────────────────────────────────────
/*
 * What every store writes the same way: checking its constructor options (and the identifiers
 * it puts in SQL), the listeners its `subscribe` wakes, and reading a job's stored log.
 */

/**
 * Throws a `ValidationError` naming the first key of `options` that is not in `known`, so a typo
 * such as `tablePrefx` fails at once instead of being ignored. `source` names the package.
 *
 * @example
 * assertKnownOptions(options, ['filename', 'db'], '@jobs/sqlite');
 */
export function assertKnownOptions(options: object, known: Iterable<string>, source: string): void {
  const names = new Set(known);
  for (const key of Object.keys(options)) {
    if (!names.has(key)) {
      throw new ValidationError(key, `[${source}] unknown option; known: ${[...names].join(', ')}`);
    }
  }
}

/**
 * `value` when it is an integer of 1 or more; otherwise throws a `ValidationError` naming
 * `field`. `source` names the package.
 *
 * @example
 * const intervalMs = assertPositiveInteger(options.intervalMs ?? 50, 'intervalMs', '@jobs/sqlite');
 */
export function assertPositiveInteger(value: number, field: string, source: string): number {
  if (!Number.isInteger(value) || value <= 0) {
    throw new ValidationError(field, `[${source}] must be a positive integer, got ${value}`);
  }
  return value;
}

/**
 * The listeners a store's `subscribe` wakes. Each `add` is its own subscription (the same
 * function added twice is woken twice and removed once per returned function), and a listener
 * that throws does not keep the others asleep: its error goes to `onError`.
 *
 * @example
 * private readonly subscribers = new StoreSubscribers();
 * subscribe(listener: () => void): () => void {
 *   return this.subscribers.add(listener);
 * }
 * // after a commit that made jobs acquirable:
 * this.subscribers.wakeSoon();
 */
export class StoreSubscribers {
  private readonly listeners = new Set<() => void>();
  private wakePending = false;

  constructor(private readonly onError: (error: unknown) => void = () => {}) {}

  /** How many subscriptions there are. */
  get size(): number {
    return this.listeners.size;
  }

  /** Subscribes `listener`; the returned function unsubscribes it. */
  add(listener: () => void): () => void {
    const entry = (): void => listener();
    this.listeners.add(entry);
    return () => {
      this.listeners.delete(entry);
    };
  }

  /** Calls every listener now. */
  wake(): void {
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch (error) {
        this.onError(error);
      }
    }
  }

  /**
   * Calls every listener once on the next turn of the event loop, however often it is asked
   * before then: after the current call and the caller's transaction are done, as a database
   * notification arrives after commit.
   */
  wakeSoon(): void {
    if (this.wakePending || this.listeners.size === 0) return;
    this.wakePending = true;
    setImmediate(() => {
      this.wakePending = false;
      this.wake();
    });
  }

  /** Drops every subscription (the store is closing); a pending `wakeSoon` then wakes nobody. */
  clear(): void {
    this.listeners.clear();
  }
}

/** JSON as a driver returns it — text, a `Buffer` or already parsed — parsed. */
export function readStoredJson(value: unknown): unknown {
  if (typeof value === 'string') return JSON.parse(value);
  if (Buffer.isBuffer(value)) return JSON.parse(value.toString('utf8'));
  return value;
}

/** A job's log as stored (JSON `[{ at: epoch ms, message }]`, text or parsed) as `JobLogLine`s. */
export function readLogs(value: unknown): JobLogLine[] {
  const lines = readStoredJson(value);
  if (!Array.isArray(lines)) return [];
  return lines.map((line: { at: number; message: string }) => ({
    at: new Date(line.at),
    message: String(line.message),
  }));
}

/**
 * Checks a table prefix or schema name: letters, digits and `_`, starting with a letter or `_`,
 * at most `max` characters. Identifiers are interpolated into SQL, so nothing else gets in.
 */
export function assertIdentifier(
  value: string,
  field: string,
  options: { allowEmpty?: boolean; max?: number } = {},
): string {
  const max = options.max ?? 48;
  if (value === '' && options.allowEmpty) return value;
  if (typeof value !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(value) || value.length > max) {
    throw new ValidationError(
      field,
      `must be an identifier of letters, digits and _ (not starting with a digit, at most ${max} characters), got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/**
 * A job's step list as stored (JSON `[{ name, result, at: epoch ms, durationMs }]`, text or
 * parsed) as `JobStep`s; empty when none.
 */
export function readSteps(value: unknown): JobStep[] {
  if (value === null || value === undefined) return [];
  const steps = readStoredJson(value);
  if (!Array.isArray(steps)) return [];
  return steps.map((step: { name: string; result: unknown; at: number; durationMs: number }) => ({
    name: String(step.name),
    result: step.result === undefined ? null : step.result,
    at: new Date(step.at),
    durationMs: Number(step.durationMs) || 0,
  }));
}

/** `Job.steps` as stored (`saveSteps`' `stepsJson`). */
export function stepsJson(steps: readonly JobStep[]): string {
  return JSON.stringify(
    steps.map((step) => ({
      name: step.name,
      result: step.result,
      at: step.at.getTime(),
      durationMs: step.durationMs,
    })),
  );
}

/**
 * Payload copies `checkPayload` parsed from their JSON text, with that text. A store writes the
 * text without serialising the payload again, and gives the copy itself as the new job's
 * payload (`takeCheckedPayload`) instead of parsing the text back. Weak: a copy no store took is
 * collected with it.
 */
const CHECKED_PAYLOADS = new WeakMap<object, string>();

/** `copy` is `JSON.parse(text)`, made by the engine and held by nothing else. */
export function rememberPayloadText(copy: unknown, text: string): void {
  if (typeof copy === 'object' && copy !== null) CHECKED_PAYLOADS.set(copy, text);
}

/** The JSON text a store writes for `payload` (an undefined payload is JSON null). */
export function payloadJson(payload: unknown): string {
  if (typeof payload === 'object' && payload !== null) {
    const text = CHECKED_PAYLOADS.get(payload);
    if (text !== undefined) return text;
  }
  // JSON has no text for undefined (nor for a function): stored as null.
  return JSON.stringify(payload) ?? 'null';
}

/**
 * True when `payload` is a copy `checkPayload` made (so exactly what its JSON text reads back
 * as): the store may hand it out as the written job's payload. Forgotten from then on, so a
 * caller who changes it later gets it serialised anew.
 */
export function takeCheckedPayload(payload: unknown): boolean {
  return typeof payload === 'object' && payload !== null && CHECKED_PAYLOADS.delete(payload);
}

// ─── history records ─────────────────────────────────────────────────────────────────────────────
/*
 * History rules every store shares: how a handler's return value becomes the stored result
 * (JSON, capped), how a history record is built from a job, and the keyset cursor of
 * `admin.listHistory`. Stores only store what they are given.
 */

/** Largest stored result, in bytes of JSON text; a larger one is replaced by a marker. */
export const HISTORY_RESULT_MAX_BYTES = 64 * 1024;

/** Records deleted per pruning statement: short transactions, no long locks. */
export const HISTORY_PRUNE_BATCH = 1_000;

/**
 * The marker stored instead of a result that cannot be kept as it is — or not yet known
 * (`result-pending`: a child job completed in `ctx.transaction` whose handler has not returned;
 * replaced by what it returns, kept when its process died first).
 */
export interface HistoryResultMarker {
  $jobs: 'result-too-large' | 'result-not-json' | 'result-pending';
  /** Bytes of JSON of the result, when it could be serialised. */
  bytes?: number;
  limit?: number;
  /** Why it could not be serialised. */
  reason?: string;
}

/**
 * JSON text of a handler's return value as history stores it: null for `undefined`; a marker
 * when the value is not JSON every store keeps verbatim (what a payload may not be: functions,
 * `BigInt`, cycles, `Map`s and `Set`s, control characters or unpaired surrogates in strings…;
 * the marker's `reason` names the path) or its JSON is over `maxBytes`. Never throws: a result
 * never keeps a job from completing.
 */
export function historyResultJson(
  value: unknown,
  maxBytes: number = HISTORY_RESULT_MAX_BYTES,
): string | null {
  if (value === undefined) return null;
  let text: string;
  try {
    text = jsonText(value, 'result');
  } catch (error) {
    return marker({ $jobs: 'result-not-json', reason: (error as Error).message });
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) return marker({ $jobs: 'result-too-large', bytes, limit: maxBytes });
  return text;
}

function marker(value: HistoryResultMarker): string {
  return JSON.stringify(value);
}

/** Whether history set to `keep` records a job that ended with `outcome`. */
export function keepsOutcome(keep: HistoryKeep, outcome: HistoryOutcome): boolean {
  return keep === 'all' || (keep === 'failed' && outcome !== 'completed');
}

/** The history record of `job`, finished now with `outcome` (for stores that build it in code). */
export function toHistoryRecord(
  job: Job,
  outcome: HistoryOutcome,
  finishedAt: Date,
  resultJson: string | null | undefined,
  durationMs: number | null | undefined,
): JobHistoryRecord {
  return {
    ...job,
    state: 'finished',
    outcome,
    result: resultJson === null || resultJson === undefined ? null : JSON.parse(resultJson),
    finishedAt,
    durationMs: durationMs ?? null,
    // When its last run started, for a job that ended by running (a measured duration).
    startedAt: durationMs === null || durationMs === undefined ? null : (job.startedAt ?? null),
    lockExpiresAt: null,
    lockToken: null,
    suspendedFrom: null,
    // A finished job has no live request left (as the SQL stores' history reads it).
    cancelRequested: false,
  };
}

/** The opaque `listHistory` cursor pointing after `record`. */
export function historyCursor(record: Pick<JobHistoryRecord, 'finishedAt' | 'id'>): string {
  return Buffer.from(`${record.finishedAt.getTime()}:${record.id}`, 'utf8').toString('base64url');
}

/** Reads a cursor made by `historyCursor`; throws `ValidationError` on anything else. */
export function readHistoryCursor(
  cursor: string,
  field = 'cursor',
): { finishedAt: Date; id: string } {
  const text = typeof cursor === 'string' ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const match = /^(-?\d{1,16}):([0-9A-Za-z_-]{1,200})$/.exec(text);
  if (!match) throw new ValidationError(field, 'is not a cursor returned by listHistory');
  return { finishedAt: new Date(Number(match[1])), id: match[2] as string };
}
