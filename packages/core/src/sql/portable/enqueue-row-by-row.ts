/**
 * Enqueue row by row: keyless jobs in multi-row inserts, keyed jobs one at a time against
 * their holder (`insertKeyed`). A dialect without one statement for a whole batch (SQLite)
 * picks it in its `ops`, giving its own inserts.
 */
import { StoreError } from '../../errors.js';
import type { EnqueueResult, NewJob } from '../../store.js';
import type { OpSpec, SqlEnv } from '../dialect.js';
import type { Operation, Query } from '../executor.js';
import { now } from '../operations/enqueue.js';
import { newJobValues, rowToJob, type SqlRow, type SqlValue } from '../rows.js';
import { insertKeyed } from './keyed-insert.js';

/** Rows per multi-row insert: well under every driver's parameter limit (SQLite: 32,766). */
const INSERT_CHUNK = 500;

/** The inserts a dialect gives `enqueueRowByRow`. */
export interface RowInserts {
  /** Inserts keyless job rows (`newJobValues`) in one statement where it can; returns them in input order. */
  insertJobs(rows: readonly (readonly unknown[])[]): Operation<SqlRow[]>;
  /** Inserts one job row unless its key is taken; returns the row, or null on a key conflict. */
  insertJob(values: readonly unknown[]): Operation<SqlRow | null>;
  /**
   * Locks the given job keys (sorted, deduplicated) until the transaction ends, so two batches
   * holding keys in opposite orders queue up instead of deadlocking. Absent where the database
   * resolves such deadlocks at once anyway (InnoDB) or writers are serialised (SQLite).
   */
  lockKeys?(keys: readonly string[]): Query | null;
  /**
   * These jobs are written by one statement and no read (SQLite: one keyless job), so the
   * enqueue needs no transaction of its own. Absent: it always needs one.
   */
  oneStatement?(jobs: readonly NewJob[]): boolean;
}

/** `enqueue` row by row over the dialect's `inserts`; sends `c.notify` when any job was created. */
export function enqueueRowByRow(inserts: RowInserts): OpSpec<[readonly NewJob[]], EnqueueResult[]> {
  return {
    run: (c, jobs) => insertRowByRow(c, inserts, jobs),
    transaction: (_, jobs) => !(inserts.oneStatement?.(jobs) ?? false),
  };
}

function* insertRowByRow(
  c: SqlEnv,
  { insertJobs, insertJob, lockKeys }: RowInserts,
  jobs: readonly NewJob[],
): Operation<EnqueueResult[]> {
  const at = yield* now(c);
  const results: EnqueueResult[] = [];
  const encode = { time: c.d.time, bool: c.d.bool };
  const keys = [
    ...new Set(jobs.map((job) => job.key).filter((k): k is string => typeof k === 'string')),
  ];
  if (keys.length > 1) {
    const lock = lockKeys?.(keys.sort()) ?? null;
    if (lock) yield lock;
  }
  let run: NewJob[] = [];
  function* flush(): Operation<void> {
    if (run.length === 0) return;
    const rows = yield* insertJobs(run.map((job) => newJobValues(job, at, encode)));
    if (rows.length !== run.length) {
      throw new StoreError(
        `[${c.label}] enqueue: inserted ${run.length} jobs but read back ${rows.length}`,
      );
    }
    for (const row of rows) results.push({ job: rowToJob(row), created: true });
    run = [];
  }
  for (const job of jobs) {
    if ((job.key ?? null) === null) {
      run.push(job);
      if (run.length >= INSERT_CHUNK) yield* flush();
      continue;
    }
    yield* flush();
    results.push(yield* enqueueKeyed(c, insertJob, job, at, encode));
  }
  yield* flush();
  if (c.notify && results.some((r) => r.created)) yield c.notify;
  return results;
}

function* enqueueKeyed(
  c: SqlEnv,
  insertJob: RowInserts['insertJob'],
  job: NewJob,
  at: Date,
  encode: { time: (d: Date) => SqlValue; bool: (b: boolean) => SqlValue },
): Operation<EnqueueResult> {
  let result: EnqueueResult | undefined;
  yield* insertKeyed(
    [job],
    (j) => j.key,
    function* () {
      const inserted = yield* insertJob(newJobValues(job, at, encode));
      if (inserted) {
        result = { job: rowToJob(inserted), created: true };
        return [];
      }
      const holder = (yield {
        sql: c.d.sql(
          `SELECT ${c.d.jobColumns()} FROM ${c.jobs} WHERE "job_key" = ?${c.d.latestRead}`,
        ),
        params: [job.key],
      }).rows[0];
      if (!holder) return [job];
      result = { job: rowToJob(holder), created: false };
      return [];
    },
  );
  return result as EnqueueResult;
}
