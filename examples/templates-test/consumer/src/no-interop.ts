/**
 * Every published entry point's types, compiled without `esModuleInterop` (see
 * tsconfig.no-interop.json): a declaration file of ours that default-imports a CommonJS module
 * (`import pg from 'pg'`) fails here. @jobs/conformance is ESM only (as vitest is): not here.
 */
import type { JobEngine, JobStore, MigrationResult } from '@jobs/core';
import type { SqlJobStore } from '@jobs/core/sql';
import type { Dashboard } from '@jobs/dashboard';
import type { MysqlJobStore, MysqlJobStoreOptions } from '@jobs/mysql';
import type { instrument } from '@jobs/otel';
import type { PostgresJobStore, PostgresJobStoreOptions } from '@jobs/postgres';
import type { SqliteDatabase, SqliteJobStore } from '@jobs/sqlite';
import type { TypeormJobStore } from '@jobs/typeorm';

export interface EveryPackage {
  engine: JobEngine;
  store: JobStore;
  // biome-ignore lint/suspicious/noConfusingVoidType: JobStore.migrate()'s own result type
  migrated: MigrationResult | void;
  sql: SqlJobStore;
  dashboard: Dashboard;
  mysql: MysqlJobStore;
  mysqlPool: MysqlJobStoreOptions['pool'];
  instrument: typeof instrument;
  postgres: PostgresJobStore;
  pgPool: PostgresJobStoreOptions['pool'];
  sqlite: SqliteJobStore;
  sqliteDb: SqliteDatabase;
  typeorm: TypeormJobStore;
}
