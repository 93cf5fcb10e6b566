/**
 * Where the store's tables are and how they are made: by `store.migrate()`, or by the same
 * versions as a TypeORM migration (`dataSource.runMigrations()`, the TypeORM CLI); either
 * records them in `<prefix>jobs_migrations`, so either may run first.
 */
import { assertIdentifier, ValidationError } from '@jobs/core';
import {
  type Dialect,
  MYSQL_GENERATED_COLUMNS,
  migrate,
  mysqlDialect,
  postgresDialect,
  type Query,
  sqlEnv,
  sqliteDialect,
} from '@jobs/core/sql';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { runOnQueryRunner } from './runner.js';

type TableOptions = { tablePrefix?: string; schema?: string };

/**
 * The dialect of the store's tables on a DataSource `type` (and `schema`): by default prefix
 * `jobs_`, or on PostgreSQL schema `jobs`, adopting 0.1's tables (no prefix, search path).
 */
export function dialectFor(
  { type, schema: own }: { type: string; schema?: string },
  options: TableOptions,
) {
  const adopt = options.tablePrefix === undefined;
  const given = options.tablePrefix ?? (type === 'postgres' ? '' : 'jobs_');
  const tablePrefix = assertIdentifier(given, 'tablePrefix', { allowEmpty: true, max: 32 });
  const named = options.schema ?? own;
  const schema = named || adopt ? assertIdentifier(named || 'jobs', 'schema', { max: 63 }) : null;
  const former = adopt ? { adoptPrefix: '' } : {};
  const dialect: Dialect | null =
    type === 'postgres'
      ? postgresDialect({ tablePrefix, schema, adoptSearchPath: adopt && !named })
      : type === 'mysql' || type === 'mariadb'
        ? mysqlDialect({ tablePrefix, ...former })
        : type === 'better-sqlite3'
          ? sqliteDialect({ tablePrefix, ...former })
          : null;
  if (dialect) return { dialect, prefix: tablePrefix, schema: type === 'postgres' ? schema : null };
  throw new ValidationError(
    'dataSource',
    `[@jobs/typeorm] DataSource type ${JSON.stringify(type)} is not supported; use postgres, mysql, mariadb or better-sqlite3`,
  );
}

/** TypeORM's own (protected) helpers for its `typeorm_metadata`, so it reads what it wrote. */
type MetadataSql = (where: object) => { query: string; parameters: unknown[] };
type Metadata = Record<'selectTypeormMetadataSql' | 'insertTypeormMetadataSql', MetadataSql>;

/**
 * Migrates on `runner` under the dialect's migration lock (in its transaction, if any). On
 * MySQL, still under the lock, it then records the generated columns in TypeORM's
 * `typeorm_metadata` (made with TypeORM's DDL if missing), where TypeORM reads their
 * expressions (the server rewords them) for its schema diff of `jobsEntities`.
 */
export async function migrateOn(
  runner: QueryRunner,
  dialect: Dialect,
  prefix: string,
): Promise<number[]> {
  const { lock, unlock } = dialect.migrateLock;
  const send = (q: Query) => runner.query(dialect.placeholders(q.sql), [...q.params]);
  try {
    for (const query of lock) await send(query);
    const applied = await runOnQueryRunner(
      runner,
      dialect,
      migrate(sqlEnv(dialect, '@jobs/typeorm')),
    );
    if (dialect.name !== 'mysql') return applied;
    const builder = runner.connection.driver.createSchemaBuilder() as unknown as {
      createTypeormMetadataTable(runner: QueryRunner): Promise<void>;
    };
    await builder.createTypeormMetadataTable(runner);
    const sql = runner as unknown as Metadata;
    const [{ db }] = (await runner.query('SELECT DATABASE() AS db')) as [{ db: string }];
    for (const [name, value] of Object.entries(MYSQL_GENERATED_COLUMNS)) {
      const where = { schema: db, table: `${prefix}jobs`, type: 'GENERATED_COLUMN', name };
      const found = sql.selectTypeormMetadataSql.call(runner, where);
      if (((await runner.query(found.query, found.parameters)) as unknown[]).length) continue;
      const insert = sql.insertTypeormMetadataSql.call(runner, { ...where, value });
      await runner.query(insert.query, insert.parameters);
    }
    return applied;
  } finally {
    for (const query of unlock) await send(query);
  }
}

/**
 * A TypeORM migration class that creates (and on `down`, drops) the store's tables. Give it the
 * store's `tablePrefix`, if it has one: the defaults are the store's.
 *
 * @example
 * const dataSource = new DataSource({
 *   type: 'postgres', url,
 *   migrations: [CreateOrders1700000000000, jobsMigration()],
 * });
 * await dataSource.runMigrations();
 */
export function jobsMigration(tablePrefix?: string): new () => MigrationInterface {
  if (tablePrefix !== undefined) assertIdentifier(tablePrefix, 'tablePrefix', { allowEmpty: true });
  const of = (runner: QueryRunner) => dialectFor(runner.connection.options, { tablePrefix });
  return class JobsTablesMigration implements MigrationInterface {
    // Ordered by 2025-11-22.
    readonly name = `JobsTables${tablePrefix ? `_${tablePrefix}` : ''}1763769600000`;

    async up(runner: QueryRunner): Promise<void> {
      const { dialect, prefix } = of(runner);
      await migrateOn(runner, dialect, prefix);
    }

    async down(runner: QueryRunner): Promise<void> {
      const { dialect } = of(runner);
      for (const table of [
        'signals',
        'followups',
        'rate_limits',
        'history',
        'schedules',
        'jobs',
        'migrations',
      ] as const) {
        await runner.query(`DROP TABLE IF EXISTS ${dialect.table(table)}`);
      }
    }
  };
}
