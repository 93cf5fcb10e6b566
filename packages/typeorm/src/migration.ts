/**
 * The store's schema as a TypeORM migration, for apps that run `dataSource.runMigrations()`
 * (or the TypeORM CLI) instead of calling `store.migrate()`. Both apply the same numbered
 * versions and record them in `<prefix>jobs_migrations`, so either may run first.
 */
import { assertIdentifier } from '@jobs/core';
import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import type { Operation, Query } from './dialects/dialect.js';
import { Operations } from './operations.js';
import { runOnQueryRunner } from './runner.js';
import { dialectFor } from './store.js';

/** Timestamp TypeORM orders this migration by (2025-11-22). */
const TIMESTAMP = 1763769600000;

function* statements(queries: readonly Query[]): Operation<void> {
  for (const query of queries) yield query;
}

function dialectOf(runner: QueryRunner, tablePrefix: string) {
  const options = (runner.connection as DataSource).options as { type: string; schema?: string };
  const schema = options.type === 'postgres' && options.schema ? options.schema : null;
  return dialectFor(String(options.type), tablePrefix, schema);
}

/**
 * A TypeORM migration class that creates (and on `down`, drops) the store's tables.
 *
 * @example
 * const dataSource = new DataSource({
 *   type: 'postgres', url,
 *   migrations: [CreateOrders1700000000000, jobsMigration()],
 * });
 * await dataSource.runMigrations();
 */
export function jobsMigration(tablePrefix = ''): new () => MigrationInterface {
  const prefix = assertIdentifier(tablePrefix, 'tablePrefix', { allowEmpty: true, max: 32 });
  const name = `JobsTables${prefix ? `_${prefix}` : ''}${TIMESTAMP}`;
  return class JobsTablesMigration implements MigrationInterface {
    readonly name = name;

    async up(runner: QueryRunner): Promise<void> {
      const dialect = dialectOf(runner, prefix);
      const ops = new Operations(dialect);
      const { lock, unlock } = dialect.migrateLock;
      try {
        await runOnQueryRunner(runner, dialect, statements(lock));
        await runOnQueryRunner(runner, dialect, ops.migrate());
      } finally {
        await runOnQueryRunner(runner, dialect, statements(unlock));
      }
    }

    async down(runner: QueryRunner): Promise<void> {
      const dialect = dialectOf(runner, prefix);
      for (const table of ['schedules', 'jobs', 'migrations'] as const) {
        await runner.query(`DROP TABLE IF EXISTS ${dialect.table(table)}`);
      }
    }
  };
}
