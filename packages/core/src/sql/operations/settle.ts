/**
 * Settlement: what a lease holder writes — complete, fail, release, renew — each fenced by the
 * lease's token, so a stale holder changes nothing and learns which jobs it lost.
 */
import type { JobCompletion, JobFailure, JobRef, SettleResult } from '../../store.js';
import { isJobId, marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import type { SqlContext } from './context.js';
import { keepsCompleted, recordCompleted } from './history.js';

/** Refs per statement: keeps parameters well under every driver's limit (SQLite: 32,766). */
const SETTLE_CHUNK = 1_000;

/** The ids of `lost`, in the order their refs were given. */
export function inInputOrder(refs: readonly JobRef[], lost: readonly string[]): string[] {
  const set = new Set(lost);
  return refs.filter((ref) => set.has(ref.id)).map((ref) => ref.id);
}

/** Settling needs a transaction only where there is no RETURNING (lock, check, then write). */
export function settleNeedsTransaction(c: SqlContext): boolean {
  return !c.d.returning;
}

/**
 * `complete` needs a transaction: it copies completed jobs to history in more than one
 * statement, or locks, checks, then deletes.
 */
export function completeNeedsTransaction(c: SqlContext): boolean {
  if (keepsCompleted(c)) return !c.d.historyCompleteAtomic;
  return !c.d.completeHeld && settleNeedsTransaction(c);
}

/**
 * Runs `change` (an UPDATE/DELETE whose WHERE ends in `<held>`) on the rows held with the
 * given tokens and returns the refs that were not held. `params` come before the held-rows
 * parameters; `extra` narrows the held rows further. `before` runs on the held ids before
 * `change` (they are locked then: the lock-then-write way is taken).
 */
function* settle(
  c: SqlContext,
  refs: readonly JobRef[],
  change: (held: string) => string,
  params: unknown[],
  extra = '',
  extraParams: unknown[] = [],
  before?: (held: string[]) => Operation<void>,
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
        before,
      );
      lost.push(...part.lost);
    }
    return { lost };
  }
  const valid = refs.filter((ref) => isJobId(ref.id));
  const lostInvalid = refs.filter((ref) => !isJobId(ref.id)).map((ref) => ref.id);
  if (valid.length === 0) return { lost: lostInvalid };
  const ids = valid.map((ref) => ref.id);
  if (c.d.returning && !before) {
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
      `SELECT "id", "lock_token", "lock_owner" FROM ${c.jobs} WHERE "id" IN (${marks(ids.length)}) AND "state" = 'running'${extra} FOR UPDATE`,
    ),
    params: [...ids, ...extraParams],
  }).rows;
  const tokens = new Map(rows.map((row) => [String(row.id), String(row.lock_token)]));
  const held = valid.filter((ref) => tokens.get(ref.id) === ref.token).map((ref) => ref.id);
  if (held.length > 0) {
    if (before) yield* before(held);
    yield {
      sql: c.d.sql(change(`"id" IN (${marks(held.length)})`)),
      params: [...params, ...held],
    };
  }
  const heldSet = new Set(held);
  return { lost: inInputOrder(refs, [...lostInvalid, ...ids.filter((id) => !heldSet.has(id))]) };
}

/**
 * Runs a dialect's one-statement settle (`Dialect.completeHeld`, …) on the refs with valid ids;
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
 * their records in the same statement or transaction (see `completeNeedsTransaction`).
 */
export function* complete(c: SqlContext, refs: readonly JobCompletion[]): Operation<SettleResult> {
  if (refs.length === 0) return { lost: [] };
  if (keepsCompleted(c)) {
    const own = c.d.completeHeldWithHistory;
    if (own) return yield* settleHeld(refs, (valid) => own.call(c.d, valid));
    return yield* settle(
      c,
      refs,
      (held) => `DELETE FROM ${c.jobs} WHERE ${held}`,
      [],
      '',
      [],
      (held) => recordCompleted(c, refs, held),
    );
  }
  const { completeHeld } = c.d;
  if (completeHeld) return yield* settleHeld(refs, (valid) => completeHeld.call(c.d, valid));
  return yield* settle(c, refs, (held) => `DELETE FROM ${c.jobs} WHERE ${held}`, []);
}

/** Failed attempts: back to `timer` after the delay with one retry fewer, or deadletter. */
export function* fail(c: SqlContext, failures: readonly JobFailure[]): Operation<SettleResult> {
  const { failHeld } = c.d;
  if (failHeld) return yield* settleHeld(failures, (valid) => failHeld.call(c.d, valid));
  const lost: string[] = [];
  // Same outcome, delay and error → one statement; failures in one batch usually share them.
  const groups = new Map<string, JobFailure[]>();
  for (const f of failures) {
    const key = JSON.stringify([f.deadletter, f.retryDelayMs, f.error.message, f.error.stack]);
    const group = groups.get(key);
    if (group) group.push(f);
    else groups.set(key, [f]);
  }
  for (const group of groups.values()) {
    const first = group[0] as JobFailure;
    const set = first.deadletter
      ? `"state" = 'deadletter'`
      : `"state" = 'timer', "due_at" = ${c.d.nowPlusMs}, "retries_left" = "retries_left" - 1`;
    const params: unknown[] = first.deadletter ? [] : [first.retryDelayMs];
    params.push(first.error.message, first.error.stack);
    const result = yield* settle(
      c,
      group,
      (held) =>
        `UPDATE ${c.jobs} SET ${set}, "lock_owner" = NULL, "lock_expires_at" = NULL, "lock_token" = NULL,
            "last_error_message" = ?, "last_error_stack" = ? WHERE ${held}`,
      params,
    );
    lost.push(...result.lost);
  }
  return { lost: inInputOrder(failures, lost) };
}

/** Gives jobs back unstarted: `async` again, lock cleared, the attempt not counted. */
export function* release(c: SqlContext, refs: readonly JobRef[]): Operation<SettleResult> {
  if (refs.length === 0) return { lost: [] };
  const { releaseHeld } = c.d;
  if (releaseHeld) {
    return yield* settleHeld(refs, (valid) => releaseHeld.call(c.d, valid, c.notify));
  }
  const result = yield* settle(
    c,
    refs,
    (held) =>
      `UPDATE ${c.jobs} SET "state" = 'async', "attempts" = "attempts" - 1, "lock_owner" = NULL,
          "lock_expires_at" = NULL, "lock_token" = NULL WHERE ${held}`,
    [],
  );
  // Released jobs are acquirable at once (e.g. on shutdown): wake the other engines.
  if (c.notify && result.lost.length < refs.length) yield c.notify;
  return result;
}

/** Extends the leases of `owner`'s jobs to now + `leaseMs`. */
export function* renewLeases(
  c: SqlContext,
  owner: string,
  leaseMs: number,
  refs: readonly JobRef[],
): Operation<SettleResult> {
  if (refs.length === 0) return { lost: [] };
  const { renewHeld } = c.d;
  if (renewHeld) {
    return yield* settleHeld(refs, (valid) => renewHeld.call(c.d, owner, leaseMs, valid));
  }
  if (!c.d.returning) return yield* renewWithoutReturning(c, owner, leaseMs, refs);
  return yield* settle(
    c,
    refs,
    (held) => `UPDATE ${c.jobs} SET "lock_expires_at" = ${c.d.nowPlusMs} WHERE ${held}`,
    [leaseMs],
    ` AND "lock_owner" = ?`,
    [owner],
  );
}

/**
 * Renewal without RETURNING, the heartbeat of every running job: one UPDATE, no transaction.
 * Only when it touched fewer rows than asked does a read find which refs are no longer held (a
 * token never comes back, so a row holding it now held it during the UPDATE).
 */
function* renewWithoutReturning(
  c: SqlContext,
  owner: string,
  leaseMs: number,
  refs: readonly JobRef[],
): Operation<SettleResult> {
  const lost = refs.filter((ref) => !isJobId(ref.id)).map((ref) => ref.id);
  const valid = refs.filter((ref) => isJobId(ref.id));
  for (let i = 0; i < valid.length; i += SETTLE_CHUNK) {
    const part = valid.slice(i, i + SETTLE_CHUNK);
    const ids = part.map((ref) => ref.id);
    const updated = yield {
      sql: c.d.sql(
        `UPDATE ${c.jobs} SET "lock_expires_at" = ${c.d.nowPlusMs}
            WHERE "id" IN (${marks(ids.length)}) AND ("id", "lock_token") IN (${c.d.pairs(part.length)})
              AND "state" = 'running' AND "lock_owner" = ?`,
      ),
      params: [leaseMs, ...ids, ...part.flatMap((ref) => [ref.id, ref.token]), owner],
    };
    if (updated.affected === part.length) continue;
    const held = (yield {
      sql: c.d.sql(
        `SELECT "id", "lock_token" FROM ${c.jobs}
            WHERE "id" IN (${marks(ids.length)}) AND "state" = 'running' AND "lock_owner" = ?`,
      ),
      params: [...ids, owner],
    }).rows;
    const tokens = new Map(held.map((row) => [String(row.id), String(row.lock_token)]));
    lost.push(...part.filter((ref) => tokens.get(ref.id) !== ref.token).map((ref) => ref.id));
  }
  return { lost: inInputOrder(refs, lost) };
}
