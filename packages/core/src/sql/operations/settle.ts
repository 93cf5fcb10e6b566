/**
 * Settlement: what a lease holder writes — complete, fail, release, renew — each fenced by the
 * lease's token, so a stale holder changes nothing and learns which jobs it lost.
 */
import type {
  JobCompletion,
  JobFailure,
  JobRef,
  LeaseRenewalRef,
  RenewResult,
  SettleResult,
} from '../../store.js';
import { isJobId, marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import { readBool } from '../rows.js';
import type { SqlContext } from './context.js';
import { keepsCompleted, recordCompleted } from './history.js';

/** Refs per statement: keeps parameters well under every driver's limit (SQLite: 32,766). */
const SETTLE_CHUNK = 1_000;

/**
 * Narrows held rows to those without a cancel request: `complete` and `fail` leave a cancelled
 * job to its owner's `cancelHeld` (invariant 20: cancellation wins while the job has not
 * completed). Every dialect's own complete/fail statement has the same condition.
 */
export function notCancelled(c: SqlContext): string {
  return ` AND "cancel_requested" = ${c.d.FALSE}`;
}

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
export function* settle(
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
      notCancelled(c),
      [],
      (held) => recordCompleted(c, refs, held),
    );
  }
  const { completeHeld } = c.d;
  if (completeHeld) return yield* settleHeld(refs, (valid) => completeHeld.call(c.d, valid));
  return yield* settle(
    c,
    refs,
    (held) => `DELETE FROM ${c.jobs} WHERE ${held}`,
    [],
    notCancelled(c),
  );
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
      notCancelled(c),
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

/**
 * Extends the leases of `owner`'s jobs to now + `leaseMs`, writes the progress the refs carry in
 * the same statement, and answers which renewed jobs have a cancel request.
 */
export function* renewLeases(
  c: SqlContext,
  owner: string,
  leaseMs: number,
  refs: readonly LeaseRenewalRef[],
): Operation<RenewResult> {
  if (refs.length === 0) return { lost: [] };
  const { renewHeld } = c.d;
  if (!renewHeld) return yield* renewShared(c, owner, leaseMs, refs);
  const valid = refs.filter((ref) => isJobId(ref.id));
  const answer = valid.length > 0 ? yield* renewHeld.call(c.d, owner, leaseMs, valid) : [];
  // A dialect written before cancellation answers with the renewed ids only.
  const renewed = new Set(Array.isArray(answer) ? answer : answer.renewed);
  const cancelRequested = Array.isArray(answer) ? [] : answer.cancelRequested;
  return renewResult(
    refs.filter((ref) => !renewed.has(ref.id)).map((ref) => ref.id),
    cancelRequested,
  );
}

/** `{ lost }`, plus `cancelRequested` only when there is any (a plain answer stays plain). */
function renewResult(lost: string[], cancelRequested: readonly string[]): RenewResult {
  return cancelRequested.length > 0 ? { lost, cancelRequested: [...cancelRequested] } : { lost };
}

/**
 * `, "progress" = CASE "id" WHEN ? THEN ? … ELSE "progress" END` for the refs that carry
 * progress, and its parameters; empty when none does.
 */
function progressAssignment(refs: readonly LeaseRenewalRef[]): { sql: string; params: unknown[] } {
  const changed = refs.filter((ref) => ref.progressJson !== undefined && ref.progressJson !== null);
  if (changed.length === 0) return { sql: '', params: [] };
  return {
    sql: `, "progress" = CASE "id" ${changed.map(() => 'WHEN ? THEN ?').join(' ')} ELSE "progress" END`,
    params: changed.flatMap((ref) => [ref.id, ref.progressJson]),
  };
}

/**
 * The shared renewal (no `Dialect.renewHeld`): one UPDATE per chunk, no transaction, that
 * renews the held rows without a cancel request. Only when it touched fewer rows than asked
 * does a read find which refs are no longer held (a token never comes back, so a row holding it
 * now held it during the UPDATE) and which carry a cancel request; those are renewed by a
 * second UPDATE, so their owner has a full lease to stop them.
 */
function* renewShared(
  c: SqlContext,
  owner: string,
  leaseMs: number,
  refs: readonly LeaseRenewalRef[],
): Operation<RenewResult> {
  const lost = refs.filter((ref) => !isJobId(ref.id)).map((ref) => ref.id);
  const cancelRequested: string[] = [];
  const valid = refs.filter((ref) => isJobId(ref.id));
  const renew = (part: readonly LeaseRenewalRef[], extra: string): Operation<number> =>
    (function* () {
      const progress = progressAssignment(part);
      const ids = part.map((ref) => ref.id);
      const updated = yield {
        sql: c.d.sql(
          `UPDATE ${c.jobs} SET "lock_expires_at" = ${c.d.nowPlusMs}${progress.sql}
            WHERE "id" IN (${marks(ids.length)}) AND ("id", "lock_token") IN (${c.d.pairs(part.length)})
              AND "state" = 'running' AND "lock_owner" = ?${extra}`,
        ),
        params: [
          leaseMs,
          ...progress.params,
          ...ids,
          ...part.flatMap((ref) => [ref.id, ref.token]),
          owner,
        ],
      };
      return updated.affected;
    })();
  for (let i = 0; i < valid.length; i += SETTLE_CHUNK) {
    const part = valid.slice(i, i + SETTLE_CHUNK);
    if ((yield* renew(part, notCancelled(c))) === part.length) continue;
    const ids = part.map((ref) => ref.id);
    const held = (yield {
      sql: c.d.sql(
        `SELECT "id", "lock_token", "cancel_requested" FROM ${c.jobs}
            WHERE "id" IN (${marks(ids.length)}) AND "state" = 'running' AND "lock_owner" = ?`,
      ),
      params: [...ids, owner],
    }).rows;
    const tokens = new Map(held.map((row) => [String(row.id), String(row.lock_token)]));
    const flagged = new Set(
      held.filter((row) => readBool(row.cancel_requested)).map((row) => String(row.id)),
    );
    lost.push(...part.filter((ref) => tokens.get(ref.id) !== ref.token).map((ref) => ref.id));
    const cancelled = part.filter((ref) => tokens.get(ref.id) === ref.token && flagged.has(ref.id));
    if (cancelled.length > 0) {
      yield* renew(cancelled, '');
      cancelRequested.push(...cancelled.map((ref) => ref.id));
    }
  }
  return renewResult(inInputOrder(refs, lost), cancelRequested);
}
