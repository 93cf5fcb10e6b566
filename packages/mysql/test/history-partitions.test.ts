/**
 * History in partitions by UTC day (migration 0018, RANGE COLUMNS on `finished_at`): records
 * land in their day's partition, pruning adds the coming days and drops a partition whose every
 * record is past the retention in one ALTER (deleting row by row only what is left past it), and
 * a transaction reading history holds a drop back for a second at most, completions going on.
 * Partitions of earlier days are made as the store would have made them then (splitting the
 * oldest one), and records of those days are written raw: no clock is moved.
 */
import { completeJobs } from '@jobs/conformance';
import type { Job } from '@jobs/core';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlJobStore } from '../src/index.js';
import { createDatabase, dropDatabase, MYSQL_URL, openStore, reachable, sql } from './helpers.js';

const DAY = 86_400_000;

/** `pYYYYMMDD` and `YYYY-MM-DD` of the UTC day `offset` days from `today` (UTC midnight, ms). */
const day = (today: number, offset: number): { name: string; text: string } => {
  const text = new Date(today + offset * DAY).toISOString().slice(0, 10);
  return { name: `p${text.replace(/-/g, '')}`, text };
};

describe.skipIf(!reachable)('history in partitions by day', () => {
  let database = '';
  let store: MysqlJobStore;
  let today = 0;
  const history = () => `\`${database}\`.\`jobs_jobs_history\``;

  const partitions = async (): Promise<string[]> =>
    (
      await sql(
        `SELECT PARTITION_NAME AS name FROM information_schema.PARTITIONS
          WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'jobs_jobs_history'
          ORDER BY PARTITION_ORDINAL_POSITION`,
        [database],
      )
    ).map((r) => String(r.name));

  /** A raw history record of a job finished `daysAgo` days ago. */
  const record = (id: number, daysAgo: number): Promise<unknown> =>
    sql(
      `INSERT INTO ${history()} (id, type, payload, priority, due_at, retries_left, attempts,
         exclusive, queue, created_at, outcome, finished_at)
       VALUES (?, 'old', '{}', 0, UTC_TIMESTAMP(3) - INTERVAL ? DAY, 0, 1, 0, 'default',
         UTC_TIMESTAMP(3) - INTERVAL ? DAY, 'completed', UTC_TIMESTAMP(3) - INTERVAL ? DAY)`,
      [id, daysAgo, daysAgo, daysAgo],
    );

  /** The partition holding record `id`, or undefined. */
  const whereIs = async (id: number): Promise<string | undefined> => {
    for (const name of await partitions()) {
      const rows = await sql(`SELECT id FROM ${history()} PARTITION (\`${name}\`) WHERE id = ?`, [
        id,
      ]);
      if (rows.length > 0) return name;
    }
    return undefined;
  };

  const complete = (n: number): Promise<Job[]> => completeJobs(store, n);

  beforeAll(async () => {
    database = await createDatabase();
    store = openStore(database);
    await store.migrate();
    store.history.configure({ keep: 'all', retentionMs: 7 * DAY });
    const [row] = await sql(`SELECT CAST(UTC_DATE() AS CHAR) AS today`);
    today = Date.parse(`${String(row?.today)}T00:00:00Z`);
  });
  afterAll(async () => {
    await store?.close();
    if (database) await dropDatabase(database);
  });

  it('migrate partitions the table: the records before today, today’s, and the rest; the key takes finished_at', async () => {
    expect(await partitions()).toEqual([
      day(today, 0).name,
      day(today, 1).name,
      day(today, 2).name,
      day(today, 3).name,
      'pmax',
    ]);
    const key = await sql(
      `SELECT COLUMN_NAME AS name FROM information_schema.KEY_COLUMN_USAGE
        WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'jobs_jobs_history' AND CONSTRAINT_NAME = 'PRIMARY'
        ORDER BY ORDINAL_POSITION`,
      [database],
    );
    expect(key.map((k) => k.name)).toEqual(['id', 'finished_at']);
    expect(store.history.partitionMs).toBe(DAY);
  });

  it('a finished job is recorded in today’s partition and read back as before', async () => {
    const [job] = await complete(1);
    expect(await whereIs(Number(job?.id))).toBe(day(today, 1).name);
    expect(await store.history.get(String(job?.id))).toMatchObject({ outcome: 'completed' });
    expect(await store.history.prune(7 * DAY, 100)).toBe(0);
  });

  it('prune drops each day partition past the retention whole and deletes row by row only the rest past it', async () => {
    const kept = await complete(3);
    // As the store would have split them on earlier days: before 9 days ago, before 8 days ago.
    const [nine, eight, first] = [day(today, -9), day(today, -8), day(today, 0)];
    await sql(
      `ALTER TABLE ${history()} REORGANIZE PARTITION \`${first.name}\` INTO (
         PARTITION \`${nine.name}\` VALUES LESS THAN ('${nine.text}'),
         PARTITION \`${eight.name}\` VALUES LESS THAN ('${eight.text}'),
         PARTITION \`${first.name}\` VALUES LESS THAN ('${first.text}'))`,
    );
    for (let i = 0; i < 5; i++) await record(900_000 + i, 10);
    for (let i = 0; i < 4; i++) await record(910_000 + i, 8.5);
    // Six days ago: past a five-day retention, in a partition that also holds kept days.
    await record(920_000, 6);
    expect(await whereIs(900_000)).toBe(nine.name);
    expect(await whereIs(910_000)).toBe(eight.name);
    expect(await whereIs(920_000)).toBe(first.name);

    // A limit of 1: the two dropped partitions count whole (9 records), one row more.
    expect(await store.history.prune(5 * DAY, 1)).toBe(10);
    const left = await partitions();
    expect(left).not.toContain(nine.name);
    expect(left).not.toContain(eight.name);
    expect(left).toContain(first.name);
    expect(await whereIs(920_000)).toBeUndefined();
    for (const job of kept) expect(await store.history.get(job.id)).not.toBeNull();
    expect(await store.history.prune(5 * DAY, 1)).toBe(0);
  });

  it('a transaction reading history holds a drop back for a second at most: its records are deleted row by row, completions go on, the next prune drops it', async () => {
    const [old, first] = [day(today, -30), day(today, 0)];
    await sql(
      `ALTER TABLE ${history()} REORGANIZE PARTITION \`${first.name}\` INTO (
         PARTITION \`${old.name}\` VALUES LESS THAN ('${old.text}'),
         PARTITION \`${first.name}\` VALUES LESS THAN ('${first.text}'))`,
    );
    await record(930_000, 31);
    const reader = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      await reader.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
      await reader.query(`SELECT COUNT(*) FROM ${history()}`);
      const [pruned, completed] = await Promise.all([
        store.history.prune(5 * DAY, 100),
        complete(2),
      ]);
      expect(pruned).toBe(1);
      expect(completed).toHaveLength(2);
      expect(await partitions()).toContain(old.name);
      expect(await whereIs(930_000)).toBeUndefined();
    } finally {
      await reader.query('ROLLBACK');
      await reader.end();
    }
    // The reader gone, the next prune drops the partition (empty by now).
    expect(await store.history.prune(5 * DAY, 100)).toBe(0);
    expect(await partitions()).not.toContain(old.name);
  });

  it('a prune adds the days a store that did not prune for a while is missing, past a gap in one partition', async () => {
    // As if no prune had run for eight days: the day partitions end five days ago.
    for (const offset of [3, 2, 1]) {
      await sql(`ALTER TABLE ${history()} DROP PARTITION \`${day(today, offset).name}\``);
    }
    const five = day(today, -5);
    await sql(
      `ALTER TABLE ${history()} REORGANIZE PARTITION \`${day(today, 0).name}\`, \`pmax\` INTO (
         PARTITION \`${five.name}\` VALUES LESS THAN ('${five.text}'),
         PARTITION \`pmax\` VALUES LESS THAN (MAXVALUE))`,
    );
    await record(800_000, 2);
    expect(await whereIs(800_000)).toBe('pmax');
    expect(await store.history.prune(7 * DAY, 100)).toBe(0);
    // The gap (five days ago to the end of today) in one partition, then a day each.
    expect(await partitions()).toEqual([
      five.name,
      day(today, 1).name,
      day(today, 2).name,
      day(today, 3).name,
      'pmax',
    ]);
    expect(await whereIs(800_000)).toBe(day(today, 1).name);
  });

  it('a user that may not alter the table prunes row by row, without an error', async () => {
    const user = `jobs_app_${database.slice(-10)}`;
    await sql(`CREATE USER '${user}'@'%'`);
    await sql(`GRANT SELECT, INSERT, UPDATE, DELETE ON \`${database}\`.* TO '${user}'@'%'`);
    const app = openStore(database, { uri: MYSQL_URL.replace('//root@', `//${user}@`) });
    try {
      app.history.configure({ keep: 'all', retentionMs: 7 * DAY });
      // A past day in a partition of its own, and the last day's partition missing.
      const [old, first] = [day(today, -50), day(today, -5)];
      await sql(
        `ALTER TABLE ${history()} REORGANIZE PARTITION \`${first.name}\` INTO (
           PARTITION \`${old.name}\` VALUES LESS THAN ('${old.text}'),
           PARTITION \`${first.name}\` VALUES LESS THAN ('${first.text}'))`,
      );
      await record(950_000, 51);
      const last = day(today, 3);
      await sql(
        `ALTER TABLE ${history()} REORGANIZE PARTITION \`${last.name}\`, \`pmax\` INTO (
           PARTITION \`pmax\` VALUES LESS THAN (MAXVALUE))`,
      );
      expect(await app.history.prune(5 * DAY, 100)).toBe(1);
      expect(await whereIs(950_000)).toBeUndefined();
      expect(await partitions()).toContain(old.name);
      expect(await partitions()).not.toContain(last.name);
      // The owner's next prune drops the emptied day and makes the missing one.
      expect(await store.history.prune(5 * DAY, 100)).toBe(0);
      expect(await partitions()).not.toContain(old.name);
      expect(await partitions()).toContain(last.name);
    } finally {
      await app.close();
      await sql(`DROP USER '${user}'@'%'`);
    }
  });
});
