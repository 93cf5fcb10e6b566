/** What every operation works with: the dialect, its tables, and how to wake other engines. */
import type { HistorySettings } from '../../store.js';
import type { Dialect } from '../dialect.js';
import type { Query } from '../executor.js';

export interface SqlContext {
  readonly d: Dialect;
  /** Quoted names of the store's tables. */
  readonly jobs: string;
  readonly schedules: string;
  /** The history table (finished jobs). */
  readonly history: string;
  /** What history keeps; `SqlJobStore.configureHistory` changes it in place. */
  readonly historySettings: HistorySettings;
  /**
   * A statement that wakes engines elsewhere (PostgreSQL `pg_notify`), sent in the same
   * transaction as the writes that made jobs acquirable, so it is delivered on commit.
   */
  readonly notify: Query | null;
  /** The package that speaks in error messages, e.g. `@jobs/postgres`. */
  readonly label: string;
}

export function sqlContext(d: Dialect, label: string, notify: Query | null = null): SqlContext {
  return {
    d,
    jobs: d.table('jobs'),
    schedules: d.table('schedules'),
    history: d.table('history'),
    historySettings: { keep: 'none', retentionMs: 0 },
    notify,
    label,
  };
}
