import { randomUUID } from 'node:crypto';
import {
  type AcquireRequest,
  assertIdentifier,
  assertKnownOptions,
  assertPositiveInteger,
  type EnqueueOptions,
  type EnqueueResult,
  type Job,
  type JobFailure,
  type JobFilter,
  type JobRef,
  type JobStore,
  LEASE_EXPIRED_MESSAGE,
  type ListJobsRequest,
  type NewJob,
  type RecoverResult,
  rowToJob,
  rowToSchedule,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type StatsRow,
  type StoreCapabilities,
  StoreError,
  ValidationError,
} from '@jobs/core';
import pg from 'pg';
import { NotificationListener } from './listener.js';
import { migrateSchema } from './migrate.js';
import { buildStatements, NOW_MS, type Statements } from './statements.js';

const OPTION_KEYS = ['connectionString', 'pool', 'max', 'schema', 'notifyChannel'];

export interface PostgresJobStoreOptions {
  /** A `postgres://` URL; the store opens (and closes) its own pool. */
  connectionString?: string;
  /** Your pool; the store uses it and leaves closing it to you. */
  pool?: pg.Pool;
  /** Pool size when the store opens its own pool. Default 10. */
  max?: number;
  /** Schema holding the tables. Default `jobs`. */
  schema?: string;
  /** LISTEN/NOTIFY channel. Default `<schema>_jobs`. */
  notifyChannel?: string;
}

/** Anything with pg's `query`: a `pg.Client` or `pg.PoolClient` inside `BEGIN`. */
type Queryable = Pick<pg.ClientBase, 'query'>;

/**
 * jsonb columns come back as text and are parsed by `rowToJob` / `rowToSchedule`: pg's own
 * jsonb parser would hand a JSON string payload over as a bare JS string, which the shared row
 * mapping cannot tell from JSON text.
 */
const JSONB_OID = 3802;
const rawJsonTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === JSONB_OID
      ? (value: string) => value
      : pg.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

/** Ids are decimal strings of a bigint; anything else names no job. */
const ID = /^[1-9][0-9]{0,18}$/;

/**
 * A `JobStore` on PostgreSQL (10+) through `pg`: batch acquisition with `FOR UPDATE SKIP LOCKED`,
 * fencing tokens, leases on the database clock, wake-ups by LISTEN/NOTIFY sent inside the
 * enqueuing transaction, and enqueue inside your own transaction.
 *
 * @example
 * import { JobEngine } from '@jobs/core';
 * import { PostgresJobStore } from '@jobs/postgres';
 *
 * const store = new PostgresJobStore({ connectionString: process.env.DATABASE_URL });
 * await store.migrate();
 * const engine = new JobEngine({ store, handlers: { email: async (job) => send(job.payload) } });
 * await engine.start();
 *
 * // enqueue inside your transaction: the job exists only if you commit
 * const client = await pool.connect();
 * await client.query('BEGIN');
 * await client.query('INSERT INTO orders ...');
 * await engine.enqueue('email', { order: 1 }, { tx: client });
 * await client.query('COMMIT');
 */
export class PostgresJobStore implements JobStore {
  readonly name = 'postgres';
  readonly capabilities: StoreCapabilities = {
    notifications: true,
    skipLocked: true,
    transactionalEnqueue: true,
    multiProcess: true,
  };
  /** The validated schema name. */
  readonly schema: string;
  /** The LISTEN/NOTIFY channel. */
  readonly channel: string;
  /** The pool the store queries through. */
  readonly pool: pg.Pool;

  private readonly ownsPool: boolean;
  private readonly sql: Statements;
  private readonly listener: NotificationListener;
  private readonly statementPrefix: string;
  private closed = false;
  private heartbeat: pg.Pool | null = null;
  private readonly connectionConfig: pg.ClientConfig;

  constructor(options: PostgresJobStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ValidationError(
        'options',
        '[@jobs/postgres] give { connectionString } or { pool }',
      );
    }
    assertKnownOptions(options, OPTION_KEYS, '@jobs/postgres');
    if (options.pool && options.connectionString) {
      throw new ValidationError(
        'connectionString',
        '[@jobs/postgres] give a connectionString or a pool, not both',
      );
    }
    if (options.max !== undefined) assertPositiveInteger(options.max, 'max', '@jobs/postgres');
    this.schema = assertIdentifier(options.schema ?? 'jobs', 'schema', { max: 48 });
    this.channel = assertIdentifier(
      options.notifyChannel ?? `${this.schema}_jobs`,
      'notifyChannel',
      { max: 63 },
    );
    if (options.pool) {
      this.pool = options.pool;
      this.ownsPool = false;
    } else if (options.connectionString) {
      this.pool = new pg.Pool({
        connectionString: options.connectionString,
        max: options.max ?? 10,
      });
      this.ownsPool = true;
    } else {
      throw new ValidationError(
        'connectionString',
        '[@jobs/postgres] give a connectionString or a pool',
      );
    }
    // A pool emits 'error' when an idle client dies (server restart); without a listener that
    // would crash the process. The next query simply gets a fresh connection.
    if (this.ownsPool) this.pool.on('error', () => {});
    this.sql = buildStatements(this.schema);
    this.statementPrefix = `jobs_${this.schema}_`;
    // The pool's own settings (pg keeps them as `options`) open the extra connections.
    this.connectionConfig = (this.pool as unknown as { options: pg.ClientConfig }).options;
    this.listener = new NotificationListener(this.connectionConfig, this.channel, () => {
      // Listener errors are recovered by reconnecting; nothing to surface here.
    });
  }

  async migrate(): Promise<void> {
    this.assertOpen('migrate');
    await migrateSchema(this.pool, this.schema);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.listener.stop();
    await this.heartbeat?.end();
    if (this.ownsPool) await this.pool.end();
  }

  /**
   * Lease renewals get a connection of their own, so a heartbeat never queues behind a busy
   * pool (slow acquisitions, big batches): a late heartbeat is a lost lease and a job run twice.
   */
  private heartbeatPool(): pg.Pool {
    if (!this.heartbeat) {
      this.heartbeat = new pg.Pool({ ...this.connectionConfig, max: 1, idleTimeoutMillis: 60_000 });
      this.heartbeat.on('error', () => {
        // An idle heartbeat connection died; the next renewal opens a new one.
      });
    }
    return this.heartbeat;
  }

  async now(): Promise<Date> {
    const { rows } = await this.run<{ now: Date }>('now', 'SELECT clock_timestamp() AS now', []);
    return rows[0]?.now as Date;
  }

  // ---- enqueue ----

  async enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    this.assertOpen('enqueue');
    const tx = options?.tx;
    if (tx !== undefined && tx !== null && typeof (tx as Queryable).query !== 'function') {
      throw new ValidationError(
        'tx',
        '[@jobs/postgres] enqueue: expected a pg Client or PoolClient inside BEGIN',
      );
    }
    if (jobs.length === 0) return [];
    return this.insertJobs(jobs, (tx as Queryable | undefined) ?? null);
  }

  /**
   * Inserts in one statement (with the NOTIFY). A job whose key is held gets the holder back;
   * a holder that finished between our insert and our read is retried.
   */
  private async insertJobs(
    jobs: readonly NewJob[],
    client: Queryable | null,
  ): Promise<EnqueueResult[]> {
    const results: (EnqueueResult | undefined)[] = new Array(jobs.length);
    let pending = jobs.map((_, i) => i);
    for (let round = 0; pending.length > 0; round++) {
      if (round === 5) {
        throw new StoreError(
          '[@jobs/postgres] enqueue: a job key kept changing hands; gave up after 5 rounds',
        );
      }
      const batch = pending.map((i) => jobs[i] as NewJob);
      const keyed = batch.some((j) => j.key !== null);
      const { rows } = await this.run<Record<string, unknown>>(
        keyed ? 'enqueueKeyed' : 'enqueue',
        keyed ? this.sql.enqueueKeyed : this.sql.enqueue,
        enqueueParams(batch, this.channel),
        client,
      );
      // Ids follow input order, so inserted rows line up with the inputs that were inserted:
      // every job without a key, and the first job of each key no other row held.
      const insertedKeys = new Set(rows.map((r) => r.job_key).filter((k) => k !== null));
      const seenKeys = new Set<string>();
      const inserted: number[] = [];
      const held: number[] = [];
      for (const i of pending) {
        const key = (jobs[i] as NewJob).key;
        if (key === null) inserted.push(i);
        else if (insertedKeys.has(key) && !seenKeys.has(key)) {
          seenKeys.add(key);
          inserted.push(i);
        } else held.push(i);
      }
      inserted.forEach((i, n) => {
        const row = rows[n] as Record<string, unknown>;
        results[i] = { job: rowToJob(insertedRow(jobs[i] as NewJob, row)), created: true };
      });
      pending = [];
      if (held.length === 0) break;
      const keys = [...new Set(held.map((i) => (jobs[i] as NewJob).key as string))];
      const existing = await this.run<Record<string, unknown>>(
        'byKeys',
        `SELECT * FROM "${this.schema}".jobs WHERE job_key = ANY($1::text[])`,
        [keys],
        client,
      );
      const byKey = new Map(existing.rows.map((r) => [String(r.job_key), rowToJob(r)]));
      for (const i of held) {
        const job = byKey.get((jobs[i] as NewJob).key as string);
        if (job) results[i] = { job, created: false };
        else pending.push(i);
      }
    }
    return results as EnqueueResult[];
  }

  // ---- acquisition and settlement ----

  async acquire(request: AcquireRequest): Promise<Job[]> {
    this.assertOpen('acquire');
    if (request.limit <= 0 || request.types.length === 0) return [];
    const token = randomUUID();
    const { rows } = await this.run<Record<string, unknown>>(
      'acquire',
      this.sql.acquireFast,
      acquireParams(request, token),
    );
    if (rows[0]?.needs_exclusive) return this.acquireLocked(request, token);
    return toJobs(rows);
  }

  /**
   * `complete(done)` and `acquire(request)` in one statement: one round trip per batch on the
   * hot path. The engine uses it when a store has it.
   */
  async completeAndAcquire(
    done: readonly JobRef[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }> {
    this.assertOpen('completeAndAcquire');
    const refs = splitRefs(done);
    if (request.limit <= 0 || request.types.length === 0) {
      const { lost } = await this.complete(done);
      return { lost, jobs: [] };
    }
    const token = randomUUID();
    const { rows } = await this.run<Record<string, unknown>>(
      'completeAndAcquire',
      this.sql.completeAndAcquireFast,
      [...acquireParams(request, token), refs.ids, refs.tokens],
    );
    const lost = [...refs.invalid, ...((rows[0]?.lost_ids as string[] | null) ?? [])];
    const jobs = rows[0]?.needs_exclusive ? await this.acquireLocked(request, token) : toJobs(rows);
    return { lost, jobs };
  }

  /** Exclusive jobs: lock their scopes, then decide on a fresh snapshot (see statements.ts). */
  private async acquireLocked(request: AcquireRequest, token: string): Promise<Job[]> {
    return this.transaction('acquire', async (client) => {
      const locked = await this.run<{ scopes: string[] }>(
        'lockScopes',
        this.sql.lockExclusiveScopes,
        [request.limit, request.types, request.queues, request.tenants],
        client,
      );
      const { rows } = await this.run<Record<string, unknown>>(
        'acquireLocked',
        this.sql.acquireLocked,
        [...acquireParams(request, token), locked.rows[0]?.scopes ?? []],
        client,
      );
      return toJobs(rows);
    });
  }

  async complete(jobs: readonly JobRef[]): Promise<SettleResult> {
    this.assertOpen('complete');
    const refs = splitRefs(jobs);
    return this.settle('complete', this.sql.complete, refs, [refs.ids, refs.tokens]);
  }

  async fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    this.assertOpen('fail');
    const refs = splitRefs(failures);
    const valid = failures.filter((f) => ID.test(f.id));
    return this.settle('fail', this.sql.fail, refs, [
      refs.ids,
      refs.tokens,
      valid.map((f) => f.deadletter),
      valid.map((f) => Math.max(0, f.retryDelayMs)),
      valid.map((f) => f.error.message),
      valid.map((f) => f.error.stack ?? null),
    ]);
  }

  async release(jobs: readonly JobRef[]): Promise<SettleResult> {
    this.assertOpen('release');
    const refs = splitRefs(jobs);
    return this.settle('release', this.sql.release, refs, [refs.ids, refs.tokens, this.channel]);
  }

  async renewLeases(
    owner: string,
    leaseMs: number,
    jobs: readonly JobRef[],
  ): Promise<SettleResult> {
    this.assertOpen('renewLeases');
    const refs = splitRefs(jobs);
    return this.settle('renewLeases', this.sql.renew, refs, [
      owner,
      leaseMs,
      refs.ids,
      refs.tokens,
    ]);
  }

  async recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    this.assertOpen('recoverExpiredLeases');
    if (limit <= 0) return { requeued: [], deadlettered: [] };
    const { rows } = await this.run<{ id: string; state: string }>('recover', this.sql.recover, [
      limit,
      LEASE_EXPIRED_MESSAGE,
      this.channel,
    ]);
    const byId = (a: { id: string }, b: { id: string }): number => Number(a.id) - Number(b.id);
    rows.sort(byId);
    return {
      requeued: rows.filter((r) => r.state === 'async').map((r) => r.id),
      deadlettered: rows.filter((r) => r.state === 'deadletter').map((r) => r.id),
    };
  }

  async nextDueAt(
    request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>,
  ): Promise<Date | null> {
    this.assertOpen('nextDueAt');
    if (request.types.length === 0) return null;
    const { rows } = await this.run<{ due_at: Date | null }>('nextDueAt', this.sql.nextDueAt, [
      request.types,
      request.queues,
      request.tenants,
    ]);
    return rows[0]?.due_at ?? null;
  }

  subscribe(listener: () => void): () => void {
    this.assertOpen('subscribe');
    return this.listener.add(listener);
  }

  /**
   * Resolves when the listening connection is up, so a notification sent after this is heard.
   * Useful in tests and before measuring pickup latency.
   */
  async listening(): Promise<void> {
    await this.listener.ready();
  }

  /** Backend pid of the listening connection, or null when nobody subscribed. */
  listenerBackendPid(): Promise<number | null> {
    return this.listener.backendPid();
  }

  // ---- admin ----

  async getJob(id: string): Promise<Job | null> {
    this.assertOpen('getJob');
    if (!ID.test(id)) return null;
    const { rows } = await this.run<Record<string, unknown>>(
      'getJob',
      `SELECT * FROM "${this.schema}".jobs WHERE id = $1`,
      [id],
    );
    return rows[0] ? rowToJob(rows[0]) : null;
  }

  async listJobs(request: ListJobsRequest): Promise<Job[]> {
    this.assertOpen('listJobs');
    const where = filterSql(request);
    const n = where.params.length;
    const { rows } = await this.run<Record<string, unknown>>(
      'listJobs',
      `SELECT * FROM "${this.schema}".jobs WHERE ${where.sql} ORDER BY id LIMIT $${n + 1} OFFSET $${n + 2}`,
      [...where.params, Math.max(0, request.limit), Math.max(0, request.offset)],
    );
    return rows.map(rowToJob);
  }

  async retryDeadletter(id: string, retries: number): Promise<Job | null> {
    this.assertOpen('retryDeadletter');
    if (!ID.test(id)) return null;
    const { rows } = await this.run<Record<string, unknown>>(
      'retryDeadletter',
      `WITH moved AS (
         UPDATE "${this.schema}".jobs
         SET state = 'async', due_at = ${NOW_MS}, retries_left = $2,
             lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL
         WHERE id = $1 AND state = 'deadletter'
         RETURNING *)
       SELECT moved.*, (SELECT 1 FROM pg_notify($3, '')) AS notified FROM moved`,
      [id, retries, this.channel],
    );
    return rows[0] ? rowToJob(rows[0]) : null;
  }

  async deleteJob(id: string): Promise<boolean> {
    this.assertOpen('deleteJob');
    if (!ID.test(id)) return false;
    const { rowCount } = await this.run(
      'deleteJob',
      `DELETE FROM "${this.schema}".jobs WHERE id = $1`,
      [id],
    );
    return (rowCount ?? 0) > 0;
  }

  async suspend(filter: JobFilter): Promise<number> {
    this.assertOpen('suspend');
    const where = filterSql(filter);
    const { rowCount } = await this.run(
      'suspend',
      `UPDATE "${this.schema}".jobs SET suspended_from = state, state = 'suspended'
       WHERE state IN ('timer', 'async') AND ${where.sql}`,
      where.params,
    );
    return rowCount ?? 0;
  }

  async activate(filter: JobFilter): Promise<number> {
    this.assertOpen('activate');
    const where = filterSql(filter);
    const n = where.params.length;
    const { rows } = await this.run<{ count: string }>(
      'activate',
      `WITH moved AS (
         UPDATE "${this.schema}".jobs SET state = coalesce(suspended_from, 'async'), suspended_from = NULL
         WHERE state = 'suspended' AND ${where.sql}
         RETURNING 1)
       SELECT count(*) AS count,
              (SELECT 1 FROM pg_notify($${n + 1}, '') WHERE EXISTS (SELECT 1 FROM moved)) AS notified
       FROM moved`,
      [...where.params, this.channel],
    );
    return Number(rows[0]?.count ?? 0);
  }

  async stats(): Promise<StatsRow[]> {
    this.assertOpen('stats');
    const { rows } = await this.run<{ type: string; state: StatsRow['state']; count: string }>(
      'stats',
      `SELECT type, state, count(*) AS count FROM "${this.schema}".jobs
       GROUP BY type, state ORDER BY type COLLATE "C", state COLLATE "C"`,
      [],
    );
    return rows.map((r) => ({ type: r.type, state: r.state, count: Number(r.count) }));
  }

  // ---- schedules ----

  async saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    this.assertOpen('saveSchedule');
    const s = `"${this.schema}".schedules`;
    const expected = request.expectedVersion;
    const update = `spec = $2::jsonb, next_at = $3, updated_at = statement_timestamp(),
         version = s.version + 1,
         fired = CASE WHEN $4 THEN 0 ELSE s.fired END,
         skipped = CASE WHEN $4 THEN 0 ELSE s.skipped END,
         pending_misfire = CASE WHEN $4 THEN false ELSE s.pending_misfire END`;
    // Each form is one statement, so the version check and the write are atomic: a numeric
    // expected version only updates that version; otherwise an upsert whose update half runs
    // only when no version was expected ($5 false: create only).
    const text =
      typeof expected === 'number'
        ? `UPDATE ${s} AS s SET ${update} WHERE s.name = $1 AND s.version = $5 RETURNING *`
        : `INSERT INTO ${s} AS s (name, spec, next_at, created_at, updated_at)
       VALUES ($1, $2::jsonb, $3, statement_timestamp(), statement_timestamp())
       ON CONFLICT (name) DO UPDATE SET ${update}
       WHERE $5::boolean
       RETURNING *`;
    const { rows } = await this.run<Record<string, unknown>>('saveSchedule', text, [
      request.name,
      JSON.stringify(request.spec ?? null),
      request.nextAt,
      request.resetProgress,
      typeof expected === 'number' ? expected : expected === undefined,
    ]);
    // No row only when the expected version did not match.
    return rows[0] ? rowToSchedule(rows[0]) : null;
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    this.assertOpen('getSchedule');
    const { rows } = await this.run<Record<string, unknown>>(
      'getSchedule',
      `SELECT * FROM "${this.schema}".schedules WHERE name = $1`,
      [name],
    );
    return rows[0] ? rowToSchedule(rows[0]) : null;
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    this.assertOpen('listSchedules');
    const { rows } = await this.run<Record<string, unknown>>(
      'listSchedules',
      `SELECT * FROM "${this.schema}".schedules ORDER BY name COLLATE "C"`,
      [],
    );
    return rows.map(rowToSchedule);
  }

  async deleteSchedule(name: string): Promise<boolean> {
    this.assertOpen('deleteSchedule');
    const { rowCount } = await this.run(
      'deleteSchedule',
      `DELETE FROM "${this.schema}".schedules WHERE name = $1`,
      [name],
    );
    return (rowCount ?? 0) > 0;
  }

  async setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    this.assertOpen('setSchedulePaused');
    const { rows } = await this.run<Record<string, unknown>>(
      'setSchedulePaused',
      `UPDATE "${this.schema}".schedules
       SET paused = $2, version = version + 1, updated_at = statement_timestamp()
       WHERE name = $1 RETURNING *`,
      [name, paused],
    );
    return rows[0] ? rowToSchedule(rows[0]) : null;
  }

  async dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    this.assertOpen('dueSchedules');
    const { rows } = await this.run<Record<string, unknown>>(
      'dueSchedules',
      `SELECT * FROM "${this.schema}".schedules
       WHERE NOT paused
         AND ((next_at IS NOT NULL AND next_at <= statement_timestamp()) OR pending_misfire)
       ORDER BY next_at NULLS LAST, name COLLATE "C"
       LIMIT $1`,
      [Math.max(0, limit)],
    );
    return rows.map(rowToSchedule);
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    this.assertOpen('fireSchedule');
    const s = `"${this.schema}".schedules`;
    return this.transaction('fireSchedule', async (client) => {
      // The row lock makes racing fires of one version take turns; the loser sees the new
      // version and reports a conflict.
      const current = await this.run<{ version: number; busy: boolean }>(
        'fireSchedule',
        `SELECT version,
                EXISTS (SELECT 1 FROM "${this.schema}".jobs
                        WHERE schedule_name = $1 AND state IN ('timer', 'async', 'running')) AS busy
         FROM ${s} WHERE name = $1 FOR UPDATE`,
        [fire.name],
        client,
      );
      const row = current.rows[0];
      if (!row || row.version !== fire.version) return { status: 'conflict', jobs: [] };
      let status: ScheduleFireResult['status'] = 'fired';
      let jobs: Job[] = [];
      if (fire.overlap !== 'allow' && row.busy) {
        status = fire.overlap === 'skip' ? 'skipped' : 'coalesced';
      } else if (fire.jobs.length > 0) {
        jobs = (await this.insertJobs(fire.jobs, client)).map((r) => r.job);
      }
      await this.run(
        'fireSchedule',
        `UPDATE ${s} SET
           next_at = $2, version = version + 1, updated_at = statement_timestamp(),
           skipped = skipped + CASE WHEN $3 = 'skipped' THEN 1 ELSE 0 END,
           pending_misfire = CASE WHEN $3 = 'coalesced' THEN true
                                  WHEN $3 = 'fired' THEN false ELSE pending_misfire END,
           fired = fired + CASE WHEN $3 = 'fired' THEN $4::int ELSE 0 END
         WHERE name = $1`,
        [fire.name, fire.nextAt, status, fire.occurrences],
        client,
      );
      return { status, jobs };
    });
  }

  // ---- internals ----

  private assertOpen(operation: string): void {
    if (this.closed) throw new StoreError(`[@jobs/postgres] ${operation}: the store is closed`);
  }

  private async settle(
    operation: string,
    text: string,
    refs: SplitRefs,
    params: unknown[],
  ): Promise<SettleResult> {
    if (refs.ids.length === 0) return { lost: refs.invalid };
    const { rows } = await this.run<{ id: string }>(
      operation,
      text,
      params,
      operation === 'renewLeases' ? this.heartbeatPool() : null,
    );
    const hit = new Set(rows.map((r) => r.id));
    return { lost: [...refs.invalid, ...refs.ids.filter((id) => !hit.has(id))] };
  }

  /**
   * Runs one statement; hot-path texts (those in `Statements`) as named prepared statements.
   * Driver errors become `StoreError`s naming the operation.
   */
  private async run<R extends pg.QueryResultRow = pg.QueryResultRow>(
    operation: string,
    text: string,
    values: unknown[],
    client: Queryable | null = null,
  ): Promise<pg.QueryResult<R>> {
    const prepared = Object.values(this.sql).includes(text);
    const config: pg.QueryConfig = prepared
      ? { name: `${this.statementPrefix}${operation}`, text, values, types: rawJsonTypes }
      : { text, values, types: rawJsonTypes };
    try {
      return await (client ?? this.pool).query<R>(config);
    } catch (error) {
      throw new StoreError(`[@jobs/postgres] ${operation}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  private async transaction<T>(
    operation: string,
    fn: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw new StoreError(`[@jobs/postgres] ${operation}: ${(error as Error).message}`, {
        cause: error,
      });
    }
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      client.release();
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {
        // Keep the original error; the broken connection is destroyed below.
      });
      client.release(true);
      if (error instanceof StoreError) throw error;
      throw new StoreError(`[@jobs/postgres] ${operation}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
}

interface SplitRefs {
  ids: string[];
  tokens: string[];
  /** Refs whose id cannot name a job: lost by definition. */
  invalid: string[];
}

function splitRefs(refs: readonly JobRef[]): SplitRefs {
  const out: SplitRefs = { ids: [], tokens: [], invalid: [] };
  for (const ref of refs) {
    if (ID.test(ref.id)) {
      out.ids.push(ref.id);
      out.tokens.push(ref.token);
    } else out.invalid.push(ref.id);
  }
  return out;
}

function acquireParams(request: AcquireRequest, token: string): unknown[] {
  return [
    request.owner,
    request.limit,
    request.leaseMs,
    request.types,
    request.queues,
    request.tenants,
    token,
  ];
}

/** Rows of an acquire statement (the fast path pads an empty result with one null row). */
function toJobs(rows: Record<string, unknown>[]): Job[] {
  return rows
    .filter((r) => r.id !== null && r.id !== undefined)
    .map(rowToJob)
    .sort(
      (a, b) =>
        b.priority - a.priority ||
        a.dueAt.getTime() - b.dueAt.getTime() ||
        Number(a.id) - Number(b.id),
    );
}

/**
 * The row of a job just inserted, from what the caller sent plus what the database decided
 * (id, state, due time, creation time): returning whole rows from a bulk insert costs more than
 * the insert. The payload goes through JSON text as it does when read back.
 */
function insertedRow(job: NewJob, decided: Record<string, unknown>): Record<string, unknown> {
  // Fields copied one by one: spreading a pg result row is ~20× slower (rows are built as
  // dictionary-mode objects), which showed up as the top cost of bulk enqueue.
  return {
    id: decided.id,
    job_key: decided.job_key,
    state: decided.state,
    due_at: decided.due_at,
    created_at: decided.created_at,
    type: job.type,
    payload: JSON.stringify(job.payload ?? null),
    priority: job.priority,
    retries_left: job.retries,
    attempts: 0,
    scope: job.scope,
    exclusive: job.exclusive,
    tenant_id: job.tenantId,
    queue: job.queue,
    last_error_message: null,
    last_error_stack: null,
    lock_owner: null,
    lock_expires_at: null,
    lock_token: null,
    retry_policy: job.retryPolicy ? JSON.stringify(job.retryPolicy) : null,
    suspended_from: null,
    schedule_name: job.schedule,
    occurrence: job.occurrence,
    shard_index: job.shard ? job.shard.index : null,
    shard_count: job.shard ? job.shard.count : null,
  };
}

function enqueueParams(jobs: readonly NewJob[], channel: string): unknown[] {
  const col = <T>(f: (j: NewJob) => T): T[] => jobs.map(f);
  return [
    col((j) => j.type),
    col((j) => JSON.stringify(j.payload ?? null)),
    col((j) => j.priority),
    col((j) => (j.dueAt ? j.dueAt.toISOString() : null)),
    col((j) => j.delayMs),
    col((j) => j.retries),
    col((j) => j.scope),
    col((j) => j.exclusive),
    col((j) => j.key),
    col((j) => j.tenantId),
    col((j) => j.queue),
    col((j) => (j.retryPolicy ? JSON.stringify(j.retryPolicy) : null)),
    col((j) => j.schedule),
    col((j) => (j.occurrence ? j.occurrence.toISOString() : null)),
    col((j) => (j.shard ? j.shard.index : null)),
    col((j) => (j.shard ? j.shard.count : null)),
    channel,
  ];
}

/** WHERE clause of an admin filter; `true` when empty. */
function filterSql(filter: JobFilter): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  const add = (column: string, value: unknown, array = false): void => {
    params.push(value);
    parts.push(
      array ? `${column} = ANY($${params.length}::text[])` : `${column} = $${params.length}`,
    );
  };
  if (filter.state !== undefined) {
    add('state', typeof filter.state === 'string' ? [filter.state] : [...filter.state], true);
  }
  if (filter.type !== undefined) add('type', filter.type);
  if (filter.scope !== undefined) add('scope', filter.scope);
  if (filter.tenantId !== undefined) add('tenant_id', filter.tenantId);
  if (filter.queue !== undefined) add('queue', filter.queue);
  if (filter.schedule !== undefined) add('schedule_name', filter.schedule);
  return { sql: parts.length ? parts.join(' AND ') : 'true', params };
}
