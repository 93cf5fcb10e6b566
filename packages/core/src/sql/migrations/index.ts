/**
 * The numbered migrations of every database, from one list. A new migration: its three `.sql`
 * files (`postgres/`, `mysql/`, `sqlite/`, same name), their three imports and one line in
 * `LIST` below — then `tables.ts` if it adds tables or columns. A migration is never edited
 * after release. (The bundler has no directory imports: each file is imported by name.)
 */

import m0001 from './mysql/0001_init.sql';
import m0002 from './mysql/0002_one_schema.sql';
import m0003 from './mysql/0003_acquire_indexes.sql';
import m0004 from './mysql/0004_history.sql';
import m0005 from './mysql/0005_job_meta.sql';
import m0006 from './mysql/0006_cancel_progress.sql';
import m0007 from './mysql/0007_flow_limits.sql';
import m0008 from './mysql/0008_blocked_set.sql';
import m0009 from './mysql/0009_start_marks.sql';
import m0010 from './mysql/0010_exact_names.sql';
import m0011 from './mysql/0011_key_followups.sql';
import m0012 from './mysql/0012_time_limits_logs.sql';
import m0013 from './mysql/0013_steps.sql';
import m0014 from './mysql/0014_sql_enqueue.sql';
import m0015 from './mysql/0015_signals.sql';
import m0016 from './mysql/0016_sql_enqueue_many.sql';
import m0017 from './mysql/0017_signal_retention.sql';
import m0018 from './mysql/0018_history_partitions.sql';
import p0001 from './postgres/0001_init.sql';
import p0002 from './postgres/0002_one_schema.sql';
import p0003 from './postgres/0003_acquire_indexes.sql';
import p0004 from './postgres/0004_history.sql';
import p0005 from './postgres/0005_job_meta.sql';
import p0006 from './postgres/0006_cancel_progress.sql';
import p0007 from './postgres/0007_flow_limits.sql';
import p0008 from './postgres/0008_blocked_set.sql';
import p0009 from './postgres/0009_start_marks.sql';
import p0010 from './postgres/0010_exact_names.sql';
import p0011 from './postgres/0011_key_followups.sql';
import p0012 from './postgres/0012_time_limits_logs.sql';
import p0013 from './postgres/0013_steps.sql';
import p0014 from './postgres/0014_sql_enqueue.sql';
import p0015 from './postgres/0015_signals.sql';
import p0016 from './postgres/0016_sql_enqueue_many.sql';
import p0017 from './postgres/0017_signal_retention.sql';
import p0018 from './postgres/0018_history_partitions.sql';
import s0001 from './sqlite/0001_init.sql';
import s0002 from './sqlite/0002_one_schema.sql';
import s0003 from './sqlite/0003_acquire_indexes.sql';
import s0004 from './sqlite/0004_history.sql';
import s0005 from './sqlite/0005_job_meta.sql';
import s0006 from './sqlite/0006_cancel_progress.sql';
import s0007 from './sqlite/0007_flow_limits.sql';
import s0008 from './sqlite/0008_blocked_set.sql';
import s0009 from './sqlite/0009_start_marks.sql';
import s0010 from './sqlite/0010_exact_names.sql';
import s0011 from './sqlite/0011_key_followups.sql';
import s0012 from './sqlite/0012_time_limits_logs.sql';
import s0013 from './sqlite/0013_steps.sql';
import s0014 from './sqlite/0014_sql_enqueue.sql';
import s0015 from './sqlite/0015_signals.sql';
import s0016 from './sqlite/0016_sql_enqueue_many.sql';
import s0017 from './sqlite/0017_signal_retention.sql';
import s0018 from './sqlite/0018_history_partitions.sql';

/** A migration's file name, and its text on each database. */
type Entry = readonly [name: string, postgres: string, mysql: string, sqlite: string];

/** Every migration, oldest first: one line each. */
const LIST: readonly Entry[] = [
  ['0001_init', p0001, m0001, s0001],
  ['0002_one_schema', p0002, m0002, s0002],
  ['0003_acquire_indexes', p0003, m0003, s0003],
  ['0004_history', p0004, m0004, s0004],
  ['0005_job_meta', p0005, m0005, s0005],
  ['0006_cancel_progress', p0006, m0006, s0006],
  ['0007_flow_limits', p0007, m0007, s0007],
  ['0008_blocked_set', p0008, m0008, s0008],
  ['0009_start_marks', p0009, m0009, s0009],
  ['0010_exact_names', p0010, m0010, s0010],
  ['0011_key_followups', p0011, m0011, s0011],
  ['0012_time_limits_logs', p0012, m0012, s0012],
  ['0013_steps', p0013, m0013, s0013],
  ['0014_sql_enqueue', p0014, m0014, s0014],
  ['0015_signals', p0015, m0015, s0015],
  ['0016_sql_enqueue_many', p0016, m0016, s0016],
  ['0017_signal_retention', p0017, m0017, s0017],
  ['0018_history_partitions', p0018, m0018, s0018],
];

/** One database's files: name → text (`loadMigrations` reads them). */
function filesOf(at: 1 | 2 | 3): Readonly<Record<string, string>> {
  return Object.fromEntries(LIST.map((entry) => [entry[0], entry[at]]));
}

/** The migration files of each database, by name (`0014_sql_enqueue` → its SQL text). */
export const MIGRATION_FILES: {
  readonly postgres: Readonly<Record<string, string>>;
  readonly mysql: Readonly<Record<string, string>>;
  readonly sqlite: Readonly<Record<string, string>>;
} = { postgres: filesOf(1), mysql: filesOf(2), sqlite: filesOf(3) };
