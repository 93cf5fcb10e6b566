/**
 * Payload checks: a job's payload (and a handler's progress value) must read back from every
 * store exactly as given, so it is serialised once here and refused with the path of what no
 * store would keep.
 */
import { ValidationError } from '../errors.js';

/** Deepest nesting of a payload every store's JSON column holds (MySQL's limit is 100). */
export const MAX_PAYLOAD_DEPTH = 64;
/** The same, but a JSON string may hold tab, newline and carriage return. */
export const UNSTORABLE_IN_JSON =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are what it finds
  /[\u0000-\u0008\u000b\u000c\u000e-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Serialises the payload once, to prove every store reads it back as given, and to measure
 * it: no functions, symbols, `NaN` or `Infinity` (JSON would drop them or turn them into
 * null), no NUL or unpaired surrogates in strings or keys, at most `MAX_PAYLOAD_DEPTH` deep.
 * Errors name the path, e.g. `payload.items.3.price`.
 */
export function checkPayload(payload: unknown, maxBytes: number, field = 'payload'): unknown {
  if (payload === undefined) return null;
  // Most payloads are plain JSON data: proven so by a walk, they need no replacer (a call per
  // value, a path string per key: most of what a bulk enqueue spent in the engine).
  const text = isPlainJson(payload, 0) ? JSON.stringify(payload) : serialise(payload, field);
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
 * True when JSON keeps `value` exactly as it is: null, booleans, finite numbers, strings and
 * plain objects and arrays of them (no `toJSON`, no holes), nothing a store could not hold, at
 * most `MAX_PAYLOAD_DEPTH` deep. False is no verdict: `serialise` then decides, with the path.
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

/** `JSON.stringify` with a replacer that refuses, with its path, what no store keeps. */
function serialise(payload: unknown, field: string): string {
  let text: string | undefined;
  // Path and depth of every object and array on the way down, keyed by the object itself.
  const paths = new WeakMap<object, { path: string; depth: number }>();
  try {
    text = JSON.stringify(payload, function (this: unknown, key, value: unknown) {
      const parent = (this !== null && typeof this === 'object' && paths.get(this)) || {
        path: field,
        depth: 0,
      };
      const path = key === '' ? field : `${parent.path}.${key}`;
      if (typeof value === 'function' || typeof value === 'symbol') {
        throw new ValidationError(path, `is a ${typeof value}, which is not JSON-serialisable`);
      }
      if (typeof value === 'number' && !Number.isFinite(value)) {
        throw new ValidationError(
          path,
          `is ${value}, which JSON cannot hold (it would become null)`,
        );
      }
      if (typeof value === 'string' && UNSTORABLE_IN_JSON.test(value)) {
        throw new ValidationError(
          path,
          'holds a control character (NUL, …) or an unpaired surrogate, which not every database stores',
        );
      }
      if (key !== '' && UNSTORABLE_IN_JSON.test(key)) {
        throw new ValidationError(path, 'has a key with a control character or unpaired surrogate');
      }
      if (value !== null && typeof value === 'object') {
        const depth = parent.depth + 1;
        if (depth > MAX_PAYLOAD_DEPTH) {
          throw new ValidationError(path, `is nested deeper than ${MAX_PAYLOAD_DEPTH} levels`);
        }
        paths.set(value, { path, depth });
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
  return text;
}
