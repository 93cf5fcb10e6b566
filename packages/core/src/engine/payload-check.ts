/**
 * Payload checks: a job's payload (and a handler's progress value, and a schedule's payload)
 * must read back from every store exactly as given, so it is serialised once here and refused
 * with the path of what JSON would drop or change, or no store would keep.
 */
import { ValidationError } from '../errors.js';
import { rememberPayloadText } from '../store-support.js';

/** Deepest nesting of a payload every store's JSON column holds (MySQL's limit is 100). */
export const MAX_PAYLOAD_DEPTH = 64;
/** The same, but a JSON string may hold tab, newline and carriage return. */
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
