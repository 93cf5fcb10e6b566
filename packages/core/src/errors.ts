/**
 * Every error @jobs throws is a `JobsError` with a stable `code` and, where it wraps another
 * error, the original in `cause`.
 */
export type JobsErrorCode =
  | 'VALIDATION'
  | 'LOCK_LOST'
  | 'UNRECOVERABLE'
  | 'STORE'
  | 'NOT_FOUND'
  | 'INVALID_STATE'
  | 'STOPPED'
  | 'TIMEOUT'
  | 'CANCELLED'
  | 'SCHEMA'
  | 'FAILED';

/**
 * The brand each error class of @jobs puts on its prototype: the class's name. `Symbol.for`
 * gives every copy of this package the same symbol, so an error made by one copy (the CJS build
 * beside the ESM one, or two versions in one app) is recognised by another.
 */
const BRAND = Symbol.for('@jobs/core:error');

interface Branded {
  readonly [BRAND]?: string;
}

/** Whether `value` is an error whose class, or a class it extends, carries `brand`. */
function hasBrand(value: unknown, brand: string): boolean {
  if (value === null || typeof value !== 'object') return false;
  for (let proto = Object.getPrototypeOf(value); proto !== null; ) {
    if (Object.hasOwn(proto, BRAND) && (proto as Branded)[BRAND] === brand) return true;
    proto = Object.getPrototypeOf(proto);
  }
  return false;
}

/** `value instanceof type` by prototype, or else by brand when `type` is one of ours. */
function isInstance(type: { prototype: unknown }, value: unknown): boolean {
  if (Function.prototype[Symbol.hasInstance].call(type, value)) return true;
  // Only our own classes are branded: a user's subclass must not match every error of ours.
  const prototype = type.prototype as Branded;
  return Object.hasOwn(prototype, BRAND) && hasBrand(value, prototype[BRAND] as string);
}

/** Brands the prototype of one of our error classes with its name (see `BRAND`). */
function brand(type: { prototype: object }, name: string): void {
  Object.defineProperty(type.prototype, BRAND, { value: name });
}

/**
 * Every error @jobs throws. `instanceof` (on this class and each subclass) also recognises the
 * errors of another copy of `@jobs/core` by their brand, so a handler's `UnrecoverableError`
 * from the CJS build is unrecoverable to an engine from the ESM build. A class of your own
 * extending one of these is recognised the ordinary way (by its prototype).
 *
 * @example
 * if (error instanceof JobsError && error.code === 'NOT_FOUND') return null;
 */
export class JobsError extends Error {
  static {
    brand(JobsError, 'JobsError');
  }

  readonly code: JobsErrorCode;

  constructor(code: JobsErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'JobsError';
    this.code = code;
  }

  static override [Symbol.hasInstance]<T>(this: { prototype: T }, value: unknown): value is T {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class right of `instanceof`
    return isInstance(this, value);
  }
}

/** Bad input: an option, a payload, a cron expression. Nothing was written. */
export class ValidationError extends JobsError {
  static {
    brand(ValidationError, 'ValidationError');
  }

  /** The option or field that was wrong, e.g. `runAt` or `payload.to`. */
  readonly field: string;

  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super('VALIDATION', `${field}: ${message}`, options);
    this.name = 'ValidationError';
    this.field = field;
  }
}

/**
 * The caller no longer holds the job: its lease expired and someone else may have it, or the
 * fencing token is stale. Whatever the caller wanted to write was not written.
 */
export class LockLostError extends JobsError {
  static {
    brand(LockLostError, 'LockLostError');
  }

  readonly jobId: string;

  constructor(jobId: string, message?: string) {
    super('LOCK_LOST', message ?? `lease of job ${jobId} was lost (stale fencing token)`);
    this.name = 'LockLostError';
    this.jobId = jobId;
  }
}

/**
 * Throw from a handler to send the job straight to the dead-letter area, whatever retries it
 * has left.
 *
 * @example
 * if (!user) throw new UnrecoverableError(`user ${id} does not exist`);
 */
export class UnrecoverableError extends JobsError {
  static {
    brand(UnrecoverableError, 'UnrecoverableError');
  }

  constructor(message: string, options?: { cause?: unknown }) {
    super('UNRECOVERABLE', message, options);
    this.name = 'UnrecoverableError';
  }
}

/**
 * An operator cancelled the job (`engine.admin.cancel`): the reason `ctx.signal` aborts with
 * when the owner's lease renewal answers "cancel". The job ends `cancelled`, never retried,
 * whatever the handler does next.
 *
 * @example
 * handlers: { report: async (job, ctx) => {
 *   for (const page of pages) {
 *     ctx.signal.throwIfAborted(); // throws the CancelledError once cancelled
 *     await render(page);
 *   }
 * } }
 */
export class CancelledError extends JobsError {
  static {
    brand(CancelledError, 'CancelledError');
  }

  readonly jobId: string;

  constructor(jobId: string) {
    super('CANCELLED', `job ${jobId} was cancelled`);
    this.name = 'CancelledError';
    this.jobId = jobId;
  }
}

/**
 * A run took longer than its time limit (`timeoutMs` of the job or its type): the reason
 * `ctx.signal` aborts with, and the error its attempt fails with (retried as any failure).
 */
export class JobTimeoutError extends JobsError {
  readonly jobId: string;
  readonly timeoutMs: number;

  constructor(jobId: string, timeoutMs: number) {
    super('TIMEOUT', `job ${jobId} ran longer than its time limit of ${timeoutMs} ms`);
    this.name = 'JobTimeoutError';
    this.jobId = jobId;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A job whose result was awaited (`engine.result`) did not complete: it ended in the dead-letter
 * area (its handler failed for good) or was cancelled. `error` is its last error, if any.
 */
export class JobFailedError extends JobsError {
  readonly jobId: string;
  readonly outcome: 'deadletter' | 'cancelled';
  readonly error: { message: string; stack: string | null } | null;

  constructor(
    jobId: string,
    outcome: 'deadletter' | 'cancelled',
    error: { message: string; stack: string | null } | null,
  ) {
    super(
      'FAILED',
      outcome === 'cancelled'
        ? `job ${jobId} was cancelled`
        : `job ${jobId} failed for good (dead-letter area)${error ? `: ${error.message}` : ''}`,
    );
    this.name = 'JobFailedError';
    this.jobId = jobId;
    this.outcome = outcome;
    this.error = error;
  }
}

/**
 * A child job awaited with `ctx.run` did not complete: it ended in the dead-letter area
 * (`outcome` `deadletter`, its last error in `lastError`), was cancelled (`cancelled`), or left
 * the store with no outcome recorded anywhere (`unknown`: deleted by an operator, or finished
 * while history kept nothing and its result never reached the parent), or completed in
 * `ctx.transaction` but its result was lost with its process (`lost`: the process died, or its
 * handler did not return within a lease of the commit). Thrown from `ctx.run`,
 * so the parent's code decides: catch it and go on, or let the parent's attempt fail.
 *
 * @example
 * try {
 *   await ctx.run('label', 'make-label', { id });
 * } catch (error) {
 *   if (!(error instanceof ChildJobError)) throw error;
 *   await ctx.step('manual-label', () => ticket(id, error.lastError?.message));
 * }
 */
export class ChildJobError extends JobsError {
  static {
    brand(ChildJobError, 'ChildJobError');
  }

  readonly childId: string;
  readonly outcome: 'deadletter' | 'cancelled' | 'unknown' | 'lost';
  readonly lastError: { message: string; stack: string | null } | null;

  constructor(
    childId: string,
    outcome: 'deadletter' | 'cancelled' | 'unknown' | 'lost',
    lastError: { message: string; stack: string | null } | null = null,
  ) {
    super('FAILED', childMessage(childId, outcome, lastError));
    this.name = 'ChildJobError';
    this.childId = childId;
    this.outcome = outcome;
    this.lastError = lastError;
  }
}

function childMessage(
  childId: string,
  outcome: 'deadletter' | 'cancelled' | 'unknown' | 'lost',
  lastError: { message: string } | null,
): string {
  if (outcome === 'cancelled') return `child job ${childId} was cancelled`;
  if (outcome === 'unknown') {
    return `child job ${childId} is gone and no outcome of it was recorded (deleted, or finished with history off before its result reached the parent)`;
  }
  if (outcome === 'lost') {
    return `child job ${childId} completed in ctx.transaction, but its result was lost with its process (it died, or its handler did not return within a lease of the commit)`;
  }
  return `child job ${childId} failed for good (dead-letter area)${lastError ? `: ${lastError.message}` : ''}`;
}

/** A store could not do what was asked; `cause` holds the driver's error. */
export class StoreError extends JobsError {
  static {
    brand(StoreError, 'StoreError');
  }

  constructor(message: string, options?: { cause?: unknown }) {
    super('STORE', message, options);
    this.name = 'StoreError';
  }
}

/** The job or schedule asked for does not exist. */
export class NotFoundError extends JobsError {
  static {
    brand(NotFoundError, 'NotFoundError');
  }

  constructor(message: string) {
    super('NOT_FOUND', message);
    this.name = 'NotFoundError';
  }
}

/** The job is not in a state that allows the operation (e.g. retrying a job that is running). */
export class InvalidStateError extends JobsError {
  static {
    brand(InvalidStateError, 'InvalidStateError');
  }

  constructor(message: string) {
    super('INVALID_STATE', message);
    this.name = 'InvalidStateError';
  }
}

/** Turns anything thrown into the `{ message, stack }` a job keeps as its last error. */
export function toJobError(error: unknown): { message: string; stack: string | null } {
  if (error instanceof Error) {
    return recordableError(error.message || error.name, error.stack ?? null);
  }
  return recordableError(typeof error === 'string' ? error : safeString(error), null);
}

/** Longest error message a job keeps, in UTF-16 units (every store's text column holds it). */
export const MAX_ERROR_MESSAGE_LENGTH = 4_000;
/** Longest error stack a job keeps, in UTF-16 units. */
export const MAX_ERROR_STACK_LENGTH = 16_000;

/**
 * An error as every store can record it (DESIGN invariant 17): NUL and other control
 * characters a text column may refuse are removed (tab and newline kept), lone surrogates
 * replaced, and the text capped with a note saying how much was cut. A handler's error can
 * never make a job's settlement fail.
 */
export function recordableError(
  message: string,
  stack: string | null,
): { message: string; stack: string | null } {
  return {
    message: recordableText(message, MAX_ERROR_MESSAGE_LENGTH) || 'Error',
    stack: stack === null ? null : recordableText(stack, MAX_ERROR_STACK_LENGTH),
  };
}

function recordableText(text: string, max: number): string {
  const clean = String(text)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '')
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
  if (clean.length <= max) return clean;
  const note = `… [${clean.length - max} more characters cut]`;
  let cut = clean.slice(0, max - note.length);
  // Never end on half of a surrogate pair.
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return cut + note;
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
