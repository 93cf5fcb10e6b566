/**
 * What a request may carry: its path segments and the query parameters the pages read, checked
 * before anything is read from the store. A malformed one is the client's mistake (400 with a
 * message saying which and why), never a store error (500) or a silent fallback.
 */
import { HISTORY_OUTCOMES, JOB_STATES } from '@jobs/core';
import { isDoneCode } from './layout.js';

/** Longest name a store keeps (type, queue, scope, tenant, key), as `@jobs/core` checks them. */
export const MAX_NAME = 255;
/** Latest time a store's time column holds (the end of year 9999), as `@jobs/core` checks them. */
const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/** Largest `offset` a page link carries (offset paging of a store without keyset paging). */
const MAX_OFFSET = 1_000_000_000;

/**
 * What no store keeps in a name: C0 controls (NUL included: PostgreSQL refuses it) and DEL,
 * and unpaired UTF-16 surrogates — the rule `@jobs/core` applies at enqueue.
 */
const UNSTORABLE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are what it finds
  /[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why `value` is no name a job could have, or null when it could be one. */
export function nameProblem(value: string, max = MAX_NAME): string | null {
  if (value.length > max) return `is ${value.length} characters long; names have at most ${max}`;
  if (UNSTORABLE.test(value)) return 'holds a control character (NUL, newline, …)';
  return null;
}

const digits = (max: number) => (value: string) =>
  /^\d{1,10}$/.test(value) && Number(value) <= max
    ? null
    : `must be a whole number from 0 to ${max.toLocaleString('en-US')}`;

const oneOf = (allowed: readonly string[]) => (value: string) =>
  value === '' || allowed.includes(value) ? null : `must be one of ${allowed.join(', ')}`;

/**
 * `<finishedAt ms>.<id>`: the history page's keyset position. A job id of letters, digits, `_`
 * and `-` (every store's ids are), as the admin API's history cursor holds it.
 */
function cursorProblem(value: string): string | null {
  const match = /^(\d{1,15})\.([0-9A-Za-z_-]{1,200})$/.exec(value);
  const bad = 'must be <finished at, ms>.<job id>, as the "Older" link gives it';
  return !match || Number(match[1]) > LATEST_MS ? bad : null;
}

/** Query parameters the pages and the API read, and what each may hold. */
const PARAMS = new Map<string, (value: string) => string | null>([
  ['state', oneOf(JOB_STATES)],
  ['outcome', oneOf(HISTORY_OUTCOMES)],
  ['type', nameProblem],
  ['queue', nameProblem],
  ['scope', nameProblem],
  ['tenant', nameProblem],
  ['key', nameProblem],
  ['after', nameProblem],
  ['offset', digits(MAX_OFFSET)],
  ['cursor', cursorProblem],
  [
    'done',
    (value) => (value === '' || isDoneCode(value) ? null : 'names no notice of the dashboard'),
  ],
  ['n', digits(MAX_OFFSET)],
  ['running', digits(MAX_OFFSET)],
]);

/** Decodes one `name=value` part of a query or form; null when its percent-encoding is broken. */
function decodeComponent(text: string): string | null {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/**
 * Why the query or form text (`a=1&b=2`, without `?`) is malformed: broken percent-encoding
 * (`%zz`, bytes that are not UTF-8) or a known parameter holding what it cannot; null when fine.
 * Unknown parameters are let through (a link may carry its own).
 */
export function queryProblem(text: string): string | null {
  for (const part of text.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const name = decodeComponent(eq < 0 ? part : part.slice(0, eq));
    const value = decodeComponent(eq < 0 ? '' : part.slice(eq + 1));
    if (name === null || value === null) {
      return `the query parameter "${clipText(part)}" is not valid percent-encoded UTF-8`;
    }
    const check = PARAMS.get(name);
    const problem = check ? check(value) : null;
    if (problem !== null) return `the query parameter "${name}" ${problem}`;
  }
  return null;
}

/**
 * Why a path (under the dashboard's base) is malformed: a segment whose percent-encoding is
 * broken, or that decodes to what no id or name holds; null when fine.
 */
export function pathProblem(path: string): string | null {
  for (const segment of path.split('/')) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return `the path segment "${clipText(segment)}" is not valid percent-encoded UTF-8`;
    }
    const problem = nameProblem(decoded);
    if (problem !== null) return `the path segment "${clipText(segment)}" ${problem}`;
  }
  return null;
}

function clipText(text: string): string {
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}
