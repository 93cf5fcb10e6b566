/** Enqueue: keyless jobs in multi-row inserts, keyed jobs one by one against their holder. */
import { StoreError } from '../../errors.js';
import type { EnqueueResult, NewJob } from '../../store.js';
import type { Operation } from '../executor.js';
import { newJobValues, readTime, rowToJob, type SqlValue } from '../rows.js';
import type { SqlContext } from './context.js';

/** Rows per multi-row insert: well under every driver's parameter limit (SQLite: 32,766). */
const INSERT_CHUNK = 500;

export function* now(c: SqlContext): Operation<Date> {
  if (c.d.clockNow) return c.d.clockNow();
  const row = (yield { sql: `SELECT ${c.d.timeText(c.d.now)} AS now`, params: [] }).rows[0];
  return readTime(row?.now);
}

/**
 * Inserts jobs in input order. A job whose key an unfinished job holds is not inserted: the
 * holder comes back with `created: false`. Runs inside one transaction (the caller's or the
 * store's), so a rollback undoes all of it, the wake-up included.
 */
export function* enqueue(c: SqlContext, jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
  if (jobs.length === 0) return [];
  if (c.d.enqueueJobs) return yield* c.d.enqueueJobs(jobs, c.notify);
  if (!c.d.insertJobs || !c.d.insertJob) {
    throw new StoreError(`[${c.label}] enqueue: the dialect has no enqueueJobs nor insertJobs`);
  }
  const insertJobs = c.d.insertJobs.bind(c.d);
  const insertJob = c.d.insertJob.bind(c.d);
  const at = yield* now(c);
  const results: EnqueueResult[] = [];
  const encode = { time: c.d.time, bool: c.d.bool };
  const keys = [
    ...new Set(jobs.map((job) => job.key).filter((k): k is string => typeof k === 'string')),
  ];
  if (keys.length > 1) {
    const lock = c.d.lockKeys?.(keys.sort()) ?? null;
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
  c: SqlContext,
  insertJob: NonNullable<SqlContext['d']['insertJob']>,
  job: NewJob,
  at: Date,
  encode: { time: (d: Date) => SqlValue; bool: (b: boolean) => SqlValue },
): Operation<EnqueueResult> {
  // A key conflict returns the holder; if the holder finished meanwhile, insert again.
  for (let attempt = 0; attempt < 5; attempt++) {
    const inserted = yield* insertJob(newJobValues(job, at, encode));
    if (inserted) return { job: rowToJob(inserted), created: true };
    const holder = (yield {
      sql: c.d.sql(
        `SELECT ${c.d.jobColumns()} FROM ${c.jobs} WHERE "job_key" = ?${c.d.latestRead}`,
      ),
      params: [job.key],
    }).rows[0];
    if (holder) return { job: rowToJob(holder), created: false };
  }
  throw new StoreError(`[${c.label}] enqueue: key ${JSON.stringify(job.key)} kept changing hands`);
}
