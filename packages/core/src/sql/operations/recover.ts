/**
 * Recovery of expired leases (crash, OOM, stalled owner), see `JobStore.recoverExpiredLeases`:
 * a job whose handler started is requeued with a retry fewer, or dead-lettered; one whose
 * handler never started (`started_at` null: prefetched by an owner that died) goes back with
 * its attempt given back; one an operator cancelled ends cancelled (`recoverCancelled`).
 */
import type { RecoverResult } from '../../store.js';
import type { Operation } from '../executor.js';
import { removeCancelled } from './cancel.js';
import type { SqlEnv } from './env.js';

/**
 * Ends the lapsed leases of cancel-requested jobs: each is deleted as cancelled (history
 * outcome `cancelled`, no duration: its owner died before it said how long it ran), never
 * requeued. Runs in a transaction; such jobs are rare, so one at a time.
 */
export function* recoverCancelled(c: SqlEnv, limit: number): Operation<string[]> {
  const rows = (yield {
    sql: c.d.sql(
      `SELECT "id" FROM ${c.jobs} WHERE "state" = 'running' AND "lock_expires_at" <= ${c.d.now}
          AND "cancel_requested" = ${c.d.TRUE} ORDER BY "lock_expires_at" LIMIT ?${c.d.lockSkipLocked}`,
    ),
    params: [limit],
  }).rows;
  const cancelled: string[] = [];
  for (const row of rows) {
    const id = String(row.id);
    yield* removeCancelled(c, id, null);
    cancelled.push(id);
  }
  return cancelled;
}

/**
 * True when some running job's lease lapsed (cancel-requested or not): one read through the
 * lease index, so an idle recovery pass opens no transaction.
 */
export function* anyExpiredLease(c: SqlEnv): Operation<boolean> {
  const rows = (yield {
    sql: c.d.sql(
      `SELECT 1 AS ${c.d.quote('one')} FROM ${c.jobs}
        WHERE "state" = 'running' AND "lock_expires_at" <= ${c.d.now} LIMIT 1`,
    ),
    params: [],
  }).rows;
  return rows.length > 0;
}

/** Requeues (or dead-letters) jobs whose lease lapsed, by the dialect's `recover`. */
export function* recoverExpiredLeases(c: SqlEnv, limit: number): Operation<RecoverResult> {
  return yield* c.d.ops.recover.run(c, limit);
}
