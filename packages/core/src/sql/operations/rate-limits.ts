/**
 * Rate limits kept in the store (DESIGN invariant 19): fixed windows per key in the
 * `jobs_rate_limits` table, taken under row locks (SQLite: its write lock), and deferring held
 * jobs over a limit without counting an attempt. The window rule is `rate-window.ts`.
 */
import { StoreError } from '../../errors.js';
import { nextRateWindow, type RateWindow } from '../../rate-window.js';
import type { JobRef, RateTokenGrant, RateTokenRequest, SettleResult } from '../../store.js';
import { marks } from '../dialect.js';
import type { Operation } from '../executor.js';
import type { SqlRow } from '../rows.js';
import type { SqlEnv } from './env.js';
import { now, settle } from './jobs.js';

const readWindow = (row: SqlRow): RateWindow => ({
  startMs: Number(row.start_ms),
  perMs: Number(row.per_ms),
  used: Number(row.used),
  blockedUntilMs:
    row.blocked_until_ms === null || row.blocked_until_ms === undefined
      ? null
      : Number(row.blocked_until_ms),
});

/**
 * Takes starts from the windows of `requests` in one transaction: creates missing windows, locks
 * them in key order (so two takers never deadlock), applies the rule, writes them back.
 */
export function* takeRateTokens(
  c: SqlEnv,
  requests: readonly RateTokenRequest[],
): Operation<RateTokenGrant[]> {
  if (requests.length === 0) return [];
  const table = c.d.table('rate_limits');
  const keys = [...new Set(requests.map((r) => r.key))].sort();
  // Row locks where the database has them; SQLite's transaction holds its one write lock.
  const forUpdate = c.d.forUpdate;
  const at = (yield* now(c)).getTime();
  const windows = new Map<string, RateWindow | null>();
  for (let attempt = 0; windows.size < keys.length; attempt++) {
    if (attempt === 5) {
      throw new StoreError(`[${c.label}] takeRateTokens: rate-limit windows kept disappearing`);
    }
    const rows = (yield {
      sql: c.d.sql(
        `SELECT "rate_key", "start_ms", "per_ms", "used", "blocked_until_ms" FROM ${table}
          WHERE "rate_key" IN (${marks(keys.length)}) ORDER BY "rate_key"${forUpdate}`,
      ),
      params: keys,
    }).rows;
    for (const row of rows) windows.set(String(row.rate_key), readWindow(row));
    const missing = keys.filter((key) => !windows.has(key));
    if (missing.length === 0) break;
    // A new window row; one another taker created meanwhile is read (and locked) next round.
    for (const key of missing) {
      try {
        yield {
          sql: c.d.sql(
            `INSERT INTO ${table} ("rate_key", "start_ms", "per_ms", "used", "blocked_until_ms")
              VALUES (?, 0, 0, 0, NULL)${c.d.onConflictDoNothing('rate_key')}`,
          ),
          params: [key],
        };
      } catch (error) {
        if (!c.d.isDuplicateKey(error)) throw error;
      }
    }
  }
  const grants: RateTokenGrant[] = [];
  const changed = new Set<string>();
  for (const request of requests) {
    const before = windows.get(request.key) ?? null;
    const next = nextRateWindow(before?.perMs === 0 ? null : before, request, at);
    windows.set(request.key, next.state);
    changed.add(request.key);
    grants.push({ key: request.key, granted: next.granted, retryAt: next.retryAt });
  }
  for (const key of changed) {
    const w = windows.get(key) as RateWindow;
    yield {
      sql: c.d.sql(
        `UPDATE ${table} SET "start_ms" = ?, "per_ms" = ?, "used" = ?, "blocked_until_ms" = ?
          WHERE "rate_key" = ?`,
      ),
      params: [w.startMs, w.perMs, w.used, w.blockedUntilMs, key],
    };
  }
  return grants;
}

/** Held jobs back to waiting, due `delayMs` from now, the attempt not counted (fenced). */
export function* deferJobs(
  c: SqlEnv,
  refs: readonly JobRef[],
  delayMs: number,
): Operation<SettleResult> {
  if (refs.length === 0) return { lost: [] };
  const ms = Math.max(0, Math.round(delayMs));
  return yield* settle(
    c,
    refs,
    (held) =>
      `UPDATE ${c.jobs} SET "state" = ?, "due_at" = ${c.d.nowPlusMs}, "attempts" = "attempts" - 1,
          "lock_owner" = NULL, "lock_expires_at" = NULL, "lock_token" = NULL WHERE ${held}`,
    [ms > 0 ? 'timer' : 'async', ms],
  );
}
