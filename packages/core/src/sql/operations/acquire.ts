/** Acquisition: leasing due jobs, and the reads that tell an engine when to look again. */
import type { AcquireRequest, Job } from '../../store.js';
import type { Operation } from '../executor.js';
import { readTime, rowToJob, type SqlRow } from '../rows.js';
import { byAcquisitionOrder, candidateWhere } from '../scope-rule.js';
import type { SqlEnv } from './env.js';

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
