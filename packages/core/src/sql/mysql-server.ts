/**
 * Which MySQL-family servers the SQL core runs on (`@jobs/mysql`, `@jobs/typeorm` on MySQL or
 * MariaDB). Acquisition needs `SELECT … FOR UPDATE SKIP LOCKED`, which MySQL has since 8.0
 * and MariaDB since 10.6; older servers would make acquirers queue behind each other's row
 * locks (or time out), so a store refuses them with a clear error instead.
 */
import { StoreError } from '../errors.js';
import { type MysqlDialect, parseServerVersion, type ServerVersion } from './dialects/mysql.js';
import { SharedUntilFailure } from './pool-lifecycle.js';

/** True when the server has `FOR UPDATE SKIP LOCKED`: MySQL 8.0+, MariaDB 10.6+. */
export function supportsSkipLocked(version: ServerVersion): boolean {
  if (version.flavor === 'mariadb') {
    return version.major > 10 || (version.major === 10 && version.minor >= 6);
  }
  return version.major >= 8;
}

/** Throws a `StoreError` naming the version when the server is too old; `source` names the package. */
export function assertSupportedServer(version: ServerVersion, source = '@jobs/mysql'): void {
  if (supportsSkipLocked(version)) return;
  const name = version.flavor === 'mariadb' ? 'MariaDB' : 'MySQL';
  throw new StoreError(
    `[${source}] server ${name} ${version.major}.${version.minor}.${version.patch} (${version.raw}) is too old: ${source} needs MySQL 8.0+ or MariaDB 10.6+ (FOR UPDATE SKIP LOCKED)`,
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
  constructor(read: () => Promise<string>, dialect: MysqlDialect, source: string) {
    this.version = new SharedUntilFailure(async () => {
      const version = parseServerVersion(await read());
      assertSupportedServer(version, source);
      dialect.useServer(version);
      return version;
    });
  }

  serverVersion(): Promise<ServerVersion> {
    return this.version.get();
  }
}
