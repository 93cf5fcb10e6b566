/**
 * TypeORM `EntitySchema`s of the store's tables, for apps that list every table in their
 * DataSource (`synchronize`, `migration:generate`, repositories). They mirror the DDL of
 * `store.migrate()` column for column, so TypeORM's schema diff finds nothing to change.
 */
import { assertIdentifier, ValidationError } from '@jobs/core';
import { type ColumnType, EntitySchema, type EntitySchemaColumnOptions } from 'typeorm';
import type { TypeormJobsDriver } from './store.js';

/** A row of `<prefix>jobs` as TypeORM maps it (times per driver: Date, or epoch ms on SQLite). */
export interface JobRow {
  id: string;
  type: string;
  payload: unknown;
  state: string;
  priority: number;
  due_at: Date | number;
  retries_left: number;
  attempts: number;
  scope: string | null;
  exclusive: boolean | number;
  job_key: string | null;
  tenant_id: string | null;
  queue: string;
  last_error_message: string | null;
  last_error_stack: string | null;
  created_at: Date | number;
  lock_owner: string | null;
  lock_expires_at: Date | number | null;
  lock_token: string | null;
  retry_policy: string | null;
  suspended_from: string | null;
  schedule_name: string | null;
  occurrence: Date | number | null;
  shard_index: number | null;
  shard_count: number | null;
}

/** A row of `<prefix>schedules`. */
export interface ScheduleRow {
  name: string;
  spec: string;
  next_at: Date | number | null;
  paused: boolean | number;
  pending_misfire: boolean | number;
  skipped: number;
  fired: number;
  version: number;
  created_at: Date | number;
  updated_at: Date | number;
}

type Kind = 'postgres' | 'mysql' | 'sqlite';
type Col = EntitySchemaColumnOptions;

function kindOf(driver: string): Kind {
  if (driver === 'postgres') return 'postgres';
  if (driver === 'mysql' || driver === 'mariadb') return 'mysql';
  if (driver === 'better-sqlite3') return 'sqlite';
  throw new ValidationError(
    'driver',
    `[@jobs/typeorm] jobsEntities: ${JSON.stringify(driver)} is not supported; use postgres, mysql, mariadb or better-sqlite3`,
  );
}

function columnTypes(kind: Kind) {
  const t =
    (type: ColumnType, extra: Partial<Col> = {}) =>
    (more: Partial<Col> = {}): Col =>
      ({ type, ...extra, ...more }) as Col;
  if (kind === 'postgres') {
    return {
      id: t('bigint', { primary: true, generated: 'increment' }),
      string: t('varchar', { length: 255 }),
      short: (length: number) => t('varchar', { length }),
      text: t('text'),
      json: t('jsonb'),
      int: t('integer'),
      bool: t('boolean'),
      time: t('timestamptz', { precision: 3 }),
      no: false as boolean | number,
    };
  }
  if (kind === 'mysql') {
    return {
      id: t('bigint', { primary: true, generated: 'increment' }),
      string: t('varchar', { length: 255 }),
      short: (length: number) => t('varchar', { length }),
      text: t('text'),
      json: t('longtext'),
      int: t('int'),
      bool: t('tinyint'),
      time: t('datetime', { precision: 3 }),
      no: 0 as boolean | number,
    };
  }
  return {
    id: t('integer', { primary: true, generated: 'increment' }),
    string: t('text'),
    short: (_length: number) => t('text'),
    text: t('text'),
    json: t('text'),
    int: t('integer'),
    bool: t('integer'),
    time: t('integer'),
    no: 0 as boolean | number,
  };
}

/**
 * The store's tables as TypeORM entities, for the DataSource's `entities`.
 *
 * @example
 * const dataSource = new DataSource({
 *   type: 'postgres', url,
 *   entities: [Order, ...jobsEntities('postgres')],
 * });
 */
export function jobsEntities(
  driver: TypeormJobsDriver,
  tablePrefix = '',
): [EntitySchema<JobRow>, EntitySchema<ScheduleRow>] {
  const prefix = assertIdentifier(tablePrefix, 'tablePrefix', { allowEmpty: true, max: 32 });
  const kind = kindOf(driver);
  const c = columnTypes(kind);
  const nullable: Partial<Col> = { nullable: true };
  const jobs = new EntitySchema<JobRow>({
    name: `${prefix}jobs`,
    tableName: `${prefix}jobs`,
    columns: {
      id: c.id(),
      type: c.string(),
      payload: c.json(),
      state: c.short(16)(),
      priority: c.int({ default: 0 }),
      due_at: c.time(),
      retries_left: c.int(),
      attempts: c.int({ default: 0 }),
      scope: c.string(nullable),
      exclusive: c.bool({ default: c.no }),
      job_key: c.string(nullable),
      tenant_id: c.string(nullable),
      queue: c.string({ default: 'default' }),
      last_error_message: c.text(nullable),
      last_error_stack: c.text(nullable),
      created_at: c.time(),
      lock_owner: c.string(nullable),
      lock_expires_at: c.time(nullable),
      lock_token: c.short(64)(nullable),
      retry_policy: c.text(nullable),
      suspended_from: c.short(16)(nullable),
      schedule_name: c.string(nullable),
      occurrence: c.time(nullable),
      shard_index: c.int(nullable),
      shard_count: c.int(nullable),
    },
    indices: [
      { name: `${prefix}jobs_key_uq`, columns: ['job_key'], unique: true },
      { name: `${prefix}jobs_due_idx`, columns: ['state', 'due_at'] },
      { name: `${prefix}jobs_scope_idx`, columns: ['scope'] },
      { name: `${prefix}jobs_schedule_idx`, columns: ['schedule_name'] },
    ],
  });
  const schedules = new EntitySchema<ScheduleRow>({
    name: `${prefix}schedules`,
    tableName: `${prefix}schedules`,
    columns: {
      name: c.string({ primary: true }),
      spec: kind === 'mysql' ? c.json() : c.text(),
      next_at: c.time(nullable),
      paused: c.bool({ default: c.no }),
      pending_misfire: c.bool({ default: c.no }),
      skipped: c.int({ default: 0 }),
      fired: c.int({ default: 0 }),
      version: c.int({ default: 1 }),
      created_at: c.time(),
      updated_at: c.time(),
    },
  });
  return [jobs, schedules];
}
