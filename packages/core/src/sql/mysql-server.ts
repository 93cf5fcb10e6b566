/**
 * Which MySQL-family servers the SQL core runs on (`@jobs/mysql`, `@jobs/typeorm` on MySQL or
 * MariaDB). Acquisition needs `SELECT … FOR UPDATE SKIP LOCKED`, which MySQL has since 8.0
 * and MariaDB since 10.6; older servers would make acquirers queue behind each other's row
 * locks (or time out). Names compare exactly through a binary NO PAD collation (migration
 * 0010): MariaDB's `utf8mb4_nopad_bin` (10.2+), MySQL's `utf8mb4_0900_bin` (8.0.17+). A store
 * refuses older servers with a clear error instead.
 */
import { StoreError } from '../errors.js';
import { type MysqlDialect, parseServerVersion, type ServerVersion } from './dialects/mysql.js';
import { SharedUntilFailure } from './executor.js';

/** True when the server has `FOR UPDATE SKIP LOCKED`: MySQL 8.0+, MariaDB 10.6+. */
export function supportsSkipLocked(version: ServerVersion): boolean {
  if (version.flavor === 'mariadb') {
    return version.major > 10 || (version.major === 10 && version.minor >= 6);
  }
  return version.major >= 8;
}

/**
 * True when the server has a binary NO PAD collation for utf8mb4, so `invoice-7 ` and
 * `invoice-7` are different names: MySQL 8.0.17+ (`utf8mb4_0900_bin`), MariaDB 10.2+
 * (`utf8mb4_nopad_bin`).
 */
export function supportsExactNames(version: ServerVersion): boolean {
  if (version.flavor === 'mariadb') {
    return version.major > 10 || (version.major === 10 && version.minor >= 2);
  }
  return version.major > 8 || (version.major === 8 && (version.minor > 0 || version.patch >= 17));
}

/** Throws a `StoreError` naming the version when the server is too old; `label` names the package. */
export function assertSupportedServer(version: ServerVersion, label = '@jobs/mysql'): void {
  if (supportsSkipLocked(version) && supportsExactNames(version)) return;
  const name = version.flavor === 'mariadb' ? 'MariaDB' : 'MySQL';
  throw new StoreError(
    `[${label}] server ${name} ${version.major}.${version.minor}.${version.patch} (${version.raw}) is too old: ${label} needs MySQL 8.0.17+ or MariaDB 10.6+ (FOR UPDATE SKIP LOCKED, and a NO PAD binary collation so names compare exactly)`,
  );
}

/**
 * The server's version, read once on first use (again after a failed read: the server was
 * down), checked (`assertSupportedServer`) and told to the dialect, which picks its
 * statements by it.
 */
export class MysqlServerCheck {
  private readonly version: SharedUntilFailure<ServerVersion>;

  /** `read` returns what `SELECT VERSION()` says. */
  constructor(read: () => Promise<string>, dialect: MysqlDialect, label: string) {
    this.version = new SharedUntilFailure(async () => {
      const version = parseServerVersion(await read());
      assertSupportedServer(version, label);
      dialect.useServer(version);
      return version;
    });
  }

  serverVersion(): Promise<ServerVersion> {
    return this.version.get();
  }
}
