/**
 * The lock-then-write building blocks: today's MySQL/MariaDB way (no RETURNING), written for
 * any database, which a dialect picks on purpose in its `ops` (`DialectOps`). Each locks the
 * candidate rows (`FOR UPDATE`), keeps those held with the ref's token, then writes only those;
 * where the database has RETURNING the fenced write is one statement instead (`settle`).
 */
import type {
  JobCompletion,
  JobRef,
  LeaseRenewalRef,
  RecoverResult,
  StepSave,
} from '../../store.js';
import { marks, type OpSpec, type RenewAnswer, type SqlEnv } from '../dialect.js';
import type { Operation } from '../executor.js';
import { notCancelled, SETTLE_CHUNK, settle, settleNeedsTransaction } from '../operations/jobs.js';
import { LEASE_EXPIRED_MESSAGE, readBool, recoverResult } from '../rows.js';

/** The ids of `refs` not among `lost`. */
function changed(refs: readonly JobRef[], lost: readonly string[]): string[] {
  const gone = new Set(lost);
  return refs.filter((ref) => !gone.has(ref.id)).map((ref) => ref.id);
}

/** `complete`: locks the held rows, then deletes them (without RETURNING). */
export const completeLockThenDelete: OpSpec<[readonly JobCompletion[]], string[]> = {
  *run(c, refs) {
    const { lost } = yield* settle(
      c,
      refs,
      (held) => `DELETE FROM ${c.jobs} WHERE ${held}`,
      [],
      notCancelled(c),
    );
    return changed(refs, lost);
  },
  transaction: settleNeedsTransaction,
};

/** `release`: locks the held rows, then gives them back; wakes other engines when any was. */
export const releaseLockThenUpdate: OpSpec<[readonly JobRef[]], string[]> = {
  *run(c, refs) {
    const { lost } = yield* settle(
      c,
      refs,
      (held) =>
        `UPDATE ${c.jobs} SET "state" = 'async', "attempts" = "attempts" - 1, "lock_owner" = NULL,
          "lock_expires_at" = NULL, "lock_token" = NULL WHERE ${held}`,
      [],
    );
    // Released jobs are acquirable at once (e.g. on shutdown): wake the other engines.
    if (c.notify && lost.length < refs.length) yield c.notify;
    return changed(refs, lost);
  },
  transaction: settleNeedsTransaction,
};

/**
 * `renew` in two steps, without a transaction: one UPDATE per chunk; only when it touched
 * fewer rows than asked, a read and a second UPDATE (see `renewInTwoSteps`).
 */
export const renewTwoStep: OpSpec<[string, number, readonly LeaseRenewalRef[]], RenewAnswer> = {
  run: renewInTwoSteps,
  transaction: false,
};

/**
 * `saveSteps` without RETURNING: one UPDATE per chunk writes each held row's step list;
 * only when it touched fewer rows than asked, a read (see `saveStepsInTwoSteps`).
 */
export const saveStepsTwoStep: OpSpec<[readonly StepSave[]], string[]> = {
  run: saveStepsInTwoSteps,
  transaction: false,
};

/**
 * Several jobs' checkpoints without RETURNING (MySQL/MariaDB): one UPDATE per chunk writes
 * each row's step list (`CASE "id"`) where the ref's token holds it and the job runs. Only when
 * it touched fewer rows than asked does a read find which refs are still held — a token never
 * comes back, so a row holding it now held it during the UPDATE; the others are refused. (A
 * lease lost between the two may have taken its checkpoint and is still reported refused:
 * that only ends its run sooner.)
 */
function* saveStepsInTwoSteps(c: SqlEnv, saves: readonly StepSave[]): Operation<string[]> {
  const refused: string[] = [];
  for (let i = 0; i < saves.length; i += SETTLE_CHUNK) {
    const part = saves.slice(i, i + SETTLE_CHUNK);
    const ids = part.map((save) => save.ref.id);
    const updated = yield {
      sql: c.d.sql(
        `UPDATE ${c.jobs} SET "steps" = CASE "id" ${part.map(() => 'WHEN ? THEN ?').join(' ')} END
          WHERE "id" IN (${marks(ids.length)}) AND ("id", "lock_token") IN (${c.d.pairs(part.length)})
            AND "state" = 'running'`,
      ),
      params: [
        ...part.flatMap((save) => [save.ref.id, save.stepsJson]),
        ...ids,
        ...part.flatMap((save) => [save.ref.id, save.ref.token]),
      ],
    };
    if (updated.affected === part.length) continue;
    const held = (yield {
      sql: c.d.sql(
        `SELECT "id", "lock_token" FROM ${c.jobs} WHERE "id" IN (${marks(ids.length)}) AND "state" = 'running'`,
      ),
      params: ids,
    }).rows;
    const tokens = new Map(held.map((row) => [String(row.id), String(row.lock_token)]));
    for (const save of part)
      if (tokens.get(save.ref.id) !== save.ref.token) refused.push(save.ref.id);
  }
  return refused;
}

/**
 * `, "progress" = CASE "id" WHEN ? THEN ? … ELSE "progress" END` for the refs that carry
 * progress, and its parameters; empty when none does.
 */
function progressAssignment(refs: readonly LeaseRenewalRef[]): { sql: string; params: unknown[] } {
  const parts = [
    jsonAssignment(refs, 'progress', (ref) => ref.progressJson),
    jsonAssignment(refs, 'logs', (ref) => ref.logsJson),
  ];
  return { sql: parts.map((p) => p.sql).join(''), params: parts.flatMap((p) => p.params) };
}

/** `, "<column>" = CASE "id" WHEN ? THEN ? … END` for the refs whose `value` is given. */
function jsonAssignment(
  refs: readonly LeaseRenewalRef[],
  column: string,
  value: (ref: LeaseRenewalRef) => string | null | undefined,
): { sql: string; params: unknown[] } {
  const changed = refs.filter((ref) => value(ref) !== undefined && value(ref) !== null);
  if (changed.length === 0) return { sql: '', params: [] };
  return {
    sql: `, "${column}" = CASE "id" ${changed.map(() => 'WHEN ? THEN ?').join(' ')} ELSE "${column}" END`,
    params: changed.flatMap((ref) => [ref.id, value(ref)]),
  };
}

/**
 * `, "started_at" = CASE WHEN "id" IN (…) THEN COALESCE("started_at", now) …` for the refs whose
 * handler starts now, or whose start recorded ahead is taken back (`LeaseRenewalRef.start`),
 * and its parameters; empty when none does.
 */
function startAssignment(
  c: SqlEnv,
  refs: readonly LeaseRenewalRef[],
): { sql: string; params: unknown[] } {
  const starting = refs.filter((ref) => ref.start === true).map((ref) => ref.id);
  const unstarting = refs.filter((ref) => ref.start === false).map((ref) => ref.id);
  if (starting.length + unstarting.length === 0) return { sql: '', params: [] };
  const cases = [
    ...(starting.length > 0
      ? [`WHEN "id" IN (${marks(starting.length)}) THEN COALESCE("started_at", ${c.d.now})`]
      : []),
    ...(unstarting.length > 0 ? [`WHEN "id" IN (${marks(unstarting.length)}) THEN NULL`] : []),
  ];
  return {
    sql: `, "started_at" = CASE ${cases.join(' ')} ELSE "started_at" END`,
    params: [...starting, ...unstarting],
  };
}

/**
 * The renewal in two steps (MySQL/MariaDB, no RETURNING): one UPDATE per chunk, that
 * renews the held rows without a cancel request. Only when it touched fewer rows than asked
 * does a read find which refs are no longer held (a token never comes back, so a row holding it
 * now held it during the UPDATE) and which carry a cancel request; those are renewed by a
 * second UPDATE, so their owner has a full lease to stop them.
 */
function* renewInTwoSteps(
  c: SqlEnv,
  owner: string,
  leaseMs: number,
  valid: readonly LeaseRenewalRef[],
): Operation<RenewAnswer> {
  const lost = new Set<string>();
  const cancelRequested: string[] = [];
  const renew = (part: readonly LeaseRenewalRef[], extra: string): Operation<number> =>
    (function* () {
      const progress = progressAssignment(part);
      const start = startAssignment(c, part);
      const ids = part.map((ref) => ref.id);
      const updated = yield {
        sql: c.d.sql(
          `UPDATE ${c.jobs} SET "lock_expires_at" = ${c.d.nowPlusMs}${progress.sql}${start.sql}
            WHERE "id" IN (${marks(ids.length)}) AND ("id", "lock_token") IN (${c.d.pairs(part.length)})
              AND "state" = 'running' AND "lock_owner" = ?${extra}`,
        ),
        params: [
          leaseMs,
          ...progress.params,
          ...start.params,
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
    for (const ref of part) if (tokens.get(ref.id) !== ref.token) lost.add(ref.id);
    const cancelled = part.filter((ref) => tokens.get(ref.id) === ref.token && flagged.has(ref.id));
    if (cancelled.length > 0) {
      yield* renew(cancelled, '');
      cancelRequested.push(...cancelled.map((ref) => ref.id));
    }
  }
  return {
    renewed: valid.filter((ref) => !lost.has(ref.id)).map((ref) => ref.id),
    cancelRequested,
  };
}

/**
 * `recover`: reads the expired leases with their rows locked (`FOR UPDATE SKIP LOCKED`), then
 * requeues, dead-letters or gives back each group by one UPDATE, in one transaction.
 */
export const recoverLockThenUpdate: OpSpec<[number], RecoverResult> = {
  run: recoverInTransaction,
  transaction: true,
};

function* recoverInTransaction(c: SqlEnv, limit: number): Operation<RecoverResult> {
  const expired = (yield {
    sql: c.d.sql(
      `SELECT "id", "retries_left", "started_at" FROM ${c.jobs}
          WHERE "state" = 'running' AND "lock_expires_at" <= ${c.d.now} AND "cancel_requested" = ${c.d.FALSE}
          ORDER BY "lock_expires_at" LIMIT ?${c.d.lockSkipLocked}`,
    ),
    params: [limit],
  }).rows;
  if (expired.length === 0) return { requeued: [], deadlettered: [] };
  const started = (r: (typeof expired)[number]): boolean =>
    r.started_at !== null && r.started_at !== undefined;
  const ids = (keep: (r: (typeof expired)[number]) => boolean): string[] =>
    expired.filter(keep).map((r) => String(r.id));
  const requeue = ids((r) => started(r) && Number(r.retries_left) > 0);
  const dead = ids((r) => started(r) && Number(r.retries_left) <= 0);
  const unstarted = ids((r) => !started(r));
  const requeued: string[] = [];
  const deadlettered: string[] = [];
  const released: string[] = [];
  const clear = `"lock_owner" = NULL, "lock_expires_at" = NULL, "lock_token" = NULL`;
  const charged = `${clear}, "last_error_message" = ?, "last_error_stack" = NULL`;
  // The expiry is checked again in the UPDATE: a renewal that won the race keeps its job.
  const still = `"state" = 'running' AND "lock_expires_at" <= ${c.d.now}`;
  for (const [group, set, params, out] of [
    [
      requeue,
      `"state" = 'async', "retries_left" = "retries_left" - 1, ${charged}`,
      [LEASE_EXPIRED_MESSAGE],
      requeued,
    ],
    [dead, `"state" = 'deadletter', ${charged}`, [LEASE_EXPIRED_MESSAGE], deadlettered],
    // Never started: no attempt counted, nothing to report as an error.
    [unstarted, `"state" = 'async', "attempts" = "attempts" - 1, ${clear}`, [], released],
  ] as const) {
    if (group.length === 0) continue;
    const sql = `UPDATE ${c.jobs} SET ${set} WHERE "id" IN (${marks(group.length)}) AND ${still}`;
    // Rows are locked (read above in this transaction), so the check cannot change under us.
    yield { sql: c.d.sql(sql), params: [...params, ...group] };
    out.push(...group);
  }
  // Requeued jobs are acquirable again: wake every engine, not only the one that recovered them.
  if (c.notify && requeued.length + released.length > 0) yield c.notify;
  return recoverResult(requeued, deadlettered, released);
}
