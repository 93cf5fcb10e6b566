import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { MYSQL_URL, randomName, reachable, sql, TestDatabase } from './helpers.js';

/**
 * The SQL enqueue procedure wakes idle stores as the store's own enqueue does: it ends a few of
 * their server-side waits (`SELECT SLEEP … AS \`jobs_wait_<hash>_…\``), whose alias prefix it
 * must spell as `@jobs/mysql`'s waiters do.
 */
describe.skipIf(!reachable)('MySQL enqueue from SQL: wake-ups', () => {
  const db = new TestDatabase();
  db.register();

  it("the procedure names the store's waiter prefix", async () => {
    const tablePrefix = `${randomName('w')}_`;
    const store = db.store({ tablePrefix });
    await store.migrate();
    const prefix = (store as unknown as { notifier: { prefix: string } }).notifier.prefix;
    expect(prefix).toMatch(/^jobs_wait_[0-9a-f]{16}_$/);
    const [routine] = await sql(
      `SELECT ROUTINE_DEFINITION AS body FROM information_schema.ROUTINES
        WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = ?`,
      [db.name, `${tablePrefix}enqueue`],
    );
    expect(String(routine?.body)).toContain(`SELECT SLEEP(% AS \`${prefix}%`);
  });

  it('a CALL ends an idle store’s wait: its subscriber wakes long before the wait would end', async () => {
    const tablePrefix = `${randomName('w')}_`;
    // A wait of 10 minutes: only a rung wait wakes the subscriber within the test.
    const store = db.store({ tablePrefix, notifyWaitMs: 600_000 });
    await store.migrate();
    let wakeUps = 0;
    const unsubscribe = store.subscribe(() => {
      wakeUps += 1;
    });
    const connection = await mysql.createConnection({ uri: MYSQL_URL, database: db.name });
    try {
      // The waiter connects asynchronously: call until its wait is rung.
      for (let i = 0; i < 50 && wakeUps === 0; i++) {
        // Not due for 10 minutes: the waiter's read of due jobs finds none, only a ring wakes.
        await connection.query(
          `CALL \`${tablePrefix}enqueue\`('work', '{}', '{"delayMs": 600000}')`,
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(wakeUps).toBeGreaterThan(0);
    } finally {
      unsubscribe();
      await connection.end();
    }
  });
});
