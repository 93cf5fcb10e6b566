/**
 * The SQLite enqueue floor: what the database alone costs to write a new job into each
 * library's own table, with no library code at all — better-sqlite3 on the migrated file, the
 * same pragmas (WAL, `synchronous = NORMAL`), the same statements for both:
 * - bulk: one transaction per 1,000 rows, multi-row `INSERT … VALUES (…), (…)` of 50 rows
 *   (the shape `@jobs/sqlite` itself uses; plainjob's `addMany` runs one INSERT per row);
 * - single: one autocommit `INSERT` per row (a commit each).
 *
 * It tells the enqueue ratios apart: a library whose enqueue is slower than a peer's *floor*
 * cannot catch up in JavaScript, only by writing less. Our table is measured as migrated and
 * once more without `jobs_due_idx` (the index `nextDueAt` and the overdue check read in due
 * order), to show what that index costs.
 */
import { rmSync } from 'node:fs';
import { silentLogger } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import Database from 'better-sqlite3';
import { better, defineQueue } from 'plainjob';
import { medianOf } from './harness.js';

/** The schemas measured: ours as migrated, ours without the due index, plainjob's. */
export type FloorSchema = 'ours' | 'ours-no-due-index' | 'plainjob';

const ROWS_PER_STATEMENT = 50;
const ROWS_PER_TRANSACTION = 1_000;

interface FloorTable {
  db: Database.Database;
  /** Inserts `ROWS_PER_STATEMENT` rows: their values one after another. */
  many(values: unknown[]): void;
  /** Inserts one row (a commit of its own outside a transaction). */
  one(values: unknown[]): void;
  /** Values of one row: its payload and time columns. */
  row(i: number): unknown[];
}

/** Opens `filename` (removed first) with `schema`'s table as its library migrates it. */
async function openFloor(schema: FloorSchema, filename: string): Promise<FloorTable> {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${filename}${suffix}`, { force: true });
  if (schema === 'plainjob') {
    const setup = new Database(filename);
    defineQueue({ connection: better(setup), logger: silentLogger }).close();
    setup.close();
  } else {
    const store = new SqliteJobStore({ filename });
    await store.migrate();
    await store.close();
  }
  const db = new Database(filename);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  if (schema === 'ours-no-due-index') db.exec('DROP INDEX jobs_jobs_due_idx');
  // The columns each library writes for an immediate job (the rest keep their defaults).
  const [sql, tuple, row] =
    schema === 'plainjob'
      ? [
          'INSERT INTO plainjob_jobs (type, data, created_at, next_run_at) VALUES ',
          '(?, ?, ?, ?)',
          (i: number): unknown[] => {
            const now = Date.now();
            return ['noop', JSON.stringify({ i }), now, now];
          },
        ]
      : [
          `INSERT INTO jobs_jobs ("type", "payload", "state", "priority", "due_at", "retries_left",
            "attempts", "exclusive", "queue", "created_at") VALUES `,
          "(?, ?, 'async', 0, ?, 3, 0, 0, 'default', ?)",
          (i: number): unknown[] => {
            const now = Date.now();
            return ['noop', JSON.stringify({ i }), now, now];
          },
        ];
  const many = db.prepare(`${sql}${Array(ROWS_PER_STATEMENT).fill(tuple).join(', ')}`);
  const one = db.prepare(`${sql}${tuple}`);
  return { db, many: (values) => many.run(values), one: (values) => one.run(values), row };
}

/** Rows per second of each schema, bulk and single, medians of `rounds` alternating rounds. */
export async function enqueueFloor(
  file: () => string,
  options: { bulkRows: number; singleRows: number; rounds: number },
): Promise<Map<FloorSchema, { bulk: number; single: number }>> {
  const schemas: FloorSchema[] = ['ours', 'ours-no-due-index', 'plainjob'];
  const bulk = new Map<FloorSchema, number[]>(schemas.map((s) => [s, []]));
  const single = new Map<FloorSchema, number[]>(schemas.map((s) => [s, []]));
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? schemas : [...schemas].reverse();
    for (const schema of order) {
      bulk.get(schema)?.push(await bulkRate(schema, file(), options.bulkRows));
      single.get(schema)?.push(await singleRate(schema, file(), options.singleRows));
    }
  }
  return new Map(
    schemas.map((s) => [
      s,
      { bulk: medianOf(bulk.get(s) ?? []), single: medianOf(single.get(s) ?? []) },
    ]),
  );
}

/** Rows per second inserted in transactions of 1,000 rows, as 50-row statements. */
async function bulkRate(schema: FloorSchema, filename: string, rows: number): Promise<number> {
  const table = await openFloor(schema, filename);
  try {
    const perStatement = ROWS_PER_STATEMENT * table.row(0).length;
    const insertMany = table.db.transaction((from: number) => {
      const values: unknown[] = [];
      for (let k = 0; k < ROWS_PER_TRANSACTION; k++) {
        values.push(...table.row(from + k));
        if (values.length === perStatement) {
          table.many(values);
          values.length = 0;
        }
      }
    });
    // Warm-up: the statements compiled and the file grown a little before measuring.
    for (let i = 0; i < 3; i++) insertMany(i * ROWS_PER_TRANSACTION);
    const t = performance.now();
    for (let from = 0; from < rows; from += ROWS_PER_TRANSACTION) insertMany(from);
    return (rows / (performance.now() - t)) * 1000;
  } finally {
    table.db.close();
  }
}

/** Rows per second inserted one per commit, on a file of its own (no bulk-loaded WAL behind). */
async function singleRate(schema: FloorSchema, filename: string, rows: number): Promise<number> {
  const table = await openFloor(schema, filename);
  try {
    for (let i = 0; i < 100; i++) table.one(table.row(i));
    const t = performance.now();
    for (let i = 0; i < rows; i++) table.one(table.row(i));
    return (rows / (performance.now() - t)) * 1000;
  } finally {
    table.db.close();
  }
}
