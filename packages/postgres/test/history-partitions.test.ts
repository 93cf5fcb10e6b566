/**
 * History in partitions by day (migration 0018): records land in their day's partition, pruning
 * drops a partition whose every record is past the retention in one statement (and deletes row
 * by row only what sits in the DEFAULT partition), and a long transaction reading history holds
 * a drop back without holding completions back. Old days are made by calling the maintenance
 * function with an earlier `today`, and records of them are written raw: no clock is moved.
 */
import { completeJobs } from '@jobs/conformance';
import type { Job } from '@jobs/core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import { dropSchema, openStore, PG_URL, randomSchema, reachable, sql } from './helpers.js';

const DAY = 86_400_000;

describe.skipIf(!reachable)('history in partitions by day', () => {
  const schema = randomSchema('hist');
  let store: PostgresJobStore;

  /** The history table's partitions: name → its bound as PostgreSQL prints it. */
  const partitions = async (): Promise<string[]> =>
    (
      await sql<{ name: string }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = '"${schema}".jobs_history'::regclass ORDER BY 1`,
      )
    ).map((r) => r.name);

  /** `jobs_history_YYYYMMDD` of the UTC day `offset` days from the server's today. */
  const dayName = async (offset: number): Promise<string> =>
    (
      await sql<{ name: string }>(
        `SELECT 'jobs_history_' || to_char((now() AT TIME ZONE 'UTC')::date + $1::int, 'YYYYMMDD') AS name`,
        [offset],
      )
    )[0]?.name as string;

  /** A raw history record of a job finished at `finishedAt` (an SQL expression). */
  const record = (id: number, finishedAt: string): Promise<unknown> =>
    sql(
      `INSERT INTO "${schema}".jobs_history (id, type, payload, priority, due_at, retries_left,
         attempts, exclusive, queue, created_at, outcome, finished_at)
       VALUES ($1, 'old', '{}', 0, ${finishedAt}, 0, 1, false, 'default', ${finishedAt},
         'completed', ${finishedAt})`,
      [id],
    );

  const whereIs = async (id: number): Promise<string | undefined> =>
    (
      await sql<{ part: string }>(
        `SELECT tableoid::regclass::text AS part FROM "${schema}".jobs_history WHERE id = $1`,
        [id],
      )
    )[0]?.part;

  const complete = (n: number): Promise<Job[]> => completeJobs(store, n);

  beforeAll(async () => {
    store = openStore(schema);
    await store.migrate();
    store.history.configure({ keep: 'all', retentionMs: 7 * DAY });
  });
  afterAll(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('migrate makes the table a parent of a DEFAULT partition and of today and the next two days', async () => {
    const [kind] = await sql<{ relkind: string }>(
      `SELECT relkind FROM pg_class WHERE oid = '"${schema}".jobs_history'::regclass`,
    );
    expect(kind?.relkind).toBe('p');
    expect(await partitions()).toEqual(
      [await dayName(0), await dayName(1), await dayName(2), 'jobs_history_default'].sort(),
    );
    expect(store.history.partitionMs).toBe(DAY);
  });

  it('a finished job is recorded in its day’s partition and read back as before', async () => {
    const [job] = await complete(1);
    const id = Number(job?.id);
    expect(await whereIs(id)).toBe(`${schema}.${await dayName(0)}`);
    expect(await store.history.get(String(id))).toMatchObject({
      id: String(id),
      outcome: 'completed',
    });
  });

  it('prune drops each day partition past the retention whole, deletes DEFAULT rows past it, keeps the rest', async () => {
    const kept = await complete(3);
    // Partitions for 10, 9 and 8 days ago, as the store would have made them then.
    await sql(
      `SELECT "${schema}".jobs_history_maintain('-infinity', (now() AT TIME ZONE 'UTC')::date - 10)`,
    );
    const old = [await dayName(-10), await dayName(-9), await dayName(-8)];
    for (const name of old) expect(await partitions()).toContain(name);
    for (let i = 0; i < 5; i++) await record(900_000 + i, `now() - interval '10 days'`);
    for (let i = 0; i < 4; i++) await record(910_000 + i, `now() - interval '9 days'`);
    // 20 days ago has no partition: the DEFAULT one takes it.
    await record(920_000, `now() - interval '20 days'`);
    expect(await whereIs(920_000)).toBe(`${schema}.jobs_history_default`);
    expect(await whereIs(900_000)).toBe(`${schema}.${old[0]}`);

    // A limit of 1: the three dropped partitions count whole (9 records), one DEFAULT row more.
    expect(await store.history.prune(5 * DAY, 1)).toBe(10);
    const left = await partitions();
    for (const name of old) expect(left).not.toContain(name);
    expect(left).toContain(await dayName(0));
    expect(await whereIs(920_000)).toBeUndefined();
    for (const job of kept) expect(await store.history.get(job.id)).not.toBeNull();
    expect(await store.history.prune(5 * DAY, 1)).toBe(0);
  });

  it('a transaction reading history holds a drop back for the lock timeout only: its records are deleted row by row, completions go on, the next prune drops it', async () => {
    await sql(
      `SELECT "${schema}".jobs_history_maintain('-infinity', (now() AT TIME ZONE 'UTC')::date - 30)`,
    );
    const oldest = await dayName(-30);
    await record(930_000, `now() - interval '30 days'`);
    const reader = new pg.Client({ connectionString: PG_URL });
    await reader.connect();
    try {
      await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await reader.query(`SELECT count(*) FROM "${schema}".jobs_history`);
      // The drop waits for the reader's lock, gives up after 500 ms, and prune goes on: the
      // record past the retention is deleted row by row instead, its partition left standing.
      const [pruned, completed] = await Promise.all([
        store.history.prune(5 * DAY, 100),
        complete(2),
      ]);
      expect(pruned).toBe(1);
      expect(completed).toHaveLength(2);
      expect(await partitions()).toContain(oldest);
      expect(await whereIs(930_000)).toBeUndefined();
    } finally {
      await reader.query('ROLLBACK');
      await reader.end();
    }
    // The reader gone, the next prune drops the partition (empty by now).
    expect(await store.history.prune(5 * DAY, 100)).toBe(0);
    expect(await partitions()).not.toContain(oldest);
  });

  it('a day whose records already sit in the DEFAULT partition gets no partition, and pruning deletes them row by row', async () => {
    await record(940_000, `now() - interval '40 days'`);
    await sql(
      `SELECT "${schema}".jobs_history_maintain('-infinity', (now() AT TIME ZONE 'UTC')::date - 40)`,
    );
    expect(await partitions()).not.toContain(await dayName(-40));
    expect(await partitions()).toContain(await dayName(-39));
    expect(await whereIs(940_000)).toBe(`${schema}.jobs_history_default`);
    expect(await store.history.prune(5 * DAY, 100)).toBe(1);
    expect(await partitions()).not.toContain(await dayName(-39));
  });

  it('a role that may not create or drop tables prunes row by row, without an error', async () => {
    const role = `jobs_app_${schema.slice(-10)}`;
    await sql(`CREATE ROLE ${role} LOGIN`);
    const app = openStore(schema, {
      connectionString: PG_URL.replace('//postgres@', `//${role}@`),
    });
    try {
      await sql(`GRANT USAGE ON SCHEMA "${schema}" TO ${role}`);
      await sql(
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO ${role}`,
      );
      app.history.configure({ keep: 'all', retentionMs: 7 * DAY });
      // A past day in a partition of its own, and the day after tomorrow's partition missing.
      await sql(
        `SELECT "${schema}".jobs_history_maintain('-infinity', (now() AT TIME ZONE 'UTC')::date - 50)`,
      );
      await record(950_000, `now() - interval '50 days'`);
      await sql(`DROP TABLE "${schema}".${await dayName(2)}`);
      expect(await app.history.prune(5 * DAY, 100)).toBe(1);
      expect(await whereIs(950_000)).toBeUndefined();
      const left = await partitions();
      expect(left).toContain(await dayName(-50));
      expect(left).not.toContain(await dayName(2));
      // The owner's next prune drops the emptied day and makes the missing one.
      expect(await store.history.prune(5 * DAY, 100)).toBe(0);
      expect(await partitions()).not.toContain(await dayName(-50));
      expect(await partitions()).toContain(await dayName(2));
    } finally {
      await app.close();
      await sql(`DROP OWNED BY ${role}`);
      await sql(`DROP ROLE ${role}`);
    }
  });
});
