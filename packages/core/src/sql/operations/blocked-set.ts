/**
 * The blocked set: due waiting limited jobs of a full scope beyond a short queue are kept out of
 * the acquisition walk (state `blocked`), so a long queue behind one busy scope costs the jobs
 * behind it in acquisition order no more than its short queue does, and they come back in
 * acquisition order as slots free up.
 *
 * `rebalanceScopes` brings scopes in line with the scope rule (`scope-rule.ts`): for each, with
 * `running` limited jobs running and `k = N - running` slots free, the first `k` of its due
 * waiting and blocked limited jobs in acquisition order (each within its own limit N) are the
 * ones that may start. Those that are blocked come back (`async`) with up to `REFILL` of the
 * queue behind them, so the next settles find jobs in line and write nothing. Due waiting jobs
 * behind them stay in line up to `SLACK` of them (a short queue pays no block and unblock
 * writes); the rest become `blocked`, as does every waiting job behind a blocked one. Each scope
 * costs a few index probes plus the rows that change; it never reads more blocked rows than
 * `k + REFILL`, whatever the backlog.
 *
 * It is an optimisation, never the guard: the acquisition's scope rule still decides who
 * starts (limit N, and no row starts ahead of a blocked row of its scope that ranks before
 * it). A stale read here (a settle committing beside an enqueue) can leave a job blocked with a
 * slot free; the sweep (`rebalanceScopes()` without scopes, after each expired-lease recovery
 * pass) lets it in. A sweep takes at most `SWEEP_SCOPES` scopes of each kind (with blocked jobs;
 * with due waiting limited jobs), going on from where the last one stopped, so its cost is
 * bounded whatever the number of scopes or jobs, and it comes round to every scope in turn.
 */
import { marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import { readTime, type SqlRow } from '../rows.js';
import { byAcquisitionOrder } from '../scope-rule.js';
import type { SqlEnv } from './env.js';

/** Scopes per statement: a handful of parameters each, well under every driver's limit. */
const SCOPES_PER_STATEMENT = 100;
/** Ids per UPDATE. */
const IDS_PER_STATEMENT = 1_000;
/**
 * Ids per UPDATE joined to an array (PostgreSQL): with 1,000, a planner without statistics
 * hashes the whole waiting set (it guesses the partial index small) instead of probing the
 * primary key id by id.
 */
const IDS_PER_ARRAY = 100;
/**
 * Due waiting jobs of a scope that stay in line beyond its free slots: blocking a job and
 * letting it in again costs two row writes, which a short queue per scope need not pay; the
 * acquisition walk passes at most this many rows of a full scope.
 */
const SLACK = 100;
/**
 * Blocked jobs let in beyond the free slots when any is: a queue in line saves the next settles
 * a write each, but the acquisition walk passes every row in line of a full scope.
 */
const REFILL = 16;
/** Due waiting rows of one scope a rebalance blocks at most (see `waitingReadLimit`). */
const BLOCK_PER_CALL = 1_000;
/** Above every scope limit (at most 1,000): `readCounts` packs a count and a limit in one number. */
const LIMIT_BASE = 4096;
/** Scopes a sweep takes of each kind (with blocked rows; with due waiting limited rows). */
const SWEEP_SCOPES = 200;

/**
 * Where the next sweep goes on from, per kind: the last scope a sweep looked at, or null to
 * start from the first. Kept by the store between sweeps.
 */
export interface SweepCursor {
  blocked: string | null;
  waiting: string | null;
}

/**
 * Rebalances `scopes`, or — a sweep — the next scopes after `cursor` that have blocked or due
 * waiting limited jobs. `afterSettle`: only scopes that have blocked jobs (a settle frees slots;
 * it adds no queue that needs blocking, beyond what the sweep takes care of).
 */
export function* rebalanceScopes(
  c: SqlEnv,
  scopes: readonly string[] | undefined,
  cursor: SweepCursor,
  afterSettle = false,
): Operation<number> {
  // (No `??` around a yield: the CommonJS build turns its right side into a function.)
  const sweep = scopes === undefined ? yield* scopesToSweep(c, cursor) : null;
  const list = [...new Set(sweep ? sweep.scopes : (scopes ?? []))];
  let unblocked = 0;
  for (let i = 0; i < list.length; i += SCOPES_PER_STATEMENT) {
    unblocked += yield* rebalanceChunk(c, list.slice(i, i + SCOPES_PER_STATEMENT), afterSettle);
  }
  if (sweep) Object.assign(cursor, sweep.next);
  // Jobs let in are acquirable: wake the engines (delivered on commit).
  if (unblocked > 0 && c.notify) yield c.notify;
  return unblocked;
}

/**
 * The scopes a sweep looks at: the next ones with blocked jobs or due waiting limited jobs, and
 * where the cursor goes next — moved by the caller only once the sweep succeeded, so a failed
 * one is taken again rather than skipped.
 */
function* scopesToSweep(
  c: SqlEnv,
  cursor: SweepCursor,
): Operation<{ scopes: string[]; next: SweepCursor }> {
  const blocked = yield* nextScopes(c, cursor.blocked, `b.state = 'blocked'`, ['blocked']);
  const waiting = yield* nextScopes(c, cursor.waiting, waitingLimited(c, 'b'), ['async', 'timer']);
  return {
    scopes: [...blocked.scopes, ...waiting.scopes],
    next: { blocked: blocked.next, waiting: waiting.next },
  };
}

/**
 * The next scopes (up to `SWEEP_SCOPES`) after `after` with rows matching `where` (alias `b`),
 * in scope order through a scope index, and the cursor after them: the last one (the sweep
 * takes each scope whole), or null to start again once the end is reached.
 *
 * With `Dialect.recursiveSkipScan`, a skip scan: each scope is one probe for the first entry
 * after the one before, however many rows a scope has. Otherwise (MySQL/MariaDB, whose
 * recursive step would not start its range at the bound it correlates on) a loose index scan
 * per state in `states` (`GROUP BY scope` under one state's equality reads one entry per
 * scope); it finds scopes with rows in those states, a superset that `rebalanceChunk` narrows.
 */
function* nextScopes(
  c: SqlEnv,
  after: string | null,
  where: string,
  states: readonly string[],
): Operation<{ scopes: string[]; next: string | null }> {
  // No scope is empty (enqueue rejects it): '' is before every scope.
  const from = after ?? '';
  let query: { sql: string; params: string[] };
  if (c.d.recursiveSkipScan) {
    const next = (bound: string): string => `SELECT b.scope FROM ${byScope(c, 'b')}
      WHERE ${where} AND b.scope > ${bound} ORDER BY b.scope LIMIT 1`;
    query = {
      sql: `WITH RECURSIVE s (scope, n) AS (SELECT (${next('?')}), 1
        UNION ALL SELECT (${next('s.scope')}), s.n + 1 FROM s
          WHERE s.scope IS NOT NULL AND s.n < ${SWEEP_SCOPES})
        SELECT s.scope FROM s WHERE s.scope IS NOT NULL`,
      params: [from],
    };
  } else {
    const perState = states.map(
      (state) => `(SELECT b.scope FROM ${byScope(c, 'b')}
        WHERE b.state = '${state}' AND b.scope > ? GROUP BY b.scope
        ORDER BY b.scope LIMIT ${SWEEP_SCOPES})`,
    );
    query = {
      sql: `SELECT u.scope FROM (${perState.join(' UNION ')}) u
        ORDER BY u.scope LIMIT ${SWEEP_SCOPES}`,
      params: states.map(() => from),
    };
  }
  const rows = (yield { sql: c.d.sql(query.sql), params: query.params }).rows;
  const scopes = rows.map((row) => String(row.scope));
  return { scopes, next: scopes.length < SWEEP_SCOPES ? null : (scopes.at(-1) ?? null) };
}

/** Due waiting limited rows (alias `a`, or none), without the scope condition. */
function waitingLimited(c: SqlEnv, a: string): string {
  const col = (name: string): string => `${a ? `${a}.` : ''}${c.d.quote(name)}`;
  return `${col('exclusive')} = ${c.d.TRUE} AND ${col('scope')} IS NOT NULL
    AND ${col('state')} IN ('timer', 'async') AND ${col('due_at')} <= ${c.d.now}`;
}

/** The jobs table as `a`, read through its scope index (see `Dialect.scopeIndexHint`). */
function byScope(c: SqlEnv, a: string): string {
  return `${c.jobs} ${a}${c.d.scopeIndexHint ? ` ${c.d.scopeIndexHint}` : ''}`;
}

/** Acquisition order of rows `a` (`last`: reversed), see `Dialect.acquisitionOrder`. */
function rank(c: SqlEnv, a: string, last = false): string {
  return c.d.acquisitionOrder(a, last ? 'last' : 'first');
}

interface ScopeCounts {
  running: number;
  waiting: number;
  /** The largest limit among the scope's running and waiting limited jobs, or null. */
  limit: number | null;
  /** The limit of the scope's first blocked job, or null when none is blocked. */
  blockedLimit: number | null;
  /** Every due waiting job ranks ahead of every blocked one (or either set is empty). */
  allAhead: boolean;
}

/** A scope that may change: `k` slots free. */
interface Work {
  scope: string;
  k: number;
  blocked: boolean;
  running: number;
}

interface Ranked {
  id: string;
  state: string;
  priority: number;
  dueAt: Date;
  limit: number;
}

function* rebalanceChunk(
  c: SqlEnv,
  scopes: readonly string[],
  onlyBlocked: boolean,
  recheck = true,
): Operation<number> {
  const counts = yield* readCounts(c, scopes, onlyBlocked);
  const work: Work[] = [];
  scopes.forEach((scope, i) => {
    const n = counts[i];
    if (!n) return;
    const limit = Math.max(n.limit ?? 1, n.blockedLimit ?? 1);
    const k = Math.max(0, limit - n.running);
    const blocked = n.blockedLimit !== null;
    // In line: the due waiting jobs fit the free slots and the slack, rank ahead of every
    // blocked one, and fill the free slots when any job is blocked.
    if (n.waiting <= k + SLACK && n.allAhead && (!blocked || n.waiting >= k)) return;
    work.push({ scope, k, blocked, running: n.running });
  });
  if (work.length === 0) return 0;
  const firsts = yield* readFirsts(c, work);
  const letIn: string[] = [];
  const toBlock: string[] = [];
  const blockScopes = new Set<string>();
  for (const w of work) {
    const rows = (firsts.get(w.scope) ?? []).sort(byAcquisitionOrder);
    // Row p of the scope's order may start when fewer than its own limit run or rank ahead
    // (with mixed limits a later row may while an earlier may not). Every row up to the last
    // that may start is let in (none that may start then has a blocked row ahead of it).
    let cut = 0;
    rows.forEach((row, p) => {
      if (w.running + p < row.limit) cut = p + 1;
    });
    // Blocked rows were read up to `readLimit`: a waiting row after the last of them may be
    // behind blocked rows not read.
    const readBlocked = rows.filter((row) => row.state === 'blocked');
    const last = readBlocked.length >= readLimit(w) ? readBlocked.at(-1) : undefined;
    let behindBlocked = false;
    for (const [p, row] of rows.entries()) {
      if (row.state === 'blocked') {
        // Those that may start come back, and with them `REFILL` of the queue behind them:
        // the next settles find it in line instead of letting jobs in one by one.
        if (!behindBlocked && (p < cut || (w.k > 0 && p < cut + REFILL))) letIn.push(row.id);
        else behindBlocked = true;
        continue;
      }
      // A waiting row that cannot start now stays in line within the slack, unless a blocked
      // row is ahead of it (it could not start before that one anyway).
      const afterUnread = last !== undefined && byAcquisitionOrder(row, last) > 0;
      if (p >= cut && (behindBlocked || afterUnread || p >= cut + SLACK)) {
        toBlock.push(row.id);
        blockScopes.add(w.scope);
      }
    }
  }
  const blockedNow = yield* block(c, toBlock);
  let unblocked = yield* unblock(c, letIn);
  if (blockedNow > 0 && recheck) {
    // These blocks were decided on reads a settle may have changed since: one that freed a
    // slot and read before they committed saw nothing blocked and let nothing in. Reading
    // again now that they are committed, this call or that settle sees the other.
    const into = work.filter((w) => blockScopes.has(w.scope)).map((w) => w.scope);
    unblocked += yield* rebalanceChunk(c, into, true, false);
  }
  return unblocked;
}

/**
 * Blocked rows read of a scope: with a free slot, its first `k` and the slack behind them;
 * else the first (to know its place).
 */
function readLimit(w: Work): number {
  return w.k > 0 ? w.k + REFILL : 1;
}

/**
 * Due waiting rows read of a scope, first in acquisition order: its free slots, the slack, and
 * at most `BLOCK_PER_CALL` to block. A larger burst that came in without a rebalance (a
 * caller's transaction, timers come due) is blocked over the next calls, so no settle that
 * runs this pays for more.
 */
function waitingReadLimit(w: Work): number {
  return w.k + SLACK + BLOCK_PER_CALL;
}

/** Blocks the rows `ids` that still wait (`timer`, `async`); how many were. */
function block(c: SqlEnv, ids: readonly string[]): Operation<number> {
  return setState(c, ids, 'blocked', ['timer', 'async']);
}

/** Lets the rows `ids` that are still blocked back in (`async`); how many were. */
function unblock(c: SqlEnv, ids: readonly string[]): Operation<number> {
  return setState(c, ids, 'async', ['blocked']);
}

/** Moves the rows `ids` that are still in one of `from` to `state`; how many moved. */
function* setState(
  c: SqlEnv,
  ids: readonly string[],
  state: 'async' | 'blocked',
  from: readonly string[],
): Operation<number> {
  let moved = 0;
  const states = from.map((f) => `'${f}'`).join(', ');
  const chunk = c.d.arrayParam ? IDS_PER_ARRAY : IDS_PER_STATEMENT;
  for (let i = 0; i < ids.length; i += chunk) {
    const part = ids.slice(i, i + chunk);
    // By primary key, id by id: with `id = ANY(…) AND state IN (…)` a planner without
    // statistics may read the whole partial index of the waiting rows to intersect it.
    const result = yield c.d.arrayParam
      ? {
          sql: c.d.sql(`UPDATE ${c.jobs} j SET "state" = '${state}'
            FROM unnest(${c.d.arrayParam('bigint')}) AS x(id)
            WHERE j."id" = x.id AND j."state" IN (${states})`),
          params: [part],
        }
      : {
          planEachTime: true,
          sql: c.d.sql(`UPDATE ${c.jobs} SET "state" = '${state}'
            WHERE "id" IN (${marks(part.length)}) AND "state" IN (${states})`),
          params: part,
        };
    moved += result.affected;
  }
  return moved;
}

/** The scopes as a derived table `s(scope)`, and its parameters. */
function scopeList(c: SqlEnv, scopes: readonly string[]): Part {
  if (c.d.arrayParam) {
    return { sql: `(SELECT unnest(${c.d.arrayParam('text')}) AS scope) s`, params: [scopes] };
  }
  const selects = scopes.map((_, i) => (i === 0 ? 'SELECT ? AS scope' : 'SELECT ?'));
  return { sql: `(${selects.join(' UNION ALL ')}) s`, params: [...scopes] };
}

interface Part {
  sql: string;
  params: unknown[];
}

/**
 * Per scope (in order): running and due waiting limited jobs, and the limits in play; null for
 * a scope without limited jobs (or, `onlyBlocked`, without blocked ones: one probe each).
 */
function* readCounts(
  c: SqlEnv,
  scopes: readonly string[],
  onlyBlocked: boolean,
): Operation<(ScopeCounts | null)[]> {
  const ex = c.d.quote('exclusive');
  // Each subquery reads one partial scope index (running rows; due waiting rows; blocked rows
  // in order, the first only).
  const running = `r.scope = s.scope AND r.${ex} = ${c.d.TRUE} AND r.state = 'running'`;
  const waiting = `w.scope = s.scope AND ${waitingLimited(c, 'w')}`;
  const list = scopeList(c, scopes);
  // A count and the largest limit in one number (limits are at most 1,000): one probe each.
  const countAndLimit = (a: string, where: string): string =>
    `(SELECT COUNT(*) * ${LIMIT_BASE} + COALESCE(MAX(COALESCE(${a}.scope_limit, 1)), 0)
      FROM ${byScope(c, a)} WHERE ${where})`;
  // A column of the first blocked row, or of the last due waiting row: one probe each.
  const firstBlocked = (column: string): string =>
    `(SELECT ${column} FROM ${byScope(c, 'b')} WHERE b.scope = s.scope AND b.state = 'blocked'
      ORDER BY ${rank(c, 'b')} LIMIT 1)`;
  const lastWaiting = (column: string): string =>
    `(SELECT ${column} FROM ${byScope(c, 'w')} WHERE ${waiting}
      ORDER BY ${rank(c, 'w', true)} LIMIT 1)`;
  const rows = (yield {
    planEachTime: true,
    sql: c.d.sql(`SELECT s.scope, ${countAndLimit('r', running)} AS running,
      ${countAndLimit('w', waiting)} AS waiting,
      ${firstBlocked('COALESCE(b.scope_limit, 1)')} AS blocked_lim,
      ${firstBlocked('b.id')} AS b_id, ${firstBlocked('b.priority')} AS b_priority,
      ${firstBlocked(c.d.timeText('b.due_at'))} AS b_due,
      ${lastWaiting('w.id')} AS w_id, ${lastWaiting('w.priority')} AS w_priority,
      ${lastWaiting(c.d.timeText('w.due_at'))} AS w_due
      FROM ${list.sql}${
        onlyBlocked
          ? // A probe per scope (as EXISTS, a planner may hash every blocked row instead).
            ` WHERE (SELECT 1 FROM ${byScope(c, 'x')}
              WHERE x.scope = s.scope AND x.state = 'blocked' LIMIT 1) IS NOT NULL`
          : ''
      }`),
    params: list.params,
  }).rows;
  const found = new Map(rows.map((row) => [String(row.scope), row]));
  const split = (value: unknown): [number, number | null] => {
    const n = Number(value);
    const limit = n % LIMIT_BASE;
    return [Math.floor(n / LIMIT_BASE), limit === 0 ? null : limit];
  };
  return scopes.map((scope) => {
    const row = found.get(scope);
    if (!row) return null;
    const [running, runningLimit] = split(row.running);
    const [waiting, waitingLimit] = split(row.waiting);
    const blockedLimit = nullableNumber(row.blocked_lim);
    // Every due waiting job ranks ahead of every blocked one (the usual case: a queue in order).
    const allAhead =
      blockedLimit === null ||
      waiting === 0 ||
      byAcquisitionOrder(rankOf(row, 'w'), rankOf(row, 'b')) < 0;
    return {
      running,
      waiting,
      limit: maxOf(runningLimit, waitingLimit),
      blockedLimit,
      allAhead,
    };
  });
}

/**
 * Per scope of `work` (by index): its due waiting limited jobs (few: the blocked set keeps them
 * to the free slots, or this enqueue's) and, when it has blocked jobs and a free slot, its first
 * `k` blocked jobs — the first `k` of both together are among them.
 */
function* readFirsts(c: SqlEnv, work: readonly Work[]): Operation<Map<string, Ranked[]>> {
  const columns = (a: string): string =>
    `${a}.scope, ${a}.id, ${a}.state, ${a}.priority, ${c.d.timeText(`${a}.due_at`)} AS due,
      COALESCE(${a}.scope_limit, 1) AS lim`;
  const parts: string[] = [];
  const params: unknown[] = [];
  /**
   * Each scope's first `n` rows matching `where` (alias `j`) in acquisition order, as `a`: per
   * scope, a probe of its index in order. PostgreSQL: one text for any number of scopes,
   * LATERAL (without ORDER BY its planner reads the whole index into a hash join, and with a
   * list of scopes as a filter it walks every matching row of the table); else a subquery per
   * scope.
   */
  const firstRows = (a: string, of: readonly Work[], where: string, n: (w: Work) => number) => {
    if (of.length === 0) return;
    if (c.d.arrayParam) {
      parts.push(`SELECT ${columns(a)}
        FROM unnest(${c.d.arrayParam('text')}, ${c.d.arrayParam('bigint')}) AS x(scope, n)
        CROSS JOIN LATERAL (SELECT * FROM ${c.jobs} j WHERE j.scope = x.scope AND ${where}
          ORDER BY ${rank(c, 'j')} LIMIT x.n) ${a}`);
      params.push(
        of.map((w) => w.scope),
        of.map((w) => String(n(w))),
      );
      return;
    }
    of.forEach((w, i) => {
      parts.push(`SELECT * FROM (SELECT ${columns('j')} FROM ${byScope(c, 'j')}
        WHERE j.scope = ? AND ${where} ORDER BY ${rank(c, 'j')} LIMIT ?) ${a}${i}`);
      params.push(w.scope, n(w));
    });
  };
  firstRows('w', work, waitingLimited(c, 'j'), waitingReadLimit);
  firstRows(
    'b',
    work.filter((w) => w.blocked),
    `j.state = 'blocked'`,
    readLimit,
  );
  const out = new Map<string, Ranked[]>();
  const rows = (yield { planEachTime: true, sql: c.d.sql(parts.join('\nUNION ALL ')), params })
    .rows;
  for (const row of rows) {
    const scope = String(row.scope);
    const list = out.get(scope) ?? [];
    list.push(toRanked(row));
    out.set(scope, list);
  }
  return out;
}

function toRanked(row: SqlRow): Ranked {
  return {
    id: String(row.id),
    state: String(row.state),
    priority: Number(row.priority),
    dueAt: readTime(row.due),
    limit: Number(row.lim),
  };
}

/** The rank columns `<p>_id`, `<p>_priority`, `<p>_due` of a `readCounts` row. */
function rankOf(row: SqlRow, p: string): { id: string; priority: number; dueAt: Date } {
  return {
    id: String(row[`${p}_id`]),
    priority: Number(row[`${p}_priority`]),
    dueAt: readTime(row[`${p}_due`]),
  };
}

function maxOf(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.max(a, b);
}

function nullableNumber(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}
