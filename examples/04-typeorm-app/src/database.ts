/**
 * Where the shop keeps its data, from one string (the `DATABASE_URL` of `main.ts`):
 *
 *   postgres://user:password@host:5432/shop   PostgreSQL
 *   mysql://user:password@host:3306/shop      MySQL
 *   mariadb://user:password@host:3306/shop    MariaDB
 *   anything else                             the path of a SQLite file (better-sqlite3)
 *
 * The database must exist; the app's migrations create the tables in it.
 */
import type { DataSourceOptions } from 'typeorm';

/** The TypeORM drivers the shop runs on; `jobsEntities` takes the same names. */
export type DatabaseType = 'postgres' | 'mysql' | 'mariadb' | 'better-sqlite3';

/** Which driver a database string selects. */
export function databaseType(database: string): DatabaseType {
  if (/^postgres(ql)?:\/\//.test(database)) return 'postgres';
  if (database.startsWith('mysql://')) return 'mysql';
  // TypeORM reads MariaDB's catalog correctly only with type 'mariadb'.
  if (database.startsWith('mariadb://')) return 'mariadb';
  return 'better-sqlite3';
}

/** DataSource options for a database string, without entities and migrations. */
export function connectionOptions(database: string): DataSourceOptions {
  const type = databaseType(database);
  if (type === 'better-sqlite3') return { type, database, enableWAL: true };
  // The MySQL driver parses the URL itself, whatever its scheme says.
  return { type, url: database };
}
