/** Recovery of expired leases (crash, OOM, stalled owner): requeue with a retry fewer, or deadletter. */
import type { RecoverResult } from '../../store.js';
import { marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import { LEASE_EXPIRED_MESSAGE } from '../rows.js';
import type { SqlContext } from './context.js';

export function* recoverExpiredLeases(c: SqlContext, limit: number): Operation<RecoverResult> {
  if (c.d.recoverExpiredLeases) return yield* c.d.recoverExpiredLeases(limit, c.notify);
  const expired = (yield {
    sql: c.d.sql(
      `SELECT "id", "retries_left" FROM ${c.jobs} WHERE "state" = 'running' AND "lock_expires_at" <= ${c.d.now}
          ORDER BY "lock_expires_at" LIMIT ?${c.d.lockSkipLocked}`,
    ),
    params: [limit],
  }).rows;
  if (expired.length === 0) return { requeued: [], deadlettered: [] };
  const requeue = expired.filter((r) => Number(r.retries_left) > 0).map((r) => String(r.id));
  const dead = expired.filter((r) => Number(r.retries_left) <= 0).map((r) => String(r.id));
  const result: RecoverResult = { requeued: [], deadlettered: [] };
  const clear = `"lock_owner" = NULL, "lock_expires_at" = NULL, "lock_token" = NULL,
      "last_error_message" = ?, "last_error_stack" = NULL`;
  // The expiry is checked again in the UPDATE: a renewal that won the race keeps its job.
  const still = `"state" = 'running' AND "lock_expires_at" <= ${c.d.now}`;
  for (const [ids, set, out] of [
    [requeue, `"state" = 'async', "retries_left" = "retries_left" - 1`, result.requeued],
    [dead, `"state" = 'deadletter'`, result.deadlettered],
  ] as const) {
    if (ids.length === 0) continue;
    const sql = `UPDATE ${c.jobs} SET ${set}, ${clear} WHERE "id" IN (${marks(ids.length)}) AND ${still}`;
    if (c.d.returning) {
      const rows = (yield {
        sql: c.d.sql(`${sql} RETURNING "id"`),
        params: [LEASE_EXPIRED_MESSAGE, ...ids],
      }).rows;
      out.push(...rows.map((row) => String(row.id)));
    } else {
      // Rows are locked (read above in this transaction), so the check cannot change under us.
      yield { sql: c.d.sql(sql), params: [LEASE_EXPIRED_MESSAGE, ...ids] };
      out.push(...ids);
    }
  }
  // Requeued jobs are acquirable again: wake every engine, not only the one that recovered them.
  if (c.notify && result.requeued.length > 0) yield c.notify;
  return result;
}
