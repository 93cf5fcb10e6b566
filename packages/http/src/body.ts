/**
 * Request bodies: JSON objects only, read up to a size limit (413 beyond it, before the rest is
 * read), malformed JSON refused with 400, and the fields checked with messages naming them.
 */
import { ProblemError } from './problems.js';

/** Largest request body read by default: 1 MiB (a result or an error stack fits easily). */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** A request as the API reads it: from a fetch `Request` or straight from node's. */
export interface Incoming {
  method: string;
  /** The path below the API's base path, e.g. `/acquire`. */
  path: string;
  /** The base path the API is served under, as requested (for the OpenAPI document). */
  base: string;
  header(name: string): string | null;
  /** The body's text, refused with 413 past `maxBytes` (before the rest is read). */
  text(maxBytes: number): Promise<string>;
  /** Aborts when the client went away. */
  signal: AbortSignal | null;
}

/** The body of a fetch `Request`, read up to `maxBytes`. */
export async function readRequestText(request: Request, maxBytes: number): Promise<string> {
  const declared = Number(request.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);
  if (request.body === null) return '';
  const reader = request.body.getReader();
  const decoder = new TextDecoder();
  let size = 0;
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    text += decoder.decode(value, { stream: true });
  }
  return text + decoder.decode();
}

/** Reads the request's body as a JSON object of at most `maxBytes` bytes. */
export async function readJsonBody(
  request: Incoming,
  maxBytes: number,
): Promise<Record<string, unknown>> {
  const type = request.header('content-type');
  if (type !== null && !/^application\/(.+\+)?json\s*(;|$)/i.test(type)) {
    throw new ProblemError(
      'unsupported-media-type',
      `send the body as JSON (content-type: application/json), not ${type.slice(0, 100)}`,
    );
  }
  const text = await request.text(maxBytes);
  if (text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ProblemError(
      'bad-request',
      `the body is not valid JSON: ${(error as Error).message}`,
    );
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ProblemError('bad-request', 'the body must be a JSON object');
  }
  return parsed as Record<string, unknown>;
}

export function tooLarge(maxBytes: number): ProblemError {
  return new ProblemError('payload-too-large', `the body is larger than ${maxBytes} bytes`);
}

/** Refuses fields the operation does not know (a typo must not be ignored silently). */
export function knownFields(body: Record<string, unknown>, fields: readonly string[]): void {
  for (const name of Object.keys(body)) {
    if (!fields.includes(name)) {
      throw new ProblemError(
        'bad-request',
        `unknown field "${name.slice(0, 64)}" (expected ${fields.join(', ')})`,
      );
    }
  }
}

/** A whole number in [min, max], or `fallback` when absent. */
export function intField(
  body: Record<string, unknown>,
  name: string,
  min: number,
  max: number,
  fallback: number,
): number {
  const value = body[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new ProblemError('bad-request', `"${name}" must be a whole number from ${min} to ${max}`);
  }
  return value;
}

/** A non-empty string of at most `max` characters; absent → `fallback` (or 400 when none). */
export function stringField(
  body: Record<string, unknown>,
  name: string,
  max: number,
  fallback?: string,
): string {
  const value = body[name];
  if ((value === undefined || value === null) && fallback !== undefined) return fallback;
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new ProblemError('bad-request', `"${name}" must be a string of 1 to ${max} characters`);
  }
  return value;
}

export function boolField(body: Record<string, unknown>, name: string): boolean {
  const value = body[name];
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean')
    throw new ProblemError('bad-request', `"${name}" must be true or false`);
  return value;
}
