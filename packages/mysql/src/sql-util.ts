/**
 * Small helpers for building parameterised MySQL statements. Values always travel as `?`
 * parameters; only validated identifiers (table names) are interpolated.
 */
import type { JobFilter, JobState, SqlValue } from '@jobs/core';

/** `?, ?, ?` for `n` values. */
export function marks(n: number): string {
  return Array.from({ length: n }, () => '?').join(', ');
}

/**
 * A UTC `DATETIME(3)` literal: `2026-01-02 03:04:05.678`. The store writes times as text it
 * formats itself so that neither mysql2's `timezone` option nor the session time zone can
 * shift them.
 */
export function toSqlTime(date: Date): string {
  const iso = date.toISOString();
  if (!/^\d{4}-/.test(iso)) {
    throw new RangeError(`time ${iso} is outside the DATETIME range (years 1000-9999)`);
  }
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
}

/** Encoders for `newJobValues`. */
export const encodeValue = {
  time: (d: Date): SqlValue => toSqlTime(d),
  bool: (b: boolean): SqlValue => (b ? 1 : 0),
  // `undefined` is not JSON; store it as null, as the memory store does.
  json: (v: unknown): SqlValue => (v === undefined ? 'null' : JSON.stringify(v)),
};

/** `WHERE` conditions (joined with AND, never empty) and values for an admin filter. */
export function filterConditions(filter: JobFilter): { sql: string; values: unknown[] } {
  const parts: string[] = [];
  const values: unknown[] = [];
  if (filter.state !== undefined) {
    const states: readonly JobState[] =
      typeof filter.state === 'string' ? [filter.state] : filter.state;
    if (states.length === 0) parts.push('1 = 0');
    else {
      parts.push(`\`state\` IN (${marks(states.length)})`);
      values.push(...states);
    }
  }
  const equal: [keyof JobFilter, string][] = [
    ['type', 'type'],
    ['scope', 'scope'],
    ['tenantId', 'tenant_id'],
    ['queue', 'queue'],
    ['schedule', 'schedule_name'],
  ];
  for (const [field, column] of equal) {
    const value = filter[field];
    if (value !== undefined) {
      parts.push(`\`${column}\` = ?`);
      values.push(value);
    }
  }
  return { sql: parts.length > 0 ? parts.join(' AND ') : '1 = 1', values };
}

/** Ids are decimal strings of the auto-increment; anything else names no job. */
export function isJobId(id: string): boolean {
  return /^[1-9][0-9]{0,19}$/.test(id);
}
