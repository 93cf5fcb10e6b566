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
import { type DialectOps, isJobId, marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import type { SqlEnv } from './env.js';
import { keepsCompleted } from './history.js';

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
