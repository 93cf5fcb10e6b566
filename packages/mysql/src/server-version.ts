/**
 * Which servers the store runs on. Acquisition needs `SELECT … FOR UPDATE SKIP LOCKED`, which
 * MySQL has since 8.0 and MariaDB since 10.6; older servers would make acquirers queue behind
 * each other's row locks (or time out), so the store refuses them with a clear error instead.
 */
import { StoreError } from '@jobs/core';

/** A parsed `SELECT VERSION()`. */
export interface ServerVersion {
  flavor: 'mysql' | 'mariadb';
  major: number;
  minor: number;
  patch: number;
  /** The text the server reported. */
  raw: string;
}

/**
 * Parses what `SELECT VERSION()` returns, e.g. `8.0.36`, `8.4.0-log`, `10.11.19-MariaDB-0+deb12u1`
 * or the replication-compatible `5.5.5-10.6.12-MariaDB`.
 *
 * @example
 * parseServerVersion('10.11.19-MariaDB-0+deb12u1'); // { flavor: 'mariadb', major: 10, minor: 11, patch: 19, … }
 */
export function parseServerVersion(raw: string): ServerVersion {
  const text = String(raw).trim();
  const flavor = /mariadb/i.test(text) ? 'mariadb' : 'mysql';
  // MariaDB may prefix its real version with `5.5.5-` so that old MySQL clients accept it.
  const version = flavor === 'mariadb' ? text.replace(/^5\.5\.5-/, '') : text;
  const match = /^(\d+)\.(\d+)(?:\.(\d+))?/.exec(version);
  if (!match) {
    throw new StoreError(
      `[@jobs/mysql] cannot read the server version from ${JSON.stringify(text)}`,
    );
  }
  return {
    flavor,
    major: Number(match[1]),
    minor: Number(match[2]),
    patch: Number(match[3] ?? 0),
    raw: text,
  };
}

/** True when the server has `FOR UPDATE SKIP LOCKED`: MySQL 8.0+, MariaDB 10.6+. */
export function supportsSkipLocked(version: ServerVersion): boolean {
  if (version.flavor === 'mariadb') {
    return version.major > 10 || (version.major === 10 && version.minor >= 6);
  }
  return version.major >= 8;
}

/** Throws a `StoreError` naming the version when the server is too old for this store. */
export function assertSupportedServer(version: ServerVersion): void {
  if (supportsSkipLocked(version)) return;
  const name = version.flavor === 'mariadb' ? 'MariaDB' : 'MySQL';
  throw new StoreError(
    `[@jobs/mysql] server ${name} ${version.major}.${version.minor}.${version.patch} (${version.raw}) is too old: @jobs/mysql needs MySQL 8.0+ or MariaDB 10.6+ (FOR UPDATE SKIP LOCKED)`,
  );
}
