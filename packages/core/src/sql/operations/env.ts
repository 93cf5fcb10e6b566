/** What every operation works with (`SqlEnv`, declared beside the `Dialect` it holds). */
import type { Dialect, SqlEnv } from '../dialect.js';
import type { Query } from '../executor.js';

export type { SqlEnv } from '../dialect.js';

export function sqlEnv(d: Dialect, label: string, notify: Query | null = null): SqlEnv {
  return {
    d,
    jobs: d.table('jobs'),
    schedules: d.table('schedules'),
    history: d.table('history'),
    followups: d.table('followups'),
    historySettings: { keep: 'none', retentionMs: 0 },
    notify,
    label,
  };
}
