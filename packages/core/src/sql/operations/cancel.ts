/**
 * Cancellation (invariant 20): an operator's `cancel` deletes a job that is not running at once
 * (history outcome `cancelled`) and flags a running one; its owner learns of the flag from its
 * next lease renewal (`settle.ts`, no notification channel needed) and ends the job with
 * `cancelHeld`. `complete` and `fail` leave flagged jobs alone (`notCancelled`), so a job ends
 * either completed (the completion committed first) or cancelled, never both.
 */
import { keepsOutcome } from '../../rules.js';
import type { CancelOutcome, JobCompletion, SettleResult } from '../../store.js';
import { isJobId } from '../dialect.js';
import type { Operation } from '../executor.js';
import { durationOf } from '../rows.js';
import type { SqlEnv } from './env.js';
import { copyToHistory } from './jobs.js';

/** Locks the row a read returns until the transaction ends, where writers are not serialised anyway. */
function lockSuffix(c: SqlEnv): string {
  return c.d.forUpdate;
}

/** A cancelled job's history record (while history keeps cancelled jobs), then its deletion. */
export function* removeCancelled(
  c: SqlEnv,
  id: string,
  durationMs: number | null,
): Operation<void> {
  if (keepsOutcome(c.historySettings.keep, 'cancelled')) {
    // The duration is a whole number the engine measured (or null): written as a literal, so
    // no database has to guess a parameter's type inside INSERT … SELECT.
    const duration = durationMs === null ? 'NULL' : String(durationMs);
    yield {
      sql: c.d.sql(
        `${copyToHistory(c, 'cancelled', 'NULL', duration)} FROM ${c.jobs} j WHERE j."id" = ?`,
      ),
      params: [id],
    };
  }
  yield { sql: c.d.sql(`DELETE FROM ${c.jobs} WHERE "id" = ?`), params: [id] };
}

/** See `JobStore.cancel`. Runs in a transaction. */
export function* cancel(c: SqlEnv, id: string): Operation<CancelOutcome> {
  if (!isJobId(id)) return 'not-found';
  const row = (yield {
    sql: c.d.sql(`SELECT "state" FROM ${c.jobs} WHERE "id" = ?${lockSuffix(c)}`),
    params: [id],
  }).rows[0];
  if (!row) {
    const finished = (yield {
      sql: c.d.sql(`SELECT "id" FROM ${c.history} WHERE "id" = ?`),
      params: [id],
    }).rows;
    return finished.length > 0 ? 'finished' : 'not-found';
  }
  if (String(row.state) === 'running') {
    yield {
      sql: c.d.sql(`UPDATE ${c.jobs} SET "cancel_requested" = ${c.d.TRUE} WHERE "id" = ?`),
      params: [id],
    };
    return 'requested';
  }
  yield* removeCancelled(c, id, null);
  return 'cancelled';
}

/**
 * See `JobStore.cancelHeld`. Runs in a transaction: each held row is locked, copied to history,
 * then deleted. Cancellations are rare, so one job at a time keeps it the same on every database.
 */
export function* cancelHeld(c: SqlEnv, refs: readonly JobCompletion[]): Operation<SettleResult> {
  const lost: string[] = [];
  for (const ref of refs) {
    const held =
      isJobId(ref.id) &&
      (yield {
        sql: c.d.sql(
          `SELECT "id" FROM ${c.jobs} WHERE "id" = ? AND "lock_token" = ? AND "state" = 'running'${lockSuffix(c)}`,
        ),
        params: [ref.id, ref.token],
      }).rows.length > 0;
    if (held) yield* removeCancelled(c, ref.id, durationOf(ref));
    else lost.push(ref.id);
  }
  return { lost };
}
