/**
 * Schedules: save and read definitions, and fire an occurrence — compare-and-set on the
 * schedule's version, overlap rule, the occurrence's jobs and the next fire time in one
 * transaction, so each occurrence fires exactly once whoever fires it.
 */
import { StoreError } from '../../errors.js';
import type {
  SaveScheduleRequest,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
} from '../../store.js';
import type { Operation } from '../executor.js';
import { rowToSchedule } from '../rows.js';
import type { SqlEnv } from './env.js';
import { enqueue } from './jobs.js';

export function* getSchedule(c: SqlEnv, name: string): Operation<ScheduleRecord | null> {
  const row = (yield {
    sql: c.d.sql(`SELECT ${c.d.scheduleColumns} FROM ${c.schedules} WHERE "name" = ?`),
    params: [name],
  }).rows[0];
  return row ? rowToSchedule(row) : null;
}

export function* saveSchedule(
  c: SqlEnv,
  request: SaveScheduleRequest,
): Operation<ScheduleRecord | null> {
  const spec = JSON.stringify(request.spec);
  const next = request.nextAt ? c.d.time(request.nextAt) : null;
  const expected = request.expectedVersion;
  const reset = request.resetProgress
    ? `, "fired" = 0, "skipped" = 0, "pending_misfire" = ${c.d.FALSE}`
    : '';
  const update = (versioned: boolean): string =>
    c.d.sql(
      `UPDATE ${c.schedules} SET "spec" = ?, "next_at" = ?, "updated_at" = ${c.d.now},
          "version" = "version" + 1${reset} WHERE "name" = ?${versioned ? ' AND "version" = ?' : ''}`,
    );
  // Create only (`expected === null`) never updates; a numeric expected version is checked in
  // the UPDATE itself, so a fire committed after the caller's read makes it change nothing.
  let updated = 0;
  if (expected !== null) {
    const versioned = typeof expected === 'number';
    updated = (yield {
      sql: update(versioned),
      params: versioned ? [spec, next, request.name, expected] : [spec, next, request.name],
    }).affected;
  }
  if (updated === 0) {
    if (typeof expected === 'number') return null;
    // Insert; a concurrent creator wins the primary key and this one becomes an update.
    let inserted: number;
    try {
      inserted = (yield {
        sql: c.d.sql(
          `INSERT INTO ${c.schedules} ("name", "spec", "next_at", "paused", "pending_misfire", "skipped", "fired", "version", "created_at", "updated_at")
              VALUES (?, ?, ?, ${c.d.FALSE}, ${c.d.FALSE}, 0, 0, 1, ${c.d.now}, ${c.d.now})${c.d.onConflictDoNothing('name')}`,
        ),
        params: [request.name, spec, next],
      }).affected;
    } catch (error) {
      // Where the dialect has no ON CONFLICT, the duplicate key undoes only this statement.
      if (!c.d.isDuplicateKey(error)) throw error;
      inserted = 0;
    }
    if (inserted === 0) {
      if (expected === null) return null;
      yield { sql: update(false), params: [spec, next, request.name] };
    }
  }
  const record = yield* getSchedule(c, request.name);
  if (!record) {
    throw new StoreError(`[${c.label}] saveSchedule: ${request.name} vanished while saving`);
  }
  return record;
}

export function* listSchedules(c: SqlEnv): Operation<ScheduleRecord[]> {
  const rows = (yield {
    sql: c.d.sql(`SELECT ${c.d.scheduleColumns} FROM ${c.schedules} ORDER BY "name"`),
    params: [],
  }).rows;
  return rows.map(rowToSchedule);
}

export function* deleteSchedule(c: SqlEnv, name: string): Operation<boolean> {
  const result = yield {
    sql: c.d.sql(`DELETE FROM ${c.schedules} WHERE "name" = ?`),
    params: [name],
  };
  return result.affected > 0;
}

export function* setSchedulePaused(
  c: SqlEnv,
  name: string,
  paused: boolean,
): Operation<ScheduleRecord | null> {
  yield {
    sql: c.d.sql(
      `UPDATE ${c.schedules} SET "paused" = ?, "version" = "version" + 1, "updated_at" = ${c.d.now} WHERE "name" = ?`,
    ),
    params: [c.d.bool(paused), name],
  };
  return yield* getSchedule(c, name);
}

/** Unpaused schedules with `nextAt <= now`, or with a pending misfire. */
export function* dueSchedules(c: SqlEnv, limit: number): Operation<ScheduleRecord[]> {
  const rows = (yield {
    sql: c.d.sql(
      `SELECT ${c.d.scheduleColumns} FROM ${c.schedules}
          WHERE "paused" = ${c.d.FALSE} AND (("next_at" IS NOT NULL AND "next_at" <= ${c.d.now}) OR "pending_misfire" = ${c.d.TRUE})
          ORDER BY "next_at" LIMIT ?`,
    ),
    params: [limit],
  }).rows;
  return rows.map(rowToSchedule);
}

export function* fireSchedule(c: SqlEnv, fire: ScheduleFire): Operation<ScheduleFireResult> {
  // Compare-and-set first: the row lock it takes serialises racing fires of one schedule. A
  // fire not yet due on the database's clock changes nothing, whatever the caller's clock says.
  const next = fire.nextAt ? c.d.time(fire.nextAt) : null;
  const due = fire.dueAt ? ` AND ${c.d.now} >= ?` : '';
  const claimed = yield {
    sql: c.d.sql(
      `UPDATE ${c.schedules} SET "version" = "version" + 1, "next_at" = ?, "updated_at" = ${c.d.now}
          WHERE "name" = ? AND "version" = ?${due}`,
    ),
    params: fire.dueAt
      ? [next, fire.name, fire.version, c.d.time(fire.dueAt)]
      : [next, fire.name, fire.version],
  };
  if (claimed.affected === 0) return { status: 'conflict', jobs: [] };
  if (fire.overlap !== 'allow') {
    const busy = (yield {
      sql: c.d.sql(
        `SELECT 1 AS busy FROM ${c.jobs} WHERE "schedule_name" = ? AND "state" IN ('timer', 'async', 'blocked', 'running') LIMIT 1`,
      ),
      params: [fire.name],
    }).rows;
    if (busy.length > 0) {
      const set =
        fire.overlap === 'skip' ? `"skipped" = "skipped" + 1` : `"pending_misfire" = ${c.d.TRUE}`;
      yield {
        sql: c.d.sql(`UPDATE ${c.schedules} SET ${set} WHERE "name" = ?`),
        params: [fire.name],
      };
      return { status: fire.overlap === 'skip' ? 'skipped' : 'coalesced', jobs: [] };
    }
  }
  const created = yield* enqueue(c, fire.jobs);
  yield {
    sql: c.d.sql(
      `UPDATE ${c.schedules} SET "pending_misfire" = ${c.d.FALSE}, "fired" = "fired" + ? WHERE "name" = ?`,
    ),
    params: [fire.occurrences, fire.name],
  };
  return { status: 'fired', jobs: created.map((result) => result.job) };
}
