/**
 * Durable waits (`StoreWaits`, DESIGN invariant 23): a held job given back to waiting with its
 * step list in one write fenced by its token — `timer` due after the delay on the database's
 * clock, lock cleared, the attempt not counted — so a waiting job holds no slot, lease,
 * connection or scope slot. A stale owner's sleep changes no row.
 */
import { LockLostError, StoreError } from '../../errors.js';
import type { JobRef } from '../../store.js';
import type { Operation } from '../executor.js';
import type { SqlEnv } from './env.js';
import { notCancelled, settle } from './jobs.js';
import { saveSteps } from './steps.js';

/** `StoreWaits.sleep`: true when the job held with `ref`'s token now waits with its steps. */
export function* sleepHeld(
  c: SqlEnv,
  ref: JobRef,
  stepsJson: string,
  delayMs: number,
): Operation<boolean> {
  const ms = Math.max(0, Math.round(delayMs));
  const { lost } = yield* settle(
    c,
    [ref],
    (held) =>
      `UPDATE ${c.jobs} SET "state" = ?, "due_at" = ${c.d.nowPlusMs}, "steps" = ?,
          "attempts" = "attempts" - 1, "lock_owner" = NULL, "lock_expires_at" = NULL,
          "lock_token" = NULL WHERE ${held}`,
    [ms > 0 ? 'timer' : 'async', ms, stepsJson],
    notCancelled(c),
  );
  return lost.length === 0;
}

/** `StoreWaits.signal`'s first write: the signal, kept until a waiting job takes it. */
export function* storeSignal(
  c: SqlEnv,
  name: string,
  key: string,
  payloadJson: string,
): Operation<void> {
  yield {
    sql: c.d.sql(
      `INSERT INTO ${c.d.table('signals')} ("name", "signal_key", "payload", "created_at") VALUES (?, ?, ?, ${c.d.now})`,
    ),
    params: [name, key, payloadJson],
  };
}

/**
 * `StoreWaits.pruneSignals`: at most `limit` signals nobody took, sent more than `retentionMs`
 * ago on the store's clock, oldest first: a range of index `…signals_prune` (`created_at, id`,
 * signals only; `waiter_id, created_at, id` on MySQL/MariaDB).
 * Waiter rows (`waiter_id` set) are never touched. Two processes pruning at once delete
 * disjoint rows or none twice: no lock is needed.
 */
export function* pruneSignals(c: SqlEnv, retentionMs: number, limit: number): Operation<number> {
  const signals = c.d.table('signals');
  const expired = `"waiter_id" IS NULL AND "created_at" < ${c.d.nowPlusMs}`;
  const { affected } = yield {
    sql: c.d.sql(
      c.d.deleteLimit
        ? // No ORDER BY: MariaDB sorts every expired row for it (`IS NULL` is no constant to
          // its sort); the range scan of `ix_jobs_signals_prune` reads the oldest first anyway.
          `DELETE FROM ${signals} WHERE ${expired} LIMIT ?`
        : `DELETE FROM ${signals} WHERE "id" IN (
            SELECT "id" FROM ${signals} WHERE ${expired} ORDER BY "created_at", "id" LIMIT ?)`,
    ),
    params: [-retentionMs, limit],
  };
  return affected;
}

/**
 * `StoreWaits.signal`'s second write, after the signal committed: the jobs waiting for
 * (`name`, `key`) are due at once. A job that parks meanwhile looks for the signal after its
 * own write committed (`wakeIfSignalled`), so one of the two always sees the other.
 */
export function* wakeWaiters(c: SqlEnv, name: string, key: string): Operation<number> {
  const { affected } = yield {
    sql: c.d.sql(
      `UPDATE ${c.jobs} SET "state" = 'async', "due_at" = ${c.d.now} WHERE "state" = 'timer' AND "id" IN (SELECT "waiter_id" FROM ${c.d.table('signals')} WHERE "name" = ? AND "signal_key" = ? AND "waiter_id" IS NOT NULL)`,
    ),
    params: [name, key],
  };
  if (affected > 0 && c.notify) yield c.notify;
  return affected;
}

/**
 * `StoreWaits.takeSignal`, in one transaction: the oldest signal for (`name`, `key`) is
 * deleted (another job that deleted it first wins: the next one is tried) and the job's steps
 * written fenced by its token; a refused fence throws `LockLostError`, rolling the delete back.
 */
export function* takeSignal(
  c: SqlEnv,
  ref: JobRef,
  name: string,
  key: string,
  stepsJsonOf: (payloadJson: string | null) => string | null,
): Operation<string | null> {
  const signals = c.d.table('signals');
  let payload: string | null = null;
  for (let tries = 0; tries < 5 && payload === null; tries++) {
    const { rows } = yield {
      sql: c.d.sql(
        `SELECT "id", "payload" FROM ${signals} WHERE "name" = ? AND "signal_key" = ? AND "waiter_id" IS NULL ORDER BY "id" LIMIT 1`,
      ),
      params: [name, key],
    };
    const row = rows[0];
    if (!row) break;
    const { affected } = yield {
      sql: c.d.sql(`DELETE FROM ${signals} WHERE "id" = ?`),
      params: [String(row.id)],
    };
    if (affected > 0) payload = String(row.payload);
  }
  const stepsJson = stepsJsonOf(payload);
  if (stepsJson === null) {
    if (payload === null) return null;
    throw new StoreError(`[${c.label}] takeSignal: a taken signal needs a step list to write`);
  }
  if (!(yield* saveSteps(c, ref, stepsJson))) throw new LockLostError(ref.id);
  yield {
    sql: c.d.sql(`DELETE FROM ${signals} WHERE "waiter_id" = ?`),
    params: [ref.id],
  };
  return payload;
}

/** `StoreWaits.waitSignal`'s write, with the job's sleep: the job waits for (`name`, `key`). */
export function* addWaiter(c: SqlEnv, ref: JobRef, name: string, key: string): Operation<void> {
  yield {
    sql: c.d.sql(
      `INSERT INTO ${c.d.table('signals')} ("name", "signal_key", "payload", "waiter_id", "created_at") VALUES (?, ?, NULL, ?, ${c.d.now})`,
    ),
    params: [name, key, ref.id],
  };
}

/** After a wait committed: a signal stored meanwhile makes the job due at once. */
export function* wakeIfSignalled(
  c: SqlEnv,
  id: string,
  name: string,
  key: string,
): Operation<boolean> {
  const { affected } = yield {
    sql: c.d.sql(
      `UPDATE ${c.jobs} SET "state" = 'async', "due_at" = ${c.d.now} WHERE "id" = ? AND "state" = 'timer' AND EXISTS (SELECT 1 FROM ${c.d.table('signals')} WHERE "name" = ? AND "signal_key" = ? AND "waiter_id" IS NULL)`,
    ),
    params: [id, name, key],
  };
  if (affected > 0 && c.notify) yield c.notify;
  return affected > 0;
}
