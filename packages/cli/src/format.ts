/** Plain-text output: aligned tables, short durations, times relative to the store's now. */

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

const UNITS: readonly (readonly [string, number])[] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
];

/** `1h 5m`, `3m 12s`, `45s`, `850ms`: the largest unit and the next one. */
export function duration(ms: number): string {
  const abs = Math.abs(Math.round(ms));
  const i = UNITS.findIndex(([, size]) => abs >= size);
  const first = UNITS[i];
  if (!first) return `${abs}ms`;
  const n = Math.floor(abs / first[1]);
  const next = UNITS[i + 1];
  const m = next ? Math.floor((abs - n * first[1]) / next[1]) : 0;
  return next && m > 0 ? `${n}${first[0]} ${m}${next[0]}` : `${n}${first[0]}`;
}

/** `in 5m 3s`, `3m 12s ago` or `now` (within a second), relative to `now`. */
export function relative(date: Date, now: number): string {
  const delta = date.getTime() - now;
  if (Math.abs(delta) < 1000) return 'now';
  return delta > 0 ? `in ${duration(delta)}` : `${duration(delta)} ago`;
}

/** `2025-03-01 14:05:09Z`: UTC, to the second. */
export function utc(date: Date): string {
  return `${date.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/** `2025-03-01 03:00:00 GMT+1` in the time zone `timeZone` (an IANA name). */
export function inZone(date: Date, timeZone: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
      timeZoneName: 'short',
    })
      .formatToParts(date)
      .map((part) => [part.type, part.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${parts.timeZoneName}`;
}

/** `1 job`, `3 jobs`. */
export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
