/**
 * A job's life in SQL, as operations every dialect shares: enqueue (and the keyed insert — a
 * held key returns its holder, at most `KEYED_INSERT_TRIES` tries, one message), acquire,
 * settle (complete, fail, release, renew) and the history records a settle writes.
 *
 * Each section below keeps its own header.
 */

import { keepsOutcome } from '../../rules.js';
import type {
  AcquireRequest,
  EnqueueResult,
  HistoryOutcome,
  Job,
  JobCompletion,
  JobFailure,
  JobHistoryRecord,
  JobRef,
  LeaseRenewalRef,
  ListHistoryRequest,
  NewJob,
  RenewResult,
  SettleResult,
} from '../../store.js';
import { type DialectOps, isJobId, marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import {
  dueTime,
  HISTORY_COLUMN_NAMES,
  HISTORY_JSON_COLUMNS,
  HISTORY_TIME_COLUMNS,
  historyInsert,
  isLimited,
  readBool,
  readTime,
  rowToHistory,
  rowToJob,
  type SqlRow,
} from '../rows.js';
import { byAcquisitionOrder, candidateWhere } from '../scope-rule.js';
import type { SqlEnv } from './env.js';

// ─── enqueue ─────────────────────────────────────────────────────────────────────────────────────
/*
 * Enqueue: keyless jobs in multi-row inserts, keyed jobs one by one against their holder, and
 * the key modes (`replace`, `debounce`) as an update of a waiting holder locked first.
 */

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

// ─── the keyed insert ────────────────────────────────────────────────────────────────────────────
/*
 * The keyed insert, written once for every dialect: a job whose key is held gets the holder
 * back; when the holder finished between the insert and the read (so there is none to return),
 * the job is inserted again, at most `KEYED_INSERT_TRIES` times. A dialect gives the rounds (one
 * job at a time, or a whole batch per statement); this loop and its one message are shared.
 */

/** Tries of a keyed insert before the enqueue gives up. */
export const KEYED_INSERT_TRIES = 5;

/**
 * The key of a job was taken and let go again on every try. A plain `Error`: the store names
 * its package and the operation (`[@jobs/mysql] enqueue: key "k" kept changing hands …`).
 */
export class KeyChangingHandsError extends Error {
  constructor(keys: readonly string[]) {
    const which =
      keys.length === 1 ? `key ${JSON.stringify(keys[0])}` : `keys ${JSON.stringify(keys)}`;
    super(
      `${which} kept changing hands: its holder finished before it could be read, ${KEYED_INSERT_TRIES} times`,
    );
    this.name = 'KeyChangingHandsError';
  }
}

/**
 * Runs `round` on the pending jobs until none is left: each round inserts them (or finds their
 * holders) and returns those whose holder finished meanwhile, to be inserted again. Throws
 * `KeyChangingHandsError` naming those keys after `KEYED_INSERT_TRIES` rounds.
 */
export function* insertKeyed<T>(
  pending: readonly T[],
  keyOf: (job: T) => string | null,
  round: (pending: readonly T[]) => Operation<readonly T[]>,
): Operation<void> {
  let left = pending;
  for (let tries = 0; left.length > 0; tries++) {
    if (tries === KEYED_INSERT_TRIES) {
      const keys = [...new Set(left.map(keyOf).filter((k): k is string => k !== null))];
      throw new KeyChangingHandsError(keys);
    }
    left = yield* round(left);
  }
}

// ─── acquire ─────────────────────────────────────────────────────────────────────────────────────
/* Acquisition: leasing due jobs, and the reads that tell an engine when to look again. */

/** Acquired rows, unsorted (see `toJobs`). */
export function* acquire(c: SqlEnv, request: AcquireRequest, token: string): Operation<SqlRow[]> {
  if (request.limit <= 0 || request.types.length === 0) return [];
  return yield* c.d.ops.acquire.run(c, request, token);
}

/**
 * True when some job is an acquisition candidate for `request`: the same WHERE as `acquire`,
 * read without a lock, so a caller can skip a locking acquisition that would find nothing.
 */
export function* anyCandidate(c: SqlEnv, request: AcquireRequest): Operation<boolean> {
  if (request.limit <= 0 || request.types.length === 0) return false;
  const where = candidateWhere(c.d, request);
  const rows = (yield {
    sql: `SELECT 1 AS ${c.d.quote('one')} FROM ${c.jobs} j WHERE ${where.sql} LIMIT 1`,
    params: where.params,
  }).rows;
  return rows.length > 0;
}

/** Acquired rows as jobs in acquisition order. */
export function toJobs(rows: SqlRow[]): Job[] {
  return rows.map(rowToJob).sort(byAcquisitionOrder);
}

/** The earliest due time of a waiting job the request could acquire, or null. */
export function* nextDueAt(
  c: SqlEnv,
  request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>,
): Operation<Date | null> {
  if (request.types.length === 0) return null;
  const order = c.d.dueOrder;
  const column = (name: string): string => (order ? `j."${name}"` : `"${name}"`);
  const params: unknown[] = [...request.types];
  let where = `${column('type')} IN (${request.types.map(() => '?').join(', ')})`;
  for (const [values, name] of [
    [request.queues, 'queue'],
    [request.tenants, 'tenant_id'],
  ] as const) {
    if (!values) continue;
    if (values.length === 0) return null;
    where += ` AND ${column(name)} IN (${values.map(() => '?').join(', ')})`;
    params.push(...values);
  }
  const sql = order
    ? `SELECT ${c.d.timeText('j."due_at"')} AS due FROM ${order.from}
      WHERE ${order.waiting} AND ${where} ORDER BY j."due_at" LIMIT 1`
    : `SELECT MIN(${c.d.timeText('"due_at"')}) AS due FROM ${c.jobs}
      WHERE "state" IN ('timer', 'async') AND ${where}`;
  const row = (yield { sql: c.d.sql(sql), params }).rows[0];
  return row?.due === null || row?.due === undefined ? null : readTime(row.due);
}

// ─── settle ──────────────────────────────────────────────────────────────────────────────────────
/*
 * Settlement: what a lease holder writes — complete, fail, release, renew — each fenced by the
 * lease's token, so a stale holder changes nothing and learns which jobs it lost.
 */

/** Refs per statement: keeps parameters well under every driver's limit (SQLite: 32,766). */
export const SETTLE_CHUNK = 1_000;

/**
 * Narrows held rows to those without a cancel request: `complete` and `fail` leave a cancelled
 * job to its owner's `cancelHeld` (invariant 20: cancellation wins while the job has not
 * completed). Every dialect's own complete/fail statement has the same condition.
 */
export function notCancelled(c: SqlEnv): string {
  return ` AND "cancel_requested" = ${c.d.FALSE}`;
}

/** The ids of `lost`, in the order their refs were given. */
export function inInputOrder(refs: readonly JobRef[], lost: readonly string[]): string[] {
  const set = new Set(lost);
  return refs.filter((ref) => set.has(ref.id)).map((ref) => ref.id);
}

/**
 * `settle` needs a transaction only where there is no RETURNING (it locks, checks, then
 * writes).
 */
export function settleNeedsTransaction(c: SqlEnv): boolean {
  return !c.d.returning;
}

/** The dialect's `complete`, or `completeWithHistory` while history keeps completed jobs. */
export function completeOp(c: SqlEnv): DialectOps['complete'] {
  return keepsCompleted(c) ? c.d.ops.completeWithHistory : c.d.ops.complete;
}

/**
 * Runs `change` (an UPDATE/DELETE whose WHERE ends in `<held>`) on the rows held with the
 * given tokens and returns the refs that were not held. `params` come before the held-rows
 * parameters; `extra` narrows the held rows further. With RETURNING one statement; without,
 * the lock-then-write way (in the store's transaction).
 */
export function* settle(
  c: SqlEnv,
  refs: readonly JobRef[],
  change: (held: string) => string,
  params: unknown[],
  extra = '',
  extraParams: unknown[] = [],
): Operation<SettleResult> {
  if (refs.length > SETTLE_CHUNK) {
    const lost: string[] = [];
    for (let i = 0; i < refs.length; i += SETTLE_CHUNK) {
      const part = yield* settle(
        c,
        refs.slice(i, i + SETTLE_CHUNK),
        change,
        params,
        extra,
        extraParams,
      );
      lost.push(...part.lost);
    }
    return { lost };
  }
  const valid = refs.filter((ref) => isJobId(ref.id));
  const lostInvalid = refs.filter((ref) => !isJobId(ref.id)).map((ref) => ref.id);
  if (valid.length === 0) return { lost: lostInvalid };
  const ids = valid.map((ref) => ref.id);
  if (c.d.returning) {
    const held = `"id" IN (${marks(ids.length)}) AND ("id", "lock_token") IN (${c.d.pairs(valid.length)}) AND "state" = 'running'${extra}`;
    const heldParams = [...ids, ...valid.flatMap((ref) => [ref.id, ref.token]), ...extraParams];
    const rows = (yield {
      sql: c.d.sql(`${change(held)} RETURNING "id"`),
      params: [...params, ...heldParams],
    }).rows;
    const done = new Set(rows.map((row) => String(row.id)));
    return { lost: inInputOrder(refs, [...lostInvalid, ...ids.filter((id) => !done.has(id))]) };
  }
  // No RETURNING: lock the candidates, keep those whose token matches, then write only those.
  const rows = (yield {
    sql: c.d.sql(
      `SELECT "id", "lock_token", "lock_owner" FROM ${c.jobs} WHERE "id" IN (${marks(ids.length)}) AND "state" = 'running'${extra}${c.d.forUpdate}`,
    ),
    params: [...ids, ...extraParams],
  }).rows;
  const tokens = new Map(rows.map((row) => [String(row.id), String(row.lock_token)]));
  const held = valid.filter((ref) => tokens.get(ref.id) === ref.token).map((ref) => ref.id);
  if (held.length > 0) {
    yield {
      sql: c.d.sql(change(`"id" IN (${marks(held.length)})`)),
      params: [...params, ...held],
    };
  }
  const heldSet = new Set(held);
  return { lost: inInputOrder(refs, [...lostInvalid, ...ids.filter((id) => !heldSet.has(id))]) };
}

/**
 * Runs a dialect's settling operation (`DialectOps.complete`, …) on the refs with valid ids;
 * every ref it did not change is lost.
 */
function* settleHeld<R extends JobRef>(
  refs: readonly R[],
  change: (valid: R[]) => Operation<string[]>,
): Operation<SettleResult> {
  const valid = refs.filter((ref) => isJobId(ref.id));
  const changed = new Set(valid.length > 0 ? yield* change(valid) : []);
  return { lost: refs.filter((ref) => !changed.has(ref.id)).map((ref) => ref.id) };
}

/**
 * Deletes finished jobs held with these tokens; while history keeps completed jobs, writes
 * their records in the same statement or transaction (see `completeOp`).
 */
export function* complete(c: SqlEnv, refs: readonly JobCompletion[]): Operation<SettleResult> {
  if (refs.length === 0) return { lost: [] };
  const op = completeOp(c);
  return yield* settleHeld(refs, (valid) => op.run(c, valid));
}

/** Failed attempts: back to `timer` after the delay with one retry fewer, or deadletter. */
export function* fail(c: SqlEnv, failures: readonly JobFailure[]): Operation<SettleResult> {
  if (failures.length === 0) return { lost: [] };
  return yield* settleHeld(failures, (valid) => c.d.ops.fail.run(c, valid));
}

/** Gives jobs back unstarted: `async` again, lock cleared, the attempt not counted. */
export function* release(c: SqlEnv, refs: readonly JobRef[]): Operation<SettleResult> {
  if (refs.length === 0) return { lost: [] };
  return yield* settleHeld(refs, (valid) => c.d.ops.release.run(c, valid));
}

/**
 * Extends the leases of `owner`'s jobs to now + `leaseMs`, writes the progress the refs carry in
 * the same statement, and answers which renewed jobs have a cancel request.
 */
export function* renewLeases(
  c: SqlEnv,
  owner: string,
  leaseMs: number,
  refs: readonly LeaseRenewalRef[],
): Operation<RenewResult> {
  if (refs.length === 0) return { lost: [] };
  const valid = refs.filter((ref) => isJobId(ref.id));
  const answer =
    valid.length > 0
      ? yield* c.d.ops.renew.run(c, owner, leaseMs, valid)
      : { renewed: [], cancelRequested: [] };
  const renewed = new Set(answer.renewed);
  const lost = refs.filter((ref) => !renewed.has(ref.id)).map((ref) => ref.id);
  // `{ lost }`, plus `cancelRequested` only when there is any (a plain answer stays plain).
  return answer.cancelRequested.length > 0
    ? { lost, cancelRequested: [...answer.cancelRequested] }
    : { lost };
}

// ─── history records ─────────────────────────────────────────────────────────────────────────────
/*
 * History: finished jobs kept in `<prefix>jobs_history`, written in the same statement or
 * transaction that finishes them (`settle.ts` for completions, `admin.ts` for deletions from
 * the dead-letter area), read by operators, pruned in small batches by one process at a time.
 * The table's columns: `rows.ts`.
 */

/** History keeps completed jobs: completions write records. */
export function keepsCompleted(c: SqlEnv): boolean {
  return keepsOutcome(c.historySettings.keep, 'completed');
}

/** History keeps jobs deleted from the dead-letter area. */
export function keepsDeadletter(c: SqlEnv): boolean {
  return keepsOutcome(c.historySettings.keep, 'deadletter');
}

/**
 * `INSERT INTO history (…) SELECT <job columns of alias j>, <outcome>, <result>, <duration>,
 * now` in shared SQL; the caller appends `FROM … j …`. `result`/`duration` are SQL expressions.
 */
export function copyToHistory(
  c: SqlEnv,
  outcome: HistoryOutcome,
  result = 'NULL',
  duration = 'NULL',
): string {
  return historyInsert(c.history, 'j', `'${outcome}'`, result, duration, c.d.now);
}

/** Select list of history rows, as `rowToHistory` reads them. */
function historyColumns(c: SqlEnv): string {
  return HISTORY_COLUMN_NAMES.map((name) => {
    const column = `"${name}"`;
    if (HISTORY_TIME_COLUMNS.has(name)) return `${c.d.timeText(column)} AS "${name}"`;
    if (HISTORY_JSON_COLUMNS.has(name) && c.d.jsonText)
      return `${c.d.jsonText(column)} AS "${name}"`;
    return column;
  }).join(', ');
}

export function* getHistory(c: SqlEnv, id: string): Operation<JobHistoryRecord | null> {
  if (!isJobId(id)) return null;
  const row = (yield {
    sql: c.d.sql(`SELECT ${historyColumns(c)} FROM ${c.history} WHERE "id" = ?`),
    params: [id],
  }).rows[0];
  return row ? rowToHistory(row) : null;
}

/** See `JobStore.amendHistory`: the final result and duration of a job completed in a handler's transaction. */
export function* amendHistory(
  c: SqlEnv,
  id: string,
  resultJson: string | null,
  durationMs: number,
): Operation<boolean> {
  if (!isJobId(id)) return false;
  const result = yield {
    sql: c.d.sql(
      `UPDATE ${c.history} SET "result" = ?, "duration_ms" = ? WHERE "id" = ? AND "outcome" = 'completed'`,
    ),
    params: [resultJson, Math.max(0, Math.round(durationMs)), id],
  };
  return result.affected > 0;
}

/** Newest first by (finished_at, id), after the keyset position; see `JobStore.listHistory`. */
export function* listHistory(
  c: SqlEnv,
  request: ListHistoryRequest,
): Operation<JobHistoryRecord[]> {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (request.type !== undefined) {
    parts.push(`"type" = ?`);
    params.push(request.type);
  }
  if (request.outcome !== undefined) {
    parts.push(`"outcome" = ?`);
    params.push(request.outcome);
  }
  if (request.since !== undefined) {
    parts.push(`"finished_at" >= ?`);
    params.push(c.d.time(request.since));
  }
  if (request.until !== undefined) {
    parts.push(`"finished_at" < ?`);
    params.push(c.d.time(request.until));
  }
  const after = request.after ?? null;
  if (after !== null) {
    if (!isJobId(after.id)) return [];
    const at = c.d.time(after.finishedAt);
    parts.push(`("finished_at" < ? OR ("finished_at" = ? AND "id" < ?))`);
    params.push(at, at, after.id);
  }
  const where = parts.length > 0 ? `WHERE ${parts.join(' AND ')}` : '';
  const rows = (yield {
    sql: c.d.sql(
      `SELECT ${historyColumns(c)} FROM ${c.history} ${where}
        ORDER BY "finished_at" DESC, "id" DESC LIMIT ?`,
    ),
    params: [...params, request.limit],
  }).rows;
  return rows.map(rowToHistory);
}

/**
 * Deletes at most `limit` records older than `retentionMs` on the store's clock, oldest
 * first, under the dialect's pruning lock; null when another process holds it. With history in
 * partitions, whole partitions past the retention are dropped first (their records counted, not
 * limited: dropping one costs the same for any number).
 */
export function* pruneHistory(
  c: SqlEnv,
  retentionMs: number,
  limit: number,
): Operation<number | null> {
  const lock = c.d.historyLock;
  if (lock) {
    const got = (yield lock.take).rows[0]?.got;
    if (!readBool(got)) return null;
  }
  try {
    const partitions = c.d.historyPartitions;
    const dropped = partitions ? yield* partitions.dropBefore(retentionMs) : 0;
    // The inner derived table: MySQL takes no LIMIT in an IN subquery, but does in a derived one.
    const result = yield {
      sql: c.d.sql(
        `DELETE FROM ${c.history} WHERE "id" IN (SELECT "id" FROM (
          SELECT "id" FROM ${c.history} WHERE "finished_at" < ${c.d.nowPlusMs}
          ORDER BY "finished_at", "id" LIMIT ?) expired)`,
      ),
      params: [-retentionMs, limit],
    };
    return dropped + result.affected;
  } finally {
    if (lock) for (const query of lock.release) yield query;
  }
}
