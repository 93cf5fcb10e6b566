/**
 * The acquisition rule, once for every SQL dialect: which waiting rows may be leased, and the
 * scope-limit rule (DESIGN invariants 8 and 18) that keeps at most N limited jobs of a scope
 * running, started in acquisition order. `exclusive` is a limit of 1.
 *
 * Columns: `exclusive` marks a *limited* job (it takes part in its scope's limit), and
 * `scope_limit` holds its limit N (null: 1, as rows written before limits existed). `Job.exclusive`
 * is true for a limited job whose limit is 1 (`rowToJob`).
 *
 * A row `j` is a candidate when it is due (`timer`/`async`, `due_at <= now`), of a requested
 * type (and queue/tenant when asked), and — if it is limited with a scope — it is among the first
 * `N - running` due waiting limited jobs of its scope (priority, due time, insertion), where
 * `running` counts the scope's limited jobs in state `running`, live lease or lapsed: a lapsed
 * lease keeps its slot until `recoverExpiredLeases` moves the job out (and changes nothing the
 * lapsed owner still holds, so an owner that comes back finds its token fenced instead of a
 * second job running beside its own). `N` is the waiting job's own limit: with mixed limits in
 * one scope, each job checks the scope against its own. A dialect that decides on a snapshot
 * re-checks limited rows under a lock (`Dialect.acquireLimited` or its own `acquire`).
 *
 * Blocked rows (state `blocked`, see `operations/blocked-set.ts`) are due waiting limited jobs kept
 * out of the walk while their scope is full. They still keep their place: a limited row starts
 * only when no blocked row of its scope ranks ahead of it, so a row that enters the waiting set
 * behind a blocked one (a retry come due, a release) waits until the blocked one is let in,
 * whenever that happens. Three index probes of the blocked rows, each stopping at the first
 * entry, say so — not a scan of the scope's blocked rows, whose number is the backlog.
 */
import type { AcquireRequest } from '../store.js';
import { type Dialect, marks } from './dialect.js';

/** Sorts acquired jobs into acquisition order (RETURNING and IN lists do not keep it). */
export { compareAcquisitionOrder as byAcquisitionOrder } from '../rules.js';

/**
 * The WHERE clause that makes a row (alias `j`) an acquisition candidate, and its parameters
 * in order.
 */
export function candidateWhere(
  d: ScopeRuleDialect & Pick<Dialect, 'table'>,
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
  sql += ` AND (${limitedHeadIsFree(d, 'j', jobs)})`;
  return { sql, params };
}

/** What the scope rule needs of a dialect. */
export type ScopeRuleDialect = Pick<
  Dialect,
  'now' | 'TRUE' | 'quote' | 'negPriority' | 'scopeIndexHint' | 'acquisitionOrder'
> & {
  correlatedLimit?: boolean;
};

/** The jobs table as `alias`, with the dialect's scope index hint (MySQL) when it has one. */
function scoped(d: ScopeRuleDialect, jobs: string, alias: string): string {
  return `${jobs} ${alias}${d.scopeIndexHint ? ` ${d.scopeIndexHint}` : ''}`;
}

/**
 * True when no blocked row of `j`'s scope ranks ahead of `j` (acquisition order): one probe when
 * nothing of the scope is blocked; else a probe each for a higher priority, an earlier due time
 * at the same priority, and an earlier id at the same both — each a range of the blocked rows'
 * scope index, so each stops at once. With
 * `negPriority` (MySQL) the priority is compared through the indexed `neg_priority`.
 */
export function noBlockedAhead(d: ScopeRuleDialect, alias: string, jobs: string): string {
  const j = alias;
  const [col, higher] = d.negPriority ? ['neg_priority', '<'] : ['priority', '>'];
  // A scalar probe, not NOT EXISTS: PostgreSQL may run `NOT EXISTS (… b.scope = j.scope)` as a
  // hashed subplan, reading every blocked row of the table into a hash once per statement.
  const blocked = (cond: string): string => `(SELECT 1 FROM ${scoped(d, jobs, 'b')}
      WHERE b.scope = ${j}.scope AND b.state = 'blocked' AND ${cond} LIMIT 1) IS NULL`;
  // The usual answer (nothing of the scope is blocked) in one probe.
  return `(${blocked('1 = 1')} OR (${blocked(`b.${col} ${higher} ${j}.${col}`)}
    AND ${blocked(`b.${col} = ${j}.${col} AND b.due_at < ${j}.due_at`)}
    AND ${blocked(`b.${col} = ${j}.${col} AND b.due_at = ${j}.due_at AND b.id < ${j}.id`)}))`;
}

/**
 * True for a row that is not limited, or may start within its scope's limit.
 * `alias` is the candidate row.
 */
export function limitedHeadIsFree(d: ScopeRuleDialect, alias: string, jobs: string): string {
  const j = alias;
  return `${j}.${d.quote('exclusive')} <> ${d.TRUE} OR ${j}.scope IS NULL OR (
    ${scopeHeadIsFree(d, j, jobs)})`;
}

/**
 * True for a limited row (alias `j`, with a scope) that may start: fewer than its limit N of the
 * scope's limited jobs run, and it is among the first `N - running` due waiting limited jobs of
 * the scope. Every read is a probe of a scope index (running rows: at most N per scope; waiting
 * rows: in acquisition order):
 * - with `correlatedLimit` (PostgreSQL), "is j among the first `N - running`" is one ordered
 *   probe that stops after `N - running` rows;
 * - else it counts the waiting rows ahead of j (each count stops at j's position; a blocked
 *   scope is rejected before counting), and a limit of 1 keeps the one-row head probe.
 */
export function scopeHeadIsFree(d: ScopeRuleDialect, alias: string, jobs: string): string {
  const j = alias;
  const ex = d.quote('exclusive');
  const limit = `COALESCE(${j}.scope_limit, 1)`;
  const running = `(SELECT COUNT(*) FROM ${scoped(d, jobs, 'r')} WHERE r.scope = ${j}.scope AND r.${ex} = ${d.TRUE}
      AND r.state = 'running')`;
  const waiting = (w: string): string => `${w}.scope = ${j}.scope AND ${w}.${ex} = ${d.TRUE}
      AND ${w}.state IN ('timer', 'async') AND ${w}.due_at <= ${d.now}`;
  const inLine = noBlockedAhead(d, j, jobs);
  if (d.correlatedLimit) {
    return `${j}.id IN (SELECT w.id FROM ${scoped(d, jobs, 'w')} WHERE ${waiting('w')}
      ORDER BY ${d.acquisitionOrder('w')} LIMIT GREATEST(0, ${limit} - ${running}))
      AND ${inLine}`;
  }
  const ahead = `(SELECT COUNT(*) FROM ${scoped(d, jobs, 'w')} WHERE ${waiting('w')} AND w.priority > ${j}.priority)
      + (SELECT COUNT(*) FROM ${scoped(d, jobs, 'w')} WHERE ${waiting('w')} AND w.priority = ${j}.priority
        AND (w.due_at < ${j}.due_at OR (w.due_at = ${j}.due_at AND w.id < ${j}.id)))`;
  return `CASE WHEN ${running} >= ${limit} THEN 1 = 0
    WHEN ${limit} = 1 THEN ${j}.id = (SELECT w.id FROM ${scoped(d, jobs, 'w')} WHERE ${waiting('w')}
      ORDER BY ${d.acquisitionOrder('w')} LIMIT 1)
    ELSE ${running} + ${ahead} < ${limit} END AND ${inLine}`;
}
