/**
 * Enqueue: keyless jobs in multi-row inserts, keyed jobs one by one against their holder, and
 * the key modes (`replace`, `debounce`) as an update of a waiting holder locked first.
 */
import type { EnqueueResult, Job, NewJob } from '../../store.js';
import type { Operation } from '../executor.js';
import { dueTime, isLimited, readTime, rowToJob } from '../rows.js';
import type { SqlEnv } from './env.js';

export function* now(c: SqlEnv): Operation<Date> {
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
export function* enqueue(c: SqlEnv, jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
  return jobs.some(changesHolder) ? yield* insertOrChange(c, jobs) : yield* insertAll(c, jobs);
}

/** The scopes of limited jobs among `jobs` (see `SqlJobStore.enqueue`). */
export function limitedScopes(jobs: readonly NewJob[]): string[] {
  return jobs
    .filter((job) => job.scope !== null && isLimited(job))
    .map((job) => job.scope as string);
}

function* insertOrChange(c: SqlEnv, jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
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
    const forUpdate = c.d.forUpdate;
    const row = (yield {
      sql: c.d.sql(`SELECT ${c.d.jobColumns()} FROM ${c.jobs} WHERE "id" = ?${forUpdate}`),
      params: [seen.id],
    }).rows[0];
    if (!row) continue; // finished meanwhile: inserted below
    const holder = rowToJob(row);
    if (holder.state === 'running') {
      // Its handler has the payload already: the change runs after it (a follow-up).
      yield* queueFollowup(c, job, holder.id, at);
      out[i] = { job: holder, created: false };
      continue;
    }
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
export function changesHolder(job: NewJob): boolean {
  return job.key !== null && (job.keyMode ?? 'keep') !== 'keep';
}

/**
 * Gives the holder `id`, while it waits, `job`'s payload and due time (`replace`), or its
 * payload and the later of the two due times (`debounce`); returns it as it is now (running,
 * when an engine took it first), or null when it finished meanwhile.
 */
function* changeHolder(c: SqlEnv, job: NewJob, id: string, at: Date): Operation<Job | null> {
  // The waiting holder carries the latest change now: a follow-up queued while it ran is moot.
  yield { sql: c.d.sql(`DELETE FROM ${c.followups} WHERE "job_key" = ?`), params: [job.key] };
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

/** A change kept for a running holder: its `NewJob` fields, the due time absolute (epoch ms). */
interface FollowupJob extends Omit<NewJob, 'dueAt' | 'delayMs'> {
  dueAt: number;
}

/**
 * Keeps `job` (a `replace`/`debounce` change) as the follow-up of the running holder `holderId`
 * of its key: the latest change wins, and `debounce` keeps the later of the two due times. The
 * holder's row is locked by the caller, so concurrent changes of one key queue on it.
 */
function* queueFollowup(c: SqlEnv, job: NewJob, holderId: string, at: Date): Operation<void> {
  let due = dueTime(job, at).getTime();
  if (job.keyMode === 'debounce') {
    const earlier = (yield {
      sql: c.d.sql(`SELECT "job" FROM ${c.followups} WHERE "job_key" = ?`),
      params: [job.key],
    }).rows[0];
    if (earlier) due = Math.max(due, fromFollowup(earlier.job).dueAt?.getTime() ?? due);
  }
  const { dueAt: _, delayMs: __, ...fields } = job;
  const stored: FollowupJob = { ...fields, dueAt: due };
  yield { sql: c.d.sql(`DELETE FROM ${c.followups} WHERE "job_key" = ?`), params: [job.key] };
  yield {
    sql: c.d.sql(
      `INSERT INTO ${c.followups} ("job_key", "holder_id", "job", "created_at") VALUES (?, ?, ?, ?)`,
    ),
    params: [job.key, holderId, JSON.stringify(stored), c.d.time(at)],
  };
}

/** The change a follow-up row keeps (its `job` column, JSON text or parsed), as a `NewJob`. */
export function fromFollowup(value: unknown): NewJob {
  const stored = (typeof value === 'string' ? JSON.parse(value) : value) as FollowupJob;
  return { ...stored, dueAt: new Date(stored.dueAt), delayMs: 0 };
}

/** Inserts the jobs by the dialect's `enqueue`; a held key returns its holder (`created: false`). */
function* insertAll(c: SqlEnv, jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
  if (jobs.length === 0) return [];
  return yield* c.d.ops.enqueue.run(c, jobs);
}
