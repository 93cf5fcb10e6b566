/**
 * Which servers the store runs on. Acquisition needs `SELECT … FOR UPDATE SKIP LOCKED`, which
 * MySQL has since 8.0 and MariaDB since 10.6; older servers would make acquirers queue behind
 * each other's row locks (or time out), so the store refuses them with a clear error instead.
 */
import { StoreError } from '@jobs/core';
import type { ServerVersion } from '@jobs/core/sql';

export { parseServerVersion, type ServerVersion } from '@jobs/core/sql';

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
