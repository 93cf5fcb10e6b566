/**
 * The store's operations, written once for every dialect as generators of statements (see
 * `Operation`). Each follows the store semantics of `@jobs/core`'s `JobStore` contract.
 */
import {
  type AcquireRequest,
  type EnqueueResult,
  type Job,
  type JobFailure,
  type JobFilter,
  type JobRef,
  type JobState,
  LEASE_EXPIRED_MESSAGE,
  type ListJobsRequest,
  type NewJob,
  newJobValues,
  type RecoverResult,
  readTime,
  rowToJob,
  rowToSchedule,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type SqlRow,
  type SqlValue,
  type StatsRow,
  StoreError,
} from '@jobs/core';
import {
  candidateWhere,
  type Dialect,
  marks,
  type Operation,
  type Query,
  type QueryOutcome,
} from './dialects/dialect.js';
import { isDuplicateKey } from './dialects/mysql.js';

/**
 * Ids are canonical decimal strings of the auto-increment column (`'7'`, not `'07'`, within
 * BIGINT); anything else names no job rather than being coerced to one.
 */
export function isJobId(id: string): boolean {
  return typeof id === 'string' && /^(0|[1-9][0-9]{0,17})$/.test(id);
}

/** The ids of `lost`, in the order their refs were given. */
function inInputOrder(refs: readonly JobRef[], lost: readonly string[]): string[] {
  const set = new Set(lost);
  return refs.filter((ref) => set.has(ref.id)).map((ref) => ref.id);
}

/** Sorts acquired rows into acquisition order (RETURNING and IN lists do not keep it). */
function byAcquisitionOrder(a: Job, b: Job): number {
  return (
    b.priority - a.priority ||
    a.dueAt.getTime() - b.dueAt.getTime() ||
    Number(BigInt(a.id) - BigInt(b.id))
  );
}

function filterWhere(d: Dialect, filter: JobFilter): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (filter.state !== undefined) {
    const states = (Array.isArray(filter.state) ? filter.state : [filter.state]) as JobState[];
    if (states.length === 0) return { sql: '1 = 0', params: [] };
    parts.push(`"state" IN (${marks(states.length)})`);
    params.push(...states);
  }
  const eq: [keyof JobFilter, string][] = [
    ['type', 'type'],
    ['scope', 'scope'],
    ['tenantId', 'tenant_id'],
    ['queue', 'queue'],
    ['schedule', 'schedule_name'],
  ];
  for (const [field, column] of eq) {
    if (filter[field] !== undefined) {
      parts.push(`"${column}" = ?`);
      params.push(filter[field]);
    }
  }
  const sql = parts.length === 0 ? '1 = 1' : parts.join(' AND ');
  return { sql: d.kind === 'mysql' ? sql.replace(/"/g, '`') : sql, params };
}

export class Operations {
  private readonly jobs: string;
  private readonly schedules: string;

  /**
   * @param notify a statement that wakes engines elsewhere (PostgreSQL `pg_notify`), sent in the
   * same transaction as the writes that made jobs acquirable, so it is delivered on commit.
   */
  constructor(
    private readonly d: Dialect,
    private readonly notify: Query | null = null,
  ) {
    this.jobs = d.table('jobs');
    this.schedules = d.table('schedules');
  }

  /** Rewrites `"col"` quoting for MySQL so shared SQL can be written once. */
  private q(sql: string): string {
    return this.d.kind === 'mysql' ? sql.replace(/"/g, '`') : sql;
  }

  *now(): Operation<Date> {
    const row = (yield { sql: `SELECT ${this.nowText()} AS now`, params: [] }).rows[0];
    return readTime(row?.now);
  }

  /** The database now, as text MySQL's driver cannot shift by time zone. */
  private nowText(): string {
    return this.d.kind === 'mysql' ? `CAST(${this.d.now} AS CHAR)` : this.d.now;
  }

  *migrate(): Operation<number[]> {
    const migrations = this.d.table('migrations');
    const versionsTable =
      this.d.kind === 'postgres'
        ? `CREATE TABLE IF NOT EXISTS ${migrations} ("version" integer PRIMARY KEY, "applied_at" timestamptz(3) NOT NULL DEFAULT now())`
        : this.d.kind === 'mysql'
          ? `CREATE TABLE IF NOT EXISTS ${migrations} (\`version\` INT NOT NULL PRIMARY KEY, \`applied_at\` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)) ENGINE=InnoDB`
          : `CREATE TABLE IF NOT EXISTS ${migrations} ("version" INTEGER PRIMARY KEY, "applied_at" INTEGER NOT NULL)`;
    for (const sql of this.d.setup) yield { sql, params: [] };
    yield { sql: versionsTable, params: [] };
    const done = new Set(
      (yield { sql: this.q(`SELECT "version" FROM ${migrations}`), params: [] }).rows.map((r) =>
        Number(r.version),
      ),
    );
    const applied: number[] = [];
    for (const [i, statements] of this.d.migrations.entries()) {
      const version = i + 1;
      if (done.has(version)) continue;
      for (const sql of statements) yield { sql, params: [] };
      yield {
        sql: this.q(
          this.d.kind === 'sqlite'
            ? `INSERT INTO ${migrations} ("version", "applied_at") VALUES (?, ${this.d.now})`
            : `INSERT INTO ${migrations} ("version") VALUES (?)`,
        ),
        params: [version],
      };
      applied.push(version);
    }
    return applied;
  }

  *enqueue(jobs: readonly NewJob[]): Operation<EnqueueResult[]> {
    if (jobs.length === 0) return [];
    const now = yield* this.now();
    const results: EnqueueResult[] = [];
    const encode = { time: this.d.time, bool: this.d.bool };
    const keys = [
      ...new Set(jobs.map((job) => job.key).filter((k): k is string => typeof k === 'string')),
    ];
    if (keys.length > 1) {
      const lock = this.d.lockKeys(keys.sort());
      if (lock) yield lock;
    }
    // Runs of keyless jobs go in multi-row inserts; a keyed job needs its own conflict check.
    const CHUNK = 500;
    let run: NewJob[] = [];
    const flush = function* (this: Operations): Operation<void> {
      if (run.length === 0) return;
      const rows = yield* this.d.insertJobs(run.map((job) => newJobValues(job, now, encode)));
      if (rows.length !== run.length) {
        throw new StoreError(
          `[@jobs/typeorm] enqueue: inserted ${run.length} jobs but read back ${rows.length}`,
        );
      }
      for (const row of rows) results.push({ job: rowToJob(row), created: true });
      run = [];
    };
    for (const job of jobs) {
      if ((job.key ?? null) === null) {
        run.push(job);
        if (run.length >= CHUNK) yield* flush.call(this);
        continue;
      }
      yield* flush.call(this);
      results.push(yield* this.enqueueOne(job, now, encode));
    }
    yield* flush.call(this);
    if (this.notify && results.some((r) => r.created)) yield this.notify;
    return results;
  }

  private *enqueueOne(
    job: NewJob,
    now: Date,
    encode: { time: (d: Date) => SqlValue; bool: (b: boolean) => SqlValue },
  ): Operation<EnqueueResult> {
    // A key conflict returns the holder; if the holder finished meanwhile, insert again.
    for (let attempt = 0; attempt < 5; attempt++) {
      const inserted = yield* this.d.insertJob(newJobValues(job, now, encode));
      if (inserted) return { job: rowToJob(inserted), created: true };
      const holder = (yield {
        sql: this.q(
          `SELECT ${this.d.jobColumns()} FROM ${this.jobs} WHERE "job_key" = ?${this.d.latestRead}`,
        ),
        params: [job.key],
      }).rows[0];
      if (holder) return { job: rowToJob(holder), created: false };
    }
    throw new StoreError(
      `[@jobs/typeorm] enqueue: key ${JSON.stringify(job.key)} kept changing hands`,
    );
  }

  /** Acquired rows, unsorted (see `toJobs`). */
  *acquire(request: AcquireRequest, token: string): Operation<SqlRow[]> {
    if (request.limit <= 0 || request.types.length === 0) return [];
    return yield* this.d.acquire(request, token);
  }

  /**
   * True when some job is an acquisition candidate for `request`: the same WHERE as `acquire`,
   * read without a lock, so a caller can skip a locking acquisition that would find nothing.
   */
  *anyCandidate(request: AcquireRequest): Operation<boolean> {
    if (request.limit <= 0 || request.types.length === 0) return false;
    const where = candidateWhere(this.d, request);
    const rows = (yield {
      sql: `SELECT 1 AS ${this.d.quote('one')} FROM ${this.jobs} j WHERE ${where.sql} LIMIT 1`,
      params: where.params,
    }).rows;
    return rows.length > 0;
  }

  /** Acquired rows as jobs in acquisition order. */
  toJobs(rows: SqlRow[]): Job[] {
    return rows.map(rowToJob).sort(byAcquisitionOrder);
  }

  /**
   * Runs `change` (an UPDATE/DELETE whose WHERE ends in `AND <held>`) on the rows held with the
   * given tokens and returns the refs that were not held. `params` come before the held-rows
   * parameters.
   */
  private *settle(
    refs: readonly JobRef[],
    change: (held: string) => string,
    params: unknown[],
    extra = '',
    extraParams: unknown[] = [],
  ): Operation<SettleResult> {
    // Chunks keep a statement's parameters well under every driver's limit (SQLite: 32,766).
    const CHUNK = 1_000;
    if (refs.length > CHUNK) {
      const lost: string[] = [];
      for (let i = 0; i < refs.length; i += CHUNK) {
        const part = yield* this.settle(
          refs.slice(i, i + CHUNK),
          change,
          params,
          extra,
          extraParams,
        );
        lost.push(...part.lost);
      }
      return { lost };
    }
    const valid = refs.filter((ref) => isJobId(ref.id));
    const lostInvalid = refs.filter((ref) => !isJobId(ref.id)).map((ref) => ref.id);
    if (valid.length === 0) return { lost: lostInvalid };
    const ids = valid.map((ref) => ref.id);
    if (this.d.returning) {
      // SQLite takes row values only against a subquery; PostgreSQL infers types from a list.
      const pairs = `${this.d.kind === 'sqlite' ? 'VALUES ' : ''}${valid.map(() => '(?, ?)').join(', ')}`;
      const held = `"id" IN (${marks(ids.length)}) AND ("id", "lock_token") IN (${pairs}) AND "state" = 'running'${extra}`;
      const heldParams = [...ids, ...valid.flatMap((ref) => [ref.id, ref.token]), ...extraParams];
      const rows = (yield {
        sql: this.q(`${change(held)} RETURNING "id"`),
        params: [...params, ...heldParams],
      }).rows;
      const done = new Set(rows.map((row) => String(row.id)));
      return { lost: inInputOrder(refs, [...lostInvalid, ...ids.filter((id) => !done.has(id))]) };
    }
    // MySQL: lock the candidates, keep those whose token matches, then write only those.
    const rows = (yield {
      sql: this.q(
        `SELECT "id", "lock_token", "lock_owner" FROM ${this.jobs} WHERE "id" IN (${marks(ids.length)}) AND "state" = 'running'${extra} FOR UPDATE`,
      ),
      params: [...ids, ...extraParams],
    }).rows;
    const tokens = new Map(rows.map((row) => [String(row.id), String(row.lock_token)]));
    const held = valid.filter((ref) => tokens.get(ref.id) === ref.token).map((ref) => ref.id);
    if (held.length > 0) {
      yield {
        sql: this.q(change(`"id" IN (${marks(held.length)})`)),
        params: [...params, ...held],
      };
    }
    const heldSet = new Set(held);
    return { lost: inInputOrder(refs, [...lostInvalid, ...ids.filter((id) => !heldSet.has(id))]) };
  }

  /** Settling needs a transaction only where there is no RETURNING. */
  get settleNeedsTransaction(): boolean {
    return !this.d.returning;
  }

  *complete(refs: readonly JobRef[]): Operation<SettleResult> {
    if (refs.length === 0) return { lost: [] };
    return yield* this.settle(refs, (held) => `DELETE FROM ${this.jobs} WHERE ${held}`, []);
  }

  *fail(failures: readonly JobFailure[]): Operation<SettleResult> {
    const lost: string[] = [];
    // Same outcome and delay → one statement; failures in one batch usually share both.
    const groups = new Map<string, JobFailure[]>();
    for (const f of failures) {
      const key = `${f.deadletter}|${f.retryDelayMs}|${f.error.message}|${f.error.stack}`;
      const group = groups.get(key);
      if (group) group.push(f);
      else groups.set(key, [f]);
    }
    for (const group of groups.values()) {
      const first = group[0] as JobFailure;
      const set = first.deadletter
        ? `"state" = 'deadletter'`
        : `"state" = 'timer', "due_at" = ${this.d.nowPlusMs}, "retries_left" = "retries_left" - 1`;
      const params: unknown[] = first.deadletter ? [] : [first.retryDelayMs];
      params.push(first.error.message, first.error.stack);
      const result = yield* this.settle(
        group,
        (held) =>
          `UPDATE ${this.jobs} SET ${set}, "lock_owner" = NULL, "lock_expires_at" = NULL, "lock_token" = NULL,
            "last_error_message" = ?, "last_error_stack" = ? WHERE ${held}`,
        params,
      );
      lost.push(...result.lost);
    }
    return { lost: inInputOrder(failures, lost) };
  }

  *release(refs: readonly JobRef[]): Operation<SettleResult> {
    if (refs.length === 0) return { lost: [] };
    return yield* this.settle(
      refs,
      (held) =>
        `UPDATE ${this.jobs} SET "state" = 'async', "attempts" = "attempts" - 1, "lock_owner" = NULL,
          "lock_expires_at" = NULL, "lock_token" = NULL WHERE ${held}`,
      [],
    );
  }

  *renewLeases(owner: string, leaseMs: number, refs: readonly JobRef[]): Operation<SettleResult> {
    if (refs.length === 0) return { lost: [] };
    if (!this.d.returning) return yield* this.renewWithoutReturning(owner, leaseMs, refs);
    return yield* this.settle(
      refs,
      (held) => `UPDATE ${this.jobs} SET "lock_expires_at" = ${this.d.nowPlusMs} WHERE ${held}`,
      [leaseMs],
      ` AND "lock_owner" = ?`,
      [owner],
    );
  }

  /**
   * MySQL renewal, the heartbeat of every running job: one UPDATE, no transaction. Only when it
   * touched fewer rows than asked does a read find which refs are no longer held (a token never
   * comes back, so a row holding it now held it during the UPDATE).
   */
  private *renewWithoutReturning(
    owner: string,
    leaseMs: number,
    refs: readonly JobRef[],
  ): Operation<SettleResult> {
    const lost = refs.filter((ref) => !isJobId(ref.id)).map((ref) => ref.id);
    const valid = refs.filter((ref) => isJobId(ref.id));
    for (let i = 0; i < valid.length; i += 1_000) {
      const part = valid.slice(i, i + 1_000);
      const ids = part.map((ref) => ref.id);
      const updated = yield {
        sql: this.q(
          `UPDATE ${this.jobs} SET "lock_expires_at" = ${this.d.nowPlusMs}
            WHERE "id" IN (${marks(ids.length)}) AND ("id", "lock_token") IN (${part.map(() => '(?, ?)').join(', ')})
              AND "state" = 'running' AND "lock_owner" = ?`,
        ),
        params: [leaseMs, ...ids, ...part.flatMap((ref) => [ref.id, ref.token]), owner],
      };
      if (updated.affected === part.length) continue;
      const held = (yield {
        sql: this.q(
          `SELECT "id", "lock_token" FROM ${this.jobs}
            WHERE "id" IN (${marks(ids.length)}) AND "state" = 'running' AND "lock_owner" = ?`,
        ),
        params: [...ids, owner],
      }).rows;
      const tokens = new Map(held.map((row) => [String(row.id), String(row.lock_token)]));
      lost.push(...part.filter((ref) => tokens.get(ref.id) !== ref.token).map((ref) => ref.id));
    }
    return { lost: inInputOrder(refs, lost) };
  }

  *recoverExpiredLeases(limit: number): Operation<RecoverResult> {
    const expired = (yield {
      sql: this.q(
        `SELECT "id", "retries_left" FROM ${this.jobs} WHERE "state" = 'running' AND "lock_expires_at" <= ${this.d.now}
          ORDER BY "lock_expires_at" LIMIT ?${this.d.kind === 'sqlite' ? '' : ' FOR UPDATE SKIP LOCKED'}`,
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
    const still = `"state" = 'running' AND "lock_expires_at" <= ${this.d.now}`;
    for (const [ids, set, out] of [
      [requeue, `"state" = 'async', "retries_left" = "retries_left" - 1`, result.requeued],
      [dead, `"state" = 'deadletter'`, result.deadlettered],
    ] as const) {
      if (ids.length === 0) continue;
      const sql = `UPDATE ${this.jobs} SET ${set}, ${clear} WHERE "id" IN (${marks(ids.length)}) AND ${still}`;
      if (this.d.returning) {
        const rows = (yield {
          sql: this.q(`${sql} RETURNING "id"`),
          params: [LEASE_EXPIRED_MESSAGE, ...ids],
        }).rows;
        out.push(...rows.map((row) => String(row.id)));
      } else {
        // Rows are locked (FOR UPDATE above), so the check cannot change under us.
        yield { sql: this.q(sql), params: [LEASE_EXPIRED_MESSAGE, ...ids] };
        out.push(...ids);
      }
    }
    return result;
  }

  *nextDueAt(request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>): Operation<Date | null> {
    if (request.types.length === 0) return null;
    const params: unknown[] = [...request.types];
    let sql = `SELECT MIN(${this.d.kind === 'mysql' ? 'CAST(`due_at` AS CHAR)' : '"due_at"'}) AS due FROM ${this.jobs}
      WHERE "state" IN ('timer', 'async') AND "type" IN (${marks(request.types.length)})`;
    for (const [values, column] of [
      [request.queues, 'queue'],
      [request.tenants, 'tenant_id'],
    ] as const) {
      if (!values) continue;
      if (values.length === 0) return null;
      sql += ` AND "${column}" IN (${marks(values.length)})`;
      params.push(...values);
    }
    const row = (yield { sql: this.q(sql), params }).rows[0];
    return row?.due === null || row?.due === undefined ? null : readTime(row.due);
  }

  // ---- admin ----

  *getJob(id: string): Operation<Job | null> {
    if (!isJobId(id)) return null;
    const row = (yield {
      sql: this.q(`SELECT ${this.d.jobColumns()} FROM ${this.jobs} WHERE "id" = ?`),
      params: [id],
    }).rows[0];
    return row ? rowToJob(row) : null;
  }

  *listJobs(request: ListJobsRequest): Operation<Job[]> {
    const where = filterWhere(this.d, request);
    const rows = (yield {
      sql: this.q(
        `SELECT ${this.d.jobColumns()} FROM ${this.jobs} WHERE ${where.sql} ORDER BY "id" ASC LIMIT ? OFFSET ?`,
      ),
      params: [...where.params, request.limit, request.offset],
    }).rows;
    return rows.map(rowToJob);
  }

  *retryDeadletter(id: string, retries: number): Operation<Job | null> {
    if (!isJobId(id)) return null;
    const result = yield {
      sql: this.q(
        `UPDATE ${this.jobs} SET "state" = 'async', "due_at" = ${this.d.now}, "retries_left" = ?,
          "lock_owner" = NULL, "lock_expires_at" = NULL, "lock_token" = NULL
          WHERE "id" = ? AND "state" = 'deadletter'`,
      ),
      params: [retries, id],
    };
    if (result.affected === 0) return null;
    if (this.notify) yield this.notify;
    return yield* this.getJob(id);
  }

  *deleteJob(id: string): Operation<boolean> {
    if (!isJobId(id)) return false;
    const result = yield { sql: this.q(`DELETE FROM ${this.jobs} WHERE "id" = ?`), params: [id] };
    return result.affected > 0;
  }

  *suspend(filter: JobFilter): Operation<number> {
    const where = filterWhere(this.d, filter);
    const result = yield {
      sql: this.q(
        `UPDATE ${this.jobs} SET "suspended_from" = "state", "state" = 'suspended'
          WHERE "state" IN ('timer', 'async') AND ${where.sql}`,
      ),
      params: where.params,
    };
    return result.affected;
  }

  *activate(filter: JobFilter): Operation<number> {
    const where = filterWhere(this.d, filter);
    const result = yield {
      sql: this.q(
        `UPDATE ${this.jobs} SET "state" = "suspended_from", "suspended_from" = NULL
          WHERE "state" = 'suspended' AND ${where.sql}`,
      ),
      params: where.params,
    };
    if (this.notify && result.affected > 0) yield this.notify;
    return result.affected;
  }

  *stats(): Operation<StatsRow[]> {
    const rows = (yield {
      sql: this.q(
        `SELECT "type", "state", COUNT(*) AS n FROM ${this.jobs} GROUP BY "type", "state" ORDER BY "type", "state"`,
      ),
      params: [],
    }).rows;
    return rows.map((row) => ({
      type: String(row.type),
      state: row.state as JobState,
      count: Number(row.n),
    }));
  }

  // ---- schedules ----

  *getSchedule(name: string): Operation<ScheduleRecord | null> {
    const row = (yield {
      sql: this.q(`SELECT ${this.d.scheduleColumns} FROM ${this.schedules} WHERE "name" = ?`),
      params: [name],
    }).rows[0];
    return row ? rowToSchedule(row) : null;
  }

  *saveSchedule(request: SaveScheduleRequest): Operation<ScheduleRecord | null> {
    const spec = JSON.stringify(request.spec);
    const next = request.nextAt ? this.d.time(request.nextAt) : null;
    const expected = request.expectedVersion;
    const reset = request.resetProgress
      ? `, "fired" = 0, "skipped" = 0, "pending_misfire" = ${this.d.FALSE}`
      : '';
    // Create only (`expected === null`) never updates; a numeric expected version is checked in
    // the UPDATE itself, so a fire committed after the caller's read makes it change nothing.
    let updated = 0;
    if (expected !== null) {
      const versioned = typeof expected === 'number';
      updated = (yield {
        sql: this.q(
          `UPDATE ${this.schedules} SET "spec" = ?, "next_at" = ?, "updated_at" = ${this.d.now},
            "version" = "version" + 1${reset} WHERE "name" = ?${versioned ? ' AND "version" = ?' : ''}`,
        ),
        params: versioned ? [spec, next, request.name, expected] : [spec, next, request.name],
      }).affected;
    }
    if (updated === 0) {
      if (typeof expected === 'number') return null;
      // Insert; a concurrent creator wins the primary key and this one becomes an update. MySQL
      // has no `ON CONFLICT`: its duplicate-key error undoes only this statement, and is caught
      // (`INSERT IGNORE` would also turn a value the column cannot hold into a warning).
      const conflict = this.d.kind === 'mysql' ? '' : ` ON CONFLICT ("name") DO NOTHING`;
      let inserted: number;
      try {
        inserted = (yield {
          sql: this.q(
            `INSERT INTO ${this.schedules} ("name", "spec", "next_at", "paused", "pending_misfire", "skipped", "fired", "version", "created_at", "updated_at")
              VALUES (?, ?, ?, ${this.d.FALSE}, ${this.d.FALSE}, 0, 0, 1, ${this.d.now}, ${this.d.now})${conflict}`,
          ),
          params: [request.name, spec, next],
        }).affected;
      } catch (error) {
        if (this.d.kind !== 'mysql' || !isDuplicateKey(error)) throw error;
        inserted = 0;
      }
      if (inserted === 0) {
        if (expected === null) return null;
        yield {
          sql: this.q(
            `UPDATE ${this.schedules} SET "spec" = ?, "next_at" = ?, "updated_at" = ${this.d.now},
              "version" = "version" + 1${reset} WHERE "name" = ?`,
          ),
          params: [spec, next, request.name],
        };
      }
    }
    const record = yield* this.getSchedule(request.name);
    if (!record)
      throw new StoreError(`[@jobs/typeorm] saveSchedule: ${request.name} vanished while saving`);
    return record;
  }

  *listSchedules(): Operation<ScheduleRecord[]> {
    const rows = (yield {
      sql: this.q(`SELECT ${this.d.scheduleColumns} FROM ${this.schedules} ORDER BY "name"`),
      params: [],
    }).rows;
    return rows.map(rowToSchedule);
  }

  *deleteSchedule(name: string): Operation<boolean> {
    const result = yield {
      sql: this.q(`DELETE FROM ${this.schedules} WHERE "name" = ?`),
      params: [name],
    };
    return result.affected > 0;
  }

  *setSchedulePaused(name: string, paused: boolean): Operation<ScheduleRecord | null> {
    yield {
      sql: this.q(
        `UPDATE ${this.schedules} SET "paused" = ?, "version" = "version" + 1, "updated_at" = ${this.d.now} WHERE "name" = ?`,
      ),
      params: [this.d.bool(paused), name],
    };
    return yield* this.getSchedule(name);
  }

  *dueSchedules(limit: number): Operation<ScheduleRecord[]> {
    const rows = (yield {
      sql: this.q(
        `SELECT ${this.d.scheduleColumns} FROM ${this.schedules}
          WHERE "paused" = ${this.d.FALSE} AND (("next_at" IS NOT NULL AND "next_at" <= ${this.d.now}) OR "pending_misfire" = ${this.d.TRUE})
          ORDER BY "next_at" LIMIT ?`,
      ),
      params: [limit],
    }).rows;
    return rows.map(rowToSchedule);
  }

  *fireSchedule(fire: ScheduleFire): Operation<ScheduleFireResult> {
    // Compare-and-set first: the row lock it takes serialises racing fires of one schedule.
    const next = fire.nextAt ? this.d.time(fire.nextAt) : null;
    const claimed = yield {
      sql: this.q(
        `UPDATE ${this.schedules} SET "version" = "version" + 1, "next_at" = ?, "updated_at" = ${this.d.now}
          WHERE "name" = ? AND "version" = ?`,
      ),
      params: [next, fire.name, fire.version],
    };
    if (claimed.affected === 0) return { status: 'conflict', jobs: [] };
    if (fire.overlap !== 'allow') {
      const busy = (yield {
        sql: this.q(
          `SELECT 1 AS busy FROM ${this.jobs} WHERE "schedule_name" = ? AND "state" IN ('timer', 'async', 'running') LIMIT 1`,
        ),
        params: [fire.name],
      }).rows;
      if (busy.length > 0) {
        const set =
          fire.overlap === 'skip'
            ? `"skipped" = "skipped" + 1`
            : `"pending_misfire" = ${this.d.TRUE}`;
        yield {
          sql: this.q(`UPDATE ${this.schedules} SET ${set} WHERE "name" = ?`),
          params: [fire.name],
        };
        return { status: fire.overlap === 'skip' ? 'skipped' : 'coalesced', jobs: [] };
      }
    }
    const created = yield* this.enqueue(fire.jobs);
    yield {
      sql: this.q(
        `UPDATE ${this.schedules} SET "pending_misfire" = ${this.d.FALSE}, "fired" = "fired" + ? WHERE "name" = ?`,
      ),
      params: [fire.occurrences, fire.name],
    };
    return { status: 'fired', jobs: created.map((result) => result.job) };
  }
}

/** Maps a driver's outcome shape to `QueryOutcome`. */
export function outcome(rows: SqlRow[], affected: number, insertId: unknown): QueryOutcome {
  return {
    rows,
    affected,
    insertId: insertId === null || insertId === undefined ? null : String(insertId),
  };
}
