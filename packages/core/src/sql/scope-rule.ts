/**
 * The acquisition rule, once for every SQL dialect: which waiting rows may be leased, and the
 * exclusive-scope rule (DESIGN invariant 8) that keeps at most one exclusive job of a scope
 * running, started in acquisition order.
 *
 * A row `j` is a candidate when it is due (`timer`/`async`, `due_at <= now`), of a requested
 * type (and queue/tenant when asked), and — if it is exclusive with a scope — no exclusive job
 * of its scope runs with a live lease and no due waiting exclusive job of its scope comes
 * before it (priority, due time, insertion). A dialect that decides on a snapshot re-checks
 * exclusive rows under a lock (`Dialect.recheckExclusive` or its own `acquire`).
 */
import type { AcquireRequest } from '../store.js';
import { type Dialect, marks } from './dialect.js';

/** Acquisition order: priority first, then due time, then insertion. */
export const ACQUIRE_ORDER = 'ORDER BY j.priority DESC, j.due_at ASC, j.id ASC';

/** Sorts acquired jobs into acquisition order (RETURNING and IN lists do not keep it). */
export function byAcquisitionOrder(
  a: { priority: number; dueAt: Date; id: string },
  b: { priority: number; dueAt: Date; id: string },
): number {
  return (
    b.priority - a.priority ||
    a.dueAt.getTime() - b.dueAt.getTime() ||
    // Canonical decimal ids of any size: the shorter is smaller, else compare text (no BigInt:
    // this runs for every pair of a large batch, and most pairs tie on priority and due time).
    a.id.length - b.id.length ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}

/**
 * The WHERE clause that makes a row (alias `j`) an acquisition candidate, and its parameters
 * in order.
 */
export function candidateWhere(
  d: Pick<Dialect, 'now' | 'TRUE' | 'table' | 'quote'>,
  request: Pick<AcquireRequest, 'types' | 'queues' | 'tenants'>,
): { sql: string; params: unknown[] } {
  const jobs = d.table('jobs');
  const params: unknown[] = [...request.types];
  let sql = `j.state IN ('timer', 'async') AND j.due_at <= ${d.now} AND j.type IN (${marks(request.types.length)})`;
  if (request.queues) {
    if (request.queues.length === 0) return { sql: '1 = 0', params: [] };
    sql += ` AND j.queue IN (${marks(request.queues.length)})`;
    params.push(...request.queues);
  }
  if (request.tenants) {
    if (request.tenants.length === 0) return { sql: '1 = 0', params: [] };
    sql += ` AND j.tenant_id IN (${marks(request.tenants.length)})`;
    params.push(...request.tenants);
  }
  sql += ` AND (${exclusiveHeadIsFree(d, 'j', jobs)})`;
  return { sql, params };
}

/**
 * True for a row that is not exclusive, or heads its scope with no live exclusive holder.
 * `alias` is the candidate row.
 */
export function exclusiveHeadIsFree(
  d: Pick<Dialect, 'now' | 'TRUE' | 'quote'>,
  alias: string,
  jobs: string,
): string {
  const j = alias;
  return `${j}.${d.quote('exclusive')} <> ${d.TRUE} OR ${j}.scope IS NULL OR (
    ${scopeHeadIsFree(d, j, jobs)})`;
}

/**
 * True for an exclusive row (alias `j`, with a scope) that heads its scope: no exclusive job
 * of the scope runs with a live lease, and no due waiting exclusive job of it comes before —
 * asked as "j is the scope's first due waiting exclusive job", one ordered probe of a scope
 * index that stops at the first row, however many jobs the scope holds.
 */
export function scopeHeadIsFree(
  d: Pick<Dialect, 'now' | 'TRUE' | 'quote'>,
  alias: string,
  jobs: string,
): string {
  const j = alias;
  const ex = d.quote('exclusive');
  return `NOT EXISTS (SELECT 1 FROM ${jobs} r WHERE r.scope = ${j}.scope AND r.${ex} = ${d.TRUE}
      AND r.state = 'running' AND r.lock_expires_at > ${d.now})
    AND ${j}.id = (SELECT w.id FROM ${jobs} w WHERE w.scope = ${j}.scope AND w.${ex} = ${d.TRUE}
      AND w.state IN ('timer', 'async') AND w.due_at <= ${d.now}
      ORDER BY w.priority DESC, w.due_at, w.id LIMIT 1)`;
}
