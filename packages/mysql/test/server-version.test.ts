import { StoreError } from '@jobs/core';
import { backoffMs, parseMigration } from '@jobs/core/sql';
import { describe, expect, it } from 'vitest';
import {
  assertSupportedServer,
  parseServerVersion,
  supportsExactNames,
  supportsSkipLocked,
} from '../src/index.js';

describe('parseServerVersion', () => {
  it.each([
    ['8.0.36', 'mysql', 8, 0, 36],
    ['8.4.0-log', 'mysql', 8, 4, 0],
    ['8.0.35-27', 'mysql', 8, 0, 35],
    ['5.7.44-log', 'mysql', 5, 7, 44],
    ['10.11.19-MariaDB-0+deb12u1', 'mariadb', 10, 11, 19],
    ['5.5.5-10.6.12-MariaDB', 'mariadb', 10, 6, 12],
    ['11.4.2-MariaDB-ubu2404', 'mariadb', 11, 4, 2],
    ['10.5.23-MariaDB-log', 'mariadb', 10, 5, 23],
    ['9.1', 'mysql', 9, 1, 0],
  ] as const)('reads %s as %s %i.%i.%i', (raw, flavor, major, minor, patch) => {
    expect(parseServerVersion(raw)).toEqual({ flavor, major, minor, patch, raw });
  });

  it('throws a StoreError quoting text it cannot read', () => {
    expect(() => parseServerVersion('unknown')).toThrow(StoreError);
    expect(() => parseServerVersion('unknown')).toThrow(/"unknown"/);
  });
});

describe('assertSupportedServer', () => {
  it.each([
    '8.0.17',
    '8.1.0',
    '8.4.0',
    '9.1',
    '10.6.0-MariaDB',
    '10.11.19-MariaDB-0+deb12u1',
    '11.0.2-MariaDB',
  ])('accepts %s (has SKIP LOCKED and a NO PAD binary collation)', (raw) => {
    const version = parseServerVersion(raw);
    expect(supportsSkipLocked(version)).toBe(true);
    expect(supportsExactNames(version)).toBe(true);
    expect(() => assertSupportedServer(version)).not.toThrow();
  });

  it.each([
    ['5.7.44-log', /MySQL 5\.7\.44/],
    ['5.5.5-10.5.9-MariaDB', /MariaDB 10\.5\.9/],
    ['10.3.39-MariaDB', /MariaDB 10\.3\.39/],
  ])('rejects %s with an error naming the version', (raw, pattern) => {
    const version = parseServerVersion(raw);
    expect(supportsSkipLocked(version)).toBe(false);
    expect(() => assertSupportedServer(version)).toThrow(StoreError);
    expect(() => assertSupportedServer(version)).toThrow(pattern);
    expect(() => assertSupportedServer(version)).toThrow(/MySQL 8\.0\.17\+ or MariaDB 10\.6\+/);
  });

  it('rejects MySQL 8.0 before 8.0.17: it has SKIP LOCKED but no NO PAD binary collation', () => {
    const version = parseServerVersion('8.0.16');
    expect(supportsSkipLocked(version)).toBe(true);
    expect(supportsExactNames(version)).toBe(false);
    expect(() => assertSupportedServer(version)).toThrow(
      /MySQL 8\.0\.16 .*NO PAD binary collation/,
    );
  });
});

describe('migration files and backoff', () => {
  it('the migration loader drops comment lines and splits on a trailing semicolon', () => {
    const text =
      '-- a comment; with a semicolon\nCREATE TABLE a (\n  x INT\n);\n\n-- b\nCREATE TABLE b (y INT);\n';
    expect(parseMigration('0001_test', text, {}).statements).toEqual([
      'CREATE TABLE a (\n  x INT\n)',
      'CREATE TABLE b (y INT)',
    ]);
  });

  it('backoff grows, stays jittered within [ceiling/2, ceiling] and is capped at 250 ms', () => {
    expect(backoffMs(1, () => 0)).toBe(1);
    expect(backoffMs(1, () => 1)).toBe(2);
    expect(backoffMs(5, () => 0)).toBe(16);
    expect(backoffMs(5, () => 1)).toBe(32);
    expect(backoffMs(20, () => 1)).toBe(250);
  });
});
