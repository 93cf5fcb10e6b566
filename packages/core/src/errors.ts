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
  | 'CANCELLED';

export class JobsError extends Error {
  readonly code: JobsErrorCode;

  constructor(code: JobsErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'JobsError';
    this.code = code;
  }
}

/** Bad input: an option, a payload, a cron expression. Nothing was written. */
export class ValidationError extends JobsError {
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
  readonly jobId: string;

  constructor(jobId: string) {
    super('CANCELLED', `job ${jobId} was cancelled`);
    this.name = 'CancelledError';
    this.jobId = jobId;
  }
}

/** A store could not do what was asked; `cause` holds the driver's error. */
export class StoreError extends JobsError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STORE', message, options);
    this.name = 'StoreError';
  }
}

/** The job or schedule asked for does not exist. */
export class NotFoundError extends JobsError {
  constructor(message: string) {
    super('NOT_FOUND', message);
    this.name = 'NotFoundError';
  }
}

/** The job is not in a state that allows the operation (e.g. retrying a job that is running). */
export class InvalidStateError extends JobsError {
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
