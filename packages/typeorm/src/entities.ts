/**
 * TypeORM `EntitySchema`s of the store's tables, made from `@jobs/core/sql`'s `describeTables`
 * (the schema the migrations make), so TypeORM's schema diff finds nothing to change.
 */
import {
  describeTables,
  type FollowupRow,
  type HistoryRow,
  type JobRow,
  type RateLimitRow,
  type ScheduleRow,
  type TableDatabase,
  type TableDescription,
} from '@jobs/core/sql';
import {
  type EntitySchemaColumnOptions as Col,
  type ColumnType,
  EntitySchema,
  type EntitySchemaIndexOptions as Index,
} from 'typeorm';
import { dialectFor } from './migration.js';
import type { TypeormJobsDriver } from './store.js';

type JobsEntities = [
  EntitySchema<JobRow>,
  EntitySchema<ScheduleRow>,
  EntitySchema<HistoryRow>,
  EntitySchema<RateLimitRow>,
  EntitySchema<FollowupRow>,
];

/** A described table as an entity (in `schema` on PostgreSQL). */
function entity(table: TableDescription, schema: string | null): EntitySchema {
  const columns = table.columns.map((column, i): [string, Col] => {
    const { type, length, precision, nullable, unsigned, default: value, generated } = column;
    const options: Col = { type: type as ColumnType, length, precision, nullable, unsigned };
    if (value === 'now()') options.default = () => value;
    else if (value?.startsWith("'")) options.default = value.slice(1, -1);
    else if (value !== undefined) options.default = value === 'false' ? false : Number(value);
    if (generated) Object.assign(options, { generatedType: 'STORED', asExpression: generated });
    if (generated) Object.assign(options, { insert: false, update: false });
    // EntitySchema passes 'identity' on, though its type leaves it out.
    const key = { primary: true, generated: table.keyGeneration ?? undefined } as Partial<Col>;
    if (i === 0) return [column.name, { ...options, ...key }];
    return [
      column.name,
      table.primaryKey.includes(column.name) ? { ...options, primary: true } : options,
    ];
  });
  return new EntitySchema({
    ...(schema ? { schema } : {}),
    name: table.name,
    tableName: table.name,
    columns: Object.fromEntries(columns),
    indices: table.indexes as Index[],
    checks: table.checks,
  });
}

/**
 * The store's tables as TypeORM entities, for the DataSource's `entities`: jobs, schedules,
 * history, rate-limit windows and key follow-ups. Give the store's `tablePrefix` and `schema`, if it has them:
 * the defaults are the store's (`jobs_jobs`, `jobs_schedules`, … on MySQL/MariaDB and SQLite,
 * `jobs.jobs`, `jobs.schedules`, … on PostgreSQL); a store whose DataSource names a `schema`
 * uses that schema: pass it here.
 *
 * @example
 * const dataSource = new DataSource({
 *   type: 'postgres', url,
 *   entities: [Order, ...jobsEntities('postgres')],
 * });
 */
export function jobsEntities(
  driver: TypeormJobsDriver,
  tablePrefix?: string,
  schema?: string,
): JobsEntities {
  const layout = dialectFor({ type: driver }, { tablePrefix, schema });
  const tables = describeTables(layout.dialect.name as TableDatabase, layout.prefix);
  return tables.map((table) => entity(table, layout.schema)) as JobsEntities;
}
