import { existsSync } from 'node:fs';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';

const filename = '/tmp/dash2/prof.db';
const fresh = !existsSync(filename);
const store = new SqliteJobStore({ filename });
await store.migrate();
if (fresh) {
  const db = new Database(filename);
  const now = Date.now();
  const rows = 1_000_000;
  db.exec(`
    INSERT INTO jobs_jobs (type, payload, state, priority, due_at, retries_left, attempts, exclusive, queue, created_at, last_error_message, last_error_stack)
    WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${rows})
    SELECT 'type-' || (n % 10), json_object('n', n, 'to', 'user' || n || '@example.com'),
      CASE WHEN n % 100 < 4 THEN 'deadletter' WHEN n % 100 < 9 THEN 'async' ELSE 'timer' END, 0,
      CASE WHEN n % 100 < 9 THEN ${now - 60_000} ELSE ${now + 86_400_000} END,
      3, CASE WHEN n % 100 < 4 THEN 4 ELSE 0 END, 0,
      CASE n % 3 WHEN 0 THEN 'default' WHEN 1 THEN 'mail' ELSE 'reports' END, ${now},
      CASE WHEN n % 100 < 4 THEN 'error ' || (n % 7) END, NULL FROM g`);
  db.exec('ANALYZE');
  db.close();
}
const t = async (label: string, f: () => Promise<unknown>) => {
  for (let i = 0; i < 3; i++) {
    const s = performance.now();
    await f();
    console.log(label, (performance.now() - s).toFixed(1));
  }
};
await t('count 25001', () => store.bulk.countJobs({}, 25_001));
await t('queueStats newest 25000', () => store.views.queueStats({ newest: 25_000 }));
await t('queueStats newest 10000', () => store.views.queueStats({ newest: 10_000 }));
await t('list running', () => store.listJobs({ state: 'running', limit: 1000, offset: 0 }));
await t('history', () =>
  store.history.list({ since: new Date(Date.now() - 3600e3), limit: 1000, after: null }),
);
await t('now', () => store.now());
await store.close();
