/** Plain-text output: aligned tables, short durations, times relative to the store's now. */

// Durations, relative times, scope limits and waits read as on the dashboard: one formatter for both.
import {
  type ScopeLimited,
  scopeLimitOf,
  scopeLimitText,
  inZone as zonedText,
} from '@jobs/dashboard/text';

export { duration, jobWait, relativeText as relative, shellWord } from '@jobs/dashboard/text';

/** Columns whose cells are right-aligned (counts). */
export interface TableOptions {
  right?: readonly number[];
}

/** An aligned table with a header row; cells are single lines. */
export function table(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  options: TableOptions = {},
): string {
  const right = new Set(options.right ?? []);
  const widths = headers.map((header, i) =>
    Math.max(header.length, ...rows.map((row) => (row[i] ?? '').length)),
  );
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) =>
        right.has(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0),
      )
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** A cell: one line, at most `max` characters, `-` for nothing. */
export function cell(value: string | number | null | undefined, max = 40): string {
  if (value === null || value === undefined || value === '') return '-';
  const text = String(value).replace(/\s+/g, ' ').trim();
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * A job's scope with its limit: `acct-1 (limit 2)`, `acct-1 (exclusive)`, `acct-1` without a
 * limit, `-` without a scope. The name is clipped to `max` characters; the limit never is.
 */
export function scopeCell(
  job: ScopeLimited & { scope: string | null },
  max = Number.POSITIVE_INFINITY,
): string {
  if (job.scope === null) return '-';
  const limit = scopeLimitText(job);
  return limit === null ? cell(job.scope, max) : `${cell(job.scope, max)} (${limit})`;
}

/** A job for `--json`: `scopeLimit` always set, 1 when exclusive, null without a limit. */
export function withScopeLimit<T extends ScopeLimited>(job: T): T & { scopeLimit: number | null } {
  return { ...job, scopeLimit: scopeLimitOf(job) };
}

/** `2025-03-01 14:05:09Z`: UTC, to the second. */
export function utc(date: Date): string {
  return `${date.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/** `2025-03-01 03:00:00 GMT+1` in the time zone `timeZone` (an IANA name). */
export function inZone(date: Date, timeZone: string): string {
  return zonedText(date, timeZone, 'offset');
}

/** `1 job`, `3 jobs`. */
export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
