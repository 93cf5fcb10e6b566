/**
 * Enqueue: keyless jobs in multi-row inserts, keyed jobs one by one against their holder, and
 * the key modes (`replace`, `debounce`) as an update of a waiting holder locked first.
 */
import { StoreError } from '../../errors.js';
import type { EnqueueResult, Job, NewJob } from '../../store.js';
import type { Operation } from '../executor.js';
import { dueTime, isLimited, newJobValues, readTime, rowToJob, type SqlValue } from '../rows.js';
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
 * holder comes back with `created: false` — changed first for `keyMode` `replace`/`debounce`
 * (see `changeHolder`). Runs inside one transaction (the caller's or the store's), so a rollback
 * undoes all of it, the wake-up included.
 */
export function* enqueue(c: SqlContext, jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
  return jobs.some(changesHolder) ? yield* insertOrChange(c, jobs) : yield* insertAll(c, jobs);
}

/** The scopes of limited jobs among `jobs` (see `SqlJobStore.enqueue`). */
export function limitedScopes(jobs: readonly NewJob[]): string[] {
  return jobs
    .filter((job) => job.scope !== null && isLimited(job))
    .map((job) => job.scope as string);
}

function* insertOrChange(c: SqlContext, jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
  const at = yield* now(c);
  const out: (EnqueueResult | undefined)[] = new Array(jobs.length);
  let changed = false;
  // Holders this transaction sees: locked (exclusively, by id) before anything else touches
  // them, then changed — so concurrent enqueuers queue on the row, the last one wins, and no
  // shared lock taken first has to be upgraded (the deadlock of two callers' transactions).
  for (const [i, job] of jobs.entries()) {
    if (!changesHolder(job)) continue;
    const seen = (yield {
      sql: c.d.sql(`SELECT "id" FROM ${c.jobs} WHERE "job_key" = ?`),
      params: [job.key],
    }).rows[0];
    if (!seen) continue;
    // Row locks where the database has them; SQLite's transaction holds its one write lock.
    const forUpdate = c.d.lockSkipLocked ? ' FOR UPDATE' : '';
    const row = (yield {
      sql: c.d.sql(`SELECT ${c.d.jobColumns()} FROM ${c.jobs} WHERE "id" = ?${forUpdate}`),
      params: [seen.id],
    }).rows[0];
    if (!row) continue; // finished meanwhile: inserted below
    const holder = rowToJob(row);
    if (holder.state !== 'timer' && holder.state !== 'async' && holder.state !== 'blocked') {
      out[i] = { job: holder, created: false };
      continue;
    }
    const now = yield* changeHolder(c, job, holder.id, at);
    if (!now) continue; // finished meanwhile: inserted below
    out[i] = { job: now, created: false };
    changed = true;
  }
  const rest = jobs.map((_, i) => i).filter((i) => out[i] === undefined);
  const inserted = yield* insertAll(
    c,
    rest.map((i) => jobs[i] as NewJob),
  );
  const createdHere = new Set(inserted.filter((r) => r.created).map((r) => r.job.id));
  for (const [k, i] of rest.entries()) {
    const result = inserted[k] as EnqueueResult;
    const job = jobs[i] as NewJob;
    // A key given twice in this call: the holder is this call's own row, changed in order. A
    // holder this transaction could not see (created concurrently) is returned as it is: that
    // enqueue counts as the later one.
    if (result.created || !changesHolder(job) || !createdHere.has(result.job.id)) {
      out[i] = result;
      continue;
    }
    const now = yield* changeHolder(c, job, result.job.id, at);
    out[i] = now
      ? { job: now, created: false }
      : ((yield* insertAll(c, [job]))[0] as EnqueueResult);
  }
  if (changed && c.notify) yield c.notify;
  return out as EnqueueResult[];
}

/** A keyed job whose `keyMode` changes a waiting holder (`replace`, `debounce`). */
function changesHolder(job: NewJob): boolean {
  return job.key !== null && (job.keyMode ?? 'keep') !== 'keep';
}

/**
 * Gives the holder `id`, while it waits, `job`'s payload and due time (`replace`), or its
 * payload and the later of the two due times (`debounce`); returns it as it is now (running,
 * when an engine took it first), or null when it finished meanwhile.
 */
function* changeHolder(c: SqlContext, job: NewJob, id: string, at: Date): Operation<Job | null> {
  const due = c.d.time(dueTime(job, at));
  const state = dueTime(job, at).getTime() > at.getTime() ? 'timer' : 'async';
  const payload = JSON.stringify(job.payload === undefined ? null : job.payload);
  yield job.keyMode === 'replace'
    ? {
        sql: c.d.sql(`UPDATE ${c.jobs} SET "payload" = ?, "state" = ?, "due_at" = ?
          WHERE "id" = ? AND "state" IN ('timer', 'async', 'blocked')`),
        params: [payload, state, due, id],
      }
    : {
        // `state` before `due_at`: MySQL reads columns assigned earlier in the same SET.
        sql: c.d.sql(`UPDATE ${c.jobs} SET "payload" = ?,
            "state" = CASE WHEN "due_at" < ? THEN ? ELSE "state" END,
            "due_at" = CASE WHEN "due_at" < ? THEN ? ELSE "due_at" END
          WHERE "id" = ? AND "state" IN ('timer', 'async', 'blocked')`),
        params: [payload, due, state, due, due, id],
      };
  const row = (yield {
    sql: c.d.sql(`SELECT ${c.d.jobColumns()} FROM ${c.jobs} WHERE "id" = ?`),
    params: [id],
  }).rows[0];
  return row ? rowToJob(row) : null;
}

/** Inserts the jobs; a held key returns its holder (`created: false`). */
function* insertAll(c: SqlContext, jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
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
