/**
 * Enqueue row by row: keyless jobs in multi-row inserts, keyed jobs one at a time against
 * their holder (`insertKeyed`). A dialect without one statement for a whole batch (SQLite)
 * picks it in its `ops`, giving its own inserts.
 */
import { StoreError } from '../../errors.js';
import type { EnqueueResult, NewJob } from '../../store.js';
import type { OpSpec, SqlEnv } from '../dialect.js';
import type { Operation, Query } from '../executor.js';
import { insertKeyed, now } from '../operations/jobs.js';
import { insertedJob, newJobValues, rowToJob, type SqlRow, type SqlValue } from '../rows.js';

/** Rows per multi-row insert: well under every driver's parameter limit (SQLite: 32,766). */
const INSERT_CHUNK = 500;

/** The inserts a dialect gives `enqueueRowByRow`. */
export interface RowInserts {
  /**
   * Inserts keyless job rows (`newJobValues`) in one statement where it can; returns their ids
   * in input order (the jobs themselves are built from what was sent: `insertedJob`).
   */
  insertJobs(rows: readonly (readonly unknown[])[]): Operation<string[]>;
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
  if (lockKeys) {
    const keys = [
      ...new Set(jobs.map((job) => job.key).filter((k): k is string => typeof k === 'string')),
    ];
    const lock = keys.length > 1 ? lockKeys(keys.sort()) : null;
    if (lock) yield lock;
  }
  // Keyless jobs in runs of at most `INSERT_CHUNK`, each keyed job alone, in input order.
  let from = 0;
  for (let i = 0; i < jobs.length; i++) {
    const job = jobs[i] as NewJob;
    if ((job.key ?? null) === null) {
      if (i + 1 - from < INSERT_CHUNK) continue;
      yield* insertRun(c, insertJobs, jobs, from, i + 1, at, results);
    } else {
      if (from < i) yield* insertRun(c, insertJobs, jobs, from, i, at, results);
      results.push(yield* enqueueKeyed(c, insertJob, job, at));
    }
    from = i + 1;
  }
  if (from < jobs.length) yield* insertRun(c, insertJobs, jobs, from, jobs.length, at, results);
  if (c.notify && results.some((r) => r.created)) yield c.notify;
  return results;
}

/** Inserts the keyless `jobs[from..to)` in one `insertJobs`; appends them to `results`. */
function* insertRun(
  c: SqlEnv,
  insertJobs: RowInserts['insertJobs'],
  jobs: readonly NewJob[],
  from: number,
  to: number,
  at: Date,
  results: EnqueueResult[],
): Operation<void> {
  const values: SqlValue[][] = new Array(to - from);
  for (let k = from; k < to; k++) values[k - from] = newJobValues(jobs[k] as NewJob, at, c.d);
  const ids = yield* insertJobs(values);
  if (ids.length !== values.length) {
    throw new StoreError(
      `[${c.label}] enqueue: inserted ${values.length} jobs but read back ${ids.length}`,
    );
  }
  for (let k = 0; k < ids.length; k++) {
    results.push({
      job: insertedJob(jobs[from + k] as NewJob, { id: ids[k] as string, createdAt: at }),
      created: true,
    });
  }
}

function* enqueueKeyed(
  c: SqlEnv,
  insertJob: RowInserts['insertJob'],
  job: NewJob,
  at: Date,
): Operation<EnqueueResult> {
  let result: EnqueueResult | undefined;
  yield* insertKeyed(
    [job],
    (j) => j.key,
    function* () {
      const inserted = yield* insertJob(newJobValues(job, at, c.d));
      if (inserted) {
        result = {
          job: insertedJob(job, { id: String(inserted.id), createdAt: at }),
          created: true,
        };
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
