/**
 * `MysqlJobStore`: the `JobStore` contract on MySQL 8+ and MariaDB 10.6+ through mysql2.
 *
 * How it keeps the invariants:
 * - Time: every "now" is `UTC_TIMESTAMP(3)` on the server (or a value read from it in the same
 *   transaction), stored in `DATETIME(3)` columns as UTC; times the store writes are UTC text it
 *   formats itself and rows are read with `dateStrings`, so no session or server time zone and no
 *   mysql2 `timezone` option changes a value.
 * - Acquisition: one READ COMMITTED transaction: `SELECT … FOR UPDATE SKIP LOCKED LIMIT n` in
 *   acquisition order, then `UPDATE … WHERE id IN (…)`. Returned jobs are built from the locked
 *   rows, so no read-back is needed (MariaDB has no `UPDATE … RETURNING`).
 * - Exclusive scopes: see `acquire` below.
 * - Deadlocks (1213) and lock wait timeouts (1205) in the store's own transactions are retried
 *   with jittered backoff and reported through `onRetry` and `retryStats`.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  type AcquireRequest,
  assertIdentifier,
  assertKnownOptions,
  assertPositiveInteger,
  type EnqueueOptions,
  type EnqueueResult,
  INSERT_JOB_COLUMNS,
  type Job,
  type JobFailure,
  type JobFilter,
  type JobRef,
  type JobStore,
  JobsError,
  LEASE_EXPIRED_MESSAGE,
  type ListJobsRequest,
  type NewJob,
  newJobValues,
  type RecoverResult,
  readBool,
  readTime,
  rowToJob,
  rowToSchedule,
  type SaveScheduleRequest,
  type ScheduleFire,
  type ScheduleFireResult,
  type ScheduleRecord,
  type SettleResult,
  type SqlRow,
  type StatsRow,
  type StoreCapabilities,
  StoreError,
  ValidationError,
} from '@jobs/core';
import type { Pool, PoolConnection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import mysql from 'mysql2/promise';
import { loadMigrations, type Migration } from './migrations.js';
import {
  backoffMs,
  ER_DUP_ENTRY,
  errnoOf,
  type MysqlRetryEvent,
  type MysqlRetryStats,
  retryReason,
} from './retry.js';
import { assertSupportedServer, parseServerVersion, type ServerVersion } from './server-version.js';
import { encodeValue, filterConditions, isJobId, marks, toSqlTime } from './sql-util.js';

export interface MysqlJobStoreOptions {
  /** Connection URI, e.g. `mysql://user:pass@host:3306/app`. The store creates (and closes) a pool. */
  uri?: string;
  /**
   * Your own mysql2 promise pool. The store never closes it and leaves its sessions' settings
   * alone: it reads times as text and uses the server's UTC clock in SQL, so the pool's
   * `timezone` and session `time_zone` do not matter.
   */
  pool?: Pool;
  /** Database holding the tables. Default: the connection's database. */
  database?: string;
  /** Prefix of the table names (`<prefix>jobs`, `<prefix>schedules`, `<prefix>migrations`). Default `jobs_`. */
  tablePrefix?: string;
  /** Pool size when the store creates the pool. Default 10. */
  connectionLimit?: number;
  /**
   * Use MariaDB's `DELETE … RETURNING` to complete jobs in one round trip. Default: on for
   * MariaDB, off for MySQL (which lacks it). Tests turn it off to run the MySQL path on MariaDB.
   */
  deleteReturning?: boolean;
}

/** A mysql2 promise connection (or pool) the store can run statements on. */
type Queryable = Pick<PoolConnection, 'query'>;

/** Jobs per multi-row INSERT; keeps a statement well under `max_allowed_packet`. */
const INSERT_CHUNK_ROWS = 500;
const INSERT_CHUNK_BYTES = 4 * 1024 * 1024;
/** Retries of a store transaction that hit a deadlock or lock wait timeout. */
const MAX_LOCK_RETRIES = 10;
/** How long `migrate()` waits for another process's migration to finish. */
const MIGRATE_LOCK_SECONDS = 60;

const OPTION_KEYS: ReadonlySet<string> = new Set([
  'uri',
  'pool',
  'database',
  'tablePrefix',
  'connectionLimit',
  'deleteReturning',
]);

const COLUMN_LIST = INSERT_JOB_COLUMNS.map((c) => `\`${c}\``).join(', ');

/**
 * A job store on MySQL 8+ or MariaDB 10.6+.
 *
 * @example
 * import { JobEngine } from '@jobs/core';
 * import { MysqlJobStore } from '@jobs/mysql';
 *
 * const store = new MysqlJobStore({ uri: 'mysql://root@127.0.0.1:3306/app' });
 * await store.migrate();
 * const engine = new JobEngine({ store, handlers: { email: async (job) => send(job.payload) } });
 * await engine.start();
 * store.onRetry((e) => console.warn(`${e.operation}: ${e.reason}, retry ${e.attempt}`));
 */
export class MysqlJobStore implements JobStore {
  readonly name = 'mysql';
  readonly capabilities: StoreCapabilities = {
    notifications: false,
    skipLocked: true,
    transactionalEnqueue: true,
    multiProcess: true,
  };
  /** Qualified, quoted table names, e.g. `` `app`.`jobs_jobs` ``. */
  readonly tables: { jobs: string; schedules: string; migrations: string };

  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly database: string | null;
  private readonly prefix: string;
  private readonly deleteReturningOption: boolean | undefined;
  private readonly retryListeners = new Set<(event: MysqlRetryEvent) => void>();
  private readonly counters: MysqlRetryStats = { deadlockRetries: 0, lockWaitRetries: 0 };
  private ready: Promise<ServerVersion> | null = null;
  private deleteReturning = false;
  /** `<database>.<prefix>`, read with the server version; part of every named lock's name. */
  private lockNamespace = '';
  private closed = false;
  /** A failed session setup on a new pooled connection, reported by the next operation. */
  private sessionSetupError: unknown = null;

  constructor(options: MysqlJobStoreOptions) {
    if (!options || typeof options !== 'object') {
      throw new ValidationError('options', 'must be an object with `uri` or `pool`');
    }
    assertKnownOptions(options, OPTION_KEYS, '@jobs/mysql');
    if ((options.uri === undefined) === (options.pool === undefined)) {
      throw new ValidationError('options', 'give exactly one of `uri` or `pool`');
    }
    if (options.connectionLimit !== undefined) {
      assertPositiveInteger(options.connectionLimit, 'connectionLimit', '@jobs/mysql');
    }
    this.prefix = assertIdentifier(options.tablePrefix ?? 'jobs_', 'tablePrefix', {
      allowEmpty: true,
      max: 40,
    });
    this.database =
      options.database === undefined ? null : assertIdentifier(options.database, 'database');
    const qualify = (table: string): string =>
      this.database === null
        ? `\`${this.prefix}${table}\``
        : `\`${this.database}\`.\`${this.prefix}${table}\``;
    this.tables = {
      jobs: qualify('jobs'),
      schedules: qualify('schedules'),
      migrations: qualify('migrations'),
    };
    this.deleteReturningOption = options.deleteReturning;
    if (options.pool) {
      this.pool = options.pool;
      this.ownsPool = false;
    } else {
      this.pool = mysql.createPool({
        uri: options.uri,
        ...(this.database === null ? {} : { database: this.database }),
        connectionLimit: options.connectionLimit ?? 10,
        timezone: 'Z',
        dateStrings: true,
        supportBigNumbers: true,
      });
      this.ownsPool = true;
      // Sessions of our own pool run in UTC and READ COMMITTED (no gap locks, fresh reads per
      // statement); on a caller's pool the store sets the isolation per transaction instead.
      this.pool.on('connection', (connection) => {
        const core = connection as unknown as {
          query(sql: string, cb: (error: unknown) => void): void;
        };
        const remember = (error: unknown): void => {
          if (error) this.sessionSetupError = error;
        };
        core.query("SET SESSION time_zone = '+00:00'", remember);
        core.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED', remember);
      });
    }
  }

  /** Counts of transparent deadlock / lock-wait-timeout retries since the store was created. */
  get retryStats(): Readonly<MysqlRetryStats> {
    return { ...this.counters };
  }

  /**
   * Calls `listener` whenever a store transaction hit a deadlock (1213) or lock wait timeout
   * (1205) and is being retried. Returns an unsubscribe function. Keep listeners cheap and
   * non-throwing: they run inside the operation, and an error thrown by one fails it.
   *
   * @example
   * const off = store.onRetry((e) => metrics.increment(`jobs.mysql.${e.reason}`));
   */
  onRetry(listener: (event: MysqlRetryEvent) => void): () => void {
    this.retryListeners.add(listener);
    return () => {
      this.retryListeners.delete(listener);
    };
  }

  /** The server version, read once (and checked) on first use. */
  serverVersion(): Promise<ServerVersion> {
    if (!this.ready) {
      const pending = (async () => {
        const rows = await this.rows(this.pool, 'SELECT VERSION() AS version, DATABASE() AS db');
        const version = parseServerVersion(String(rows[0]?.version ?? ''));
        // Named locks are server-wide: their names include the database the tables live in.
        this.lockNamespace = `${this.database ?? String(rows[0]?.db ?? '')}.${this.prefix}`;
        assertSupportedServer(version);
        this.deleteReturning = this.deleteReturningOption ?? version.flavor === 'mariadb';
        return version;
      })();
      this.ready = pending;
      // A failed check (server down) is tried again on the next call.
      pending.catch(() => {
        if (this.ready === pending) this.ready = null;
      });
    }
    return this.ready;
  }

  // ---------------------------------------------------------------------------------------------
  // lifecycle

  async migrate(): Promise<void> {
    await this.run('migrate', async () => {
      await this.serverVersion();
      const migrations = loadMigrations();
      const connection = await this.pool.getConnection();
      const lock = `jobs_migrate_${hash(this.lockNamespace)}`;
      let locked = false;
      try {
        const got = await this.rows(connection, 'SELECT GET_LOCK(?, ?) AS got', [
          lock,
          MIGRATE_LOCK_SECONDS,
        ]);
        if (Number(got[0]?.got) !== 1) {
          throw new StoreError(
            `[@jobs/mysql] migrate: another process held the migration lock for ${MIGRATE_LOCK_SECONDS} s`,
          );
        }
        locked = true;
        await connection.query(
          `CREATE TABLE IF NOT EXISTS ${this.tables.migrations} (
            version INT NOT NULL PRIMARY KEY,
            name VARCHAR(255) NOT NULL,
            applied_at DATETIME(3) NOT NULL
          ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
        );
        const applied = await this.rows(
          connection,
          `SELECT COALESCE(MAX(version), 0) AS version FROM ${this.tables.migrations}`,
        );
        const current = Number(applied[0]?.version ?? 0);
        for (const migration of migrations) {
          if (migration.version <= current) continue;
          await this.applyMigration(connection, migration);
        }
      } finally {
        let healthy = true;
        if (locked) {
          try {
            await connection.query('SELECT RELEASE_LOCK(?)', [lock]);
          } catch {
            // A named lock dies with its session: destroying the connection releases it without
            // hiding the error (if any) that ended the migration.
            healthy = false;
          }
        }
        if (healthy) connection.release();
        else connection.destroy();
      }
    });
  }

  private async applyMigration(connection: PoolConnection, migration: Migration): Promise<void> {
    for (const statement of migration.statements) {
      const sql = statement
        .replaceAll('`{{prefix}}jobs`', this.tables.jobs)
        .replaceAll('`{{prefix}}schedules`', this.tables.schedules)
        .replaceAll('{{prefix}}', this.prefix);
      try {
        await connection.query(sql);
      } catch (error) {
        throw new StoreError(
          `[@jobs/mysql] migrate: migration ${migration.version} (${migration.name}) failed: ${messageOf(error)}`,
          { cause: error },
        );
      }
    }
    // DDL commits implicitly, so the version is recorded after every step ran; each step is
    // idempotent, so a crash before this line is repaired by the next migrate().
    await connection.query(
      `INSERT INTO ${this.tables.migrations} (version, name, applied_at) VALUES (?, ?, UTC_TIMESTAMP(3))`,
      [migration.version, migration.name],
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsPool) {
      try {
        await this.pool.end();
      } catch (error) {
        throw this.wrap('close', error);
      }
    }
  }

  async now(): Promise<Date> {
    return this.run('now', async () => this.dbNow(this.pool));
  }

  // ---------------------------------------------------------------------------------------------
  // enqueue

  async enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]> {
    if (jobs.length === 0) return [];
    const tx = options?.tx;
    if (tx !== undefined && tx !== null) {
      const connection = asConnection(tx);
      // The caller owns the transaction: no retry here (a deadlock rolled it back), no commit.
      return this.run('enqueue', async () => this.insertJobs(connection, jobs));
    }
    const all = jobs.map((_, index) => index);
    if (jobs.every((job) => job.key === null) && chunkIndexes(jobs, all).length === 1) {
      // One multi-row INSERT is atomic on its own: no transaction round trips needed.
      return this.run('enqueue', () =>
        this.retrying('enqueue', () => this.insertJobs(this.pool, jobs)),
      );
    }
    return this.transaction('enqueue', (connection) => this.insertJobs(connection, jobs));
  }

  /**
   * Inserts jobs on `connection` inside an open transaction. Keys: rows already holding a key
   * are read (a locking read, so a caller's REPEATABLE READ snapshot cannot hide a row committed
   * since), and only the rest is inserted, in one multi-row INSERT per chunk. If another
   * transaction inserts one of the keys in between, the INSERT fails with a duplicate key (InnoDB
   * rolls back just that statement; a savepoint undoes earlier chunks when there are several)
   * and the read is repeated.
   */
  private async insertJobs(
    connection: Queryable,
    jobs: readonly NewJob[],
  ): Promise<EnqueueResult[]> {
    const now = await this.dbNow(connection);
    const firstIndexOfKey = new Map<string, number>();
    jobs.forEach((job, index) => {
      if (job.key !== null && !firstIndexOfKey.has(job.key)) firstIndexOfKey.set(job.key, index);
    });
    const keys = [...firstIndexOfKey.keys()];
    for (let attempt = 1; ; attempt++) {
      const existing = new Map<string, Job>();
      if (keys.length > 0) {
        const rows = await this.rows(
          connection,
          `SELECT * FROM ${this.tables.jobs} WHERE job_key IN (${marks(keys.length)}) LOCK IN SHARE MODE`,
          keys,
        );
        for (const row of rows) {
          const job = rowToJob(row);
          if (job.key !== null) existing.set(job.key, job);
        }
      }
      const toInsert: number[] = [];
      jobs.forEach((job, index) => {
        if (job.key === null) toInsert.push(index);
        else if (!existing.has(job.key) && firstIndexOfKey.get(job.key) === index) {
          toInsert.push(index);
        }
      });
      const chunks = chunkIndexes(jobs, toInsert);
      const savepoint = keys.length > 0 && chunks.length > 1;
      if (savepoint) await connection.query('SAVEPOINT jobs_enqueue');
      let inserted: Map<number, Job>;
      try {
        inserted = await this.insertRows(connection, jobs, chunks, now);
      } catch (error) {
        if (errnoOf(error) === ER_DUP_ENTRY && keys.length > 0 && attempt < 5) {
          if (savepoint) await connection.query('ROLLBACK TO SAVEPOINT jobs_enqueue');
          continue;
        }
        throw error;
      }
      if (savepoint) await connection.query('RELEASE SAVEPOINT jobs_enqueue');
      return jobs.map((job, index) => {
        const mine = inserted.get(index);
        if (mine) return { job: mine, created: true };
        const key = job.key as string;
        const holder = existing.get(key) ?? inserted.get(firstIndexOfKey.get(key) as number);
        if (!holder) {
          throw new StoreError(`[@jobs/mysql] enqueue: lost track of the job holding key ${key}`);
        }
        return { job: holder, created: false };
      });
    }
  }

  /**
   * The id step of this session's inserts: 1, unless the server spaces ids (Galera sets it per
   * node and changes it as nodes join and leave; a caller's connection may set its own). Read on
   * the connection that inserts, for every multi-row INSERT: one small query per chunk.
   */
  private async autoIncrementStep(connection: Queryable): Promise<number> {
    const rows = await this.rows(
      connection,
      'SELECT @@session.auto_increment_increment AS step',
      [],
    );
    const step = Number(rows[0]?.step ?? 1);
    return Number.isInteger(step) && step >= 1 ? step : 1;
  }

  /** One multi-row INSERT per chunk; returns the jobs as stored, by input index. */
  private async insertRows(
    connection: Queryable,
    jobs: readonly NewJob[],
    chunks: readonly (readonly number[])[],
    now: Date,
  ): Promise<Map<number, Job>> {
    const result = new Map<number, Job>();
    const rowMarks = `(${marks(INSERT_JOB_COLUMNS.length)})`;
    for (const chunk of chunks) {
      const values = chunk.map((index) => newJobValues(jobs[index] as NewJob, now, encodeValue));
      const header = await this.exec(
        connection,
        `INSERT INTO ${this.tables.jobs} (${COLUMN_LIST}) VALUES ${chunk.map(() => rowMarks).join(', ')}`,
        values.flat(),
      );
      // A multi-row INSERT with a known row count is a "simple insert": InnoDB reserves all its
      // auto-increment values at once, in every lock mode (interleaving only splits bulk inserts
      // such as INSERT … SELECT), so the ids are insertId, insertId + step, … where step is the
      // session's `auto_increment_increment` (1, or e.g. the cluster size under Galera). Number(): a pool
      // with `bigNumberStrings` reports insertId as text.
      const step = chunk.length > 1 ? await this.autoIncrementStep(connection) : 1;
      chunk.forEach((index, i) => {
        const row: SqlRow = { id: Number(header.insertId) + i * step };
        INSERT_JOB_COLUMNS.forEach((column, k) => {
          row[column] = values[i]?.[k];
        });
        result.set(index, rowToJob(row));
      });
    }
    return result;
  }

  // ---------------------------------------------------------------------------------------------
  // acquisition

  /**
   * Leases due jobs. Exclusive scopes, under races:
   * 1. The locking SELECT already leaves out exclusive rows that are not the head of their scope
   *    or whose scope has a live running exclusive job (subqueries, so the LIMIT is filled with
   *    runnable rows and a long queue of one scope cannot starve other work). Subqueries of a
   *    locking read are plain consistent reads of the latest committed rows (checked on MariaDB
   *    10.11: a head row another acquirer has locked still counts as waiting, so the next row of
   *    its scope is left out rather than skipped-to).
   * 2. That check and our commit are not atomic: another acquirer may take a row of the same
   *    scope between them (its row turns `running` only when it commits, and a due time crossing
   *    "now" can make a different row the head). So for each scope in the batch the store takes a
   *    server-wide named lock, `GET_LOCK(scope hash, 0)` (never waits: a scope another acquirer is
   *    working on is simply left for the next round), re-checks the head rule with a fresh READ
   *    COMMITTED read, and releases the lock only after COMMIT. Any acquirer of the scope that
   *    gets the lock after us therefore sees our rows as running with a live lease.
   */
  async acquire(request: AcquireRequest): Promise<Job[]> {
    if (!acquirable(request)) return [];
    return this.transaction('acquire', (connection, onEnd) =>
      this.acquireIn(connection, request, onEnd),
    );
  }

  /**
   * `complete(done)` and `acquire(request)` in one transaction: one commit (one log flush) per
   * batch instead of two, which is what bounds throughput on a durable server.
   */
  async completeAndAcquire(
    done: readonly JobRef[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }> {
    const { valid, lost } = splitRefs(done);
    return this.transaction('completeAndAcquire', async (connection, onEnd) => {
      const completed = valid.length > 0 ? await this.deleteHeld(connection, valid) : [];
      const jobs = acquirable(request) ? await this.acquireIn(connection, request, onEnd) : [];
      return { lost: [...lost, ...missing(valid, completed)], jobs };
    });
  }

  private async acquireIn(
    connection: PoolConnection,
    request: AcquireRequest,
    onEnd: (cleanup: () => Promise<void>) => void,
  ): Promise<Job[]> {
    const { sql: filterSql, values: filterValues } = candidateFilter(request);
    const T = this.tables.jobs;
    const rows = await this.rows(
      connection,
      `SELECT j.*, UTC_TIMESTAMP(3) AS db_now FROM ${T} j
       WHERE j.waiting = 1 AND j.due_at <= UTC_TIMESTAMP(3) AND ${filterSql}
         AND (j.exclusive = 0 OR j.scope IS NULL OR (${this.scopeIsFree('j')}))
       ORDER BY j.neg_priority, j.due_at, j.id
       LIMIT ?
       FOR UPDATE SKIP LOCKED`,
      [...filterValues, request.limit],
    );
    if (rows.length === 0) return [];
    const chosen = await this.confirmExclusive(connection, rows, onEnd);
    if (chosen.length === 0) return [];
    const token = randomUUID();
    const dbNow = readTime(rows[0]?.db_now);
    const lockExpiresAt = new Date(dbNow.getTime() + request.leaseMs);
    await this.exec(
      connection,
      `UPDATE ${T} SET state = 'running', lock_owner = ?, lock_expires_at = ?, lock_token = ?,
         attempts = attempts + 1
       WHERE id IN (${marks(chosen.length)})`,
      [request.owner, toSqlTime(lockExpiresAt), token, ...chosen.map((r) => r.id)],
    );
    return chosen.map((row) => {
      const job = rowToJob(row);
      job.state = 'running';
      job.lockOwner = request.owner;
      job.lockExpiresAt = new Date(lockExpiresAt);
      job.lockToken = token;
      job.attempts += 1;
      return job;
    });
  }

  /** SQL: the exclusive row `alias` is first in its scope and no exclusive job of it runs. */
  private scopeIsFree(alias: string): string {
    const T = this.tables.jobs;
    return `NOT EXISTS (
        SELECT 1 FROM ${T} r
        WHERE r.scope = ${alias}.scope AND r.state = 'running' AND r.exclusive = 1
          AND r.lock_expires_at > UTC_TIMESTAMP(3))
      AND NOT EXISTS (
        SELECT 1 FROM ${T} p
        WHERE p.scope = ${alias}.scope AND p.state IN ('timer', 'async') AND p.exclusive = 1
          AND p.due_at <= UTC_TIMESTAMP(3)
          AND (p.priority > ${alias}.priority
            OR (p.priority = ${alias}.priority AND (p.due_at < ${alias}.due_at
              OR (p.due_at = ${alias}.due_at AND p.id < ${alias}.id)))))`;
  }

  /** Step 2 of `acquire`: keeps the exclusive rows whose scope lock we got and that still lead. */
  private async confirmExclusive(
    connection: PoolConnection,
    rows: SqlRow[],
    onEnd: (cleanup: () => Promise<void>) => void,
  ): Promise<SqlRow[]> {
    const scopes = new Map<string, SqlRow>();
    for (const row of rows) {
      if (readBool(row.exclusive) && row.scope !== null && !scopes.has(String(row.scope))) {
        scopes.set(String(row.scope), row);
      }
    }
    if (scopes.size === 0) return rows;
    const names = [...scopes.keys()].map((scope) => this.scopeLockName(scope));
    const got = await this.rows(
      connection,
      `SELECT ${names.map((_, i) => `GET_LOCK(?, 0) AS l${i}`).join(', ')}`,
      names,
    );
    const held = names.filter((_, i) => Number(got[0]?.[`l${i}`]) === 1);
    if (held.length > 0) {
      onEnd(async () => {
        await connection.query(`SELECT ${held.map(() => 'RELEASE_LOCK(?)').join(', ')}`, held);
      });
    }
    const heldSet = new Set(held);
    const candidates = [...scopes.entries()]
      .filter(([scope]) => heldSet.has(this.scopeLockName(scope)))
      .map(([, row]) => row.id);
    const confirmed = new Set<string>();
    if (candidates.length > 0) {
      const ok = await this.rows(
        connection,
        `SELECT j.id FROM ${this.tables.jobs} j
         WHERE j.id IN (${marks(candidates.length)}) AND ${this.scopeIsFree('j')}`,
        candidates,
      );
      for (const row of ok) confirmed.add(String(row.id));
    }
    return rows.filter(
      (row) =>
        !readBool(row.exclusive) ||
        row.scope === null ||
        (scopes.get(String(row.scope)) === row && confirmed.has(String(row.id))),
    );
  }

  private scopeLockName(scope: string): string {
    return `jobs_scope_${hash(`${this.lockNamespace}\u0000${scope}`)}`;
  }

  // ---------------------------------------------------------------------------------------------
  // settling held jobs

  async complete(refs: readonly JobRef[]): Promise<SettleResult> {
    if (refs.length === 0) return { lost: [] };
    const { valid, lost } = splitRefs(refs);
    if (valid.length === 0) return { lost };
    const completed = await this.run('complete', async () => {
      if (this.deleteReturning) {
        // MariaDB: one autocommit statement, and RETURNING says exactly which rows were ours.
        return this.retrying('complete', () => this.deleteHeld(this.pool, valid));
      }
      return this.transaction('complete', (connection) => this.deleteHeld(connection, valid));
    });
    return { lost: [...lost, ...missing(valid, completed)] };
  }

  /**
   * Deletes the rows held under `refs` and returns their ids. MariaDB: `DELETE … RETURNING`.
   * MySQL (no RETURNING): lock the held rows, then delete them, in the surrounding transaction.
   */
  private async deleteHeld(connection: Queryable, refs: readonly JobRef[]): Promise<SqlRow[]> {
    const held = heldCondition(refs);
    if (this.deleteReturning) {
      return this.rows(
        connection,
        `DELETE FROM ${this.tables.jobs} WHERE ${held.sql} RETURNING id`,
        held.values,
      );
    }
    const found = await this.rows(
      connection,
      `SELECT id FROM ${this.tables.jobs} WHERE ${held.sql} FOR UPDATE`,
      held.values,
    );
    if (found.length > 0) {
      await this.exec(
        connection,
        `DELETE FROM ${this.tables.jobs} WHERE id IN (${marks(found.length)})`,
        found.map((r) => r.id),
      );
    }
    return found;
  }

  async fail(failures: readonly JobFailure[]): Promise<SettleResult> {
    if (failures.length === 0) return { lost: [] };
    const { valid, lost } = splitRefs(failures);
    if (valid.length === 0) return { lost };
    const stillLost = await this.transaction('fail', async (connection) => {
      const notUpdated: string[] = [];
      // Row locks in primary-key order, as every other multi-row statement here takes them, so a
      // concurrent lease renewal of the same jobs cannot deadlock with this transaction.
      const ordered = [...valid].sort(
        (a, b) => a.id.length - b.id.length || (a.id < b.id ? -1 : 1),
      );
      for (const failure of ordered) {
        const header = await this.exec(
          connection,
          `UPDATE ${this.tables.jobs}
           SET state = ?,
             due_at = IF(?, due_at, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND),
             retries_left = IF(?, retries_left, retries_left - 1),
             lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL,
             last_error_message = ?, last_error_stack = ?
           WHERE id = ? AND lock_token = ? AND state = 'running'`,
          [
            failure.deadletter ? 'deadletter' : 'timer',
            failure.deadletter ? 1 : 0,
            Math.max(0, Math.round(failure.retryDelayMs)) * 1000,
            failure.deadletter ? 1 : 0,
            failure.error.message,
            failure.error.stack ?? null,
            failure.id,
            failure.token,
          ],
        );
        if (header.affectedRows === 0) notUpdated.push(failure.id);
      }
      return notUpdated;
    });
    const missed = new Set(stillLost);
    return { lost: [...lost, ...valid.filter((f) => missed.has(f.id)).map((f) => f.id)] };
  }

  async release(refs: readonly JobRef[]): Promise<SettleResult> {
    if (refs.length === 0) return { lost: [] };
    const { valid, lost } = splitRefs(refs);
    if (valid.length === 0) return { lost };
    const held = heldCondition(valid);
    const matched = await this.transaction('release', async (connection) => {
      const found = await this.rows(
        connection,
        `SELECT id FROM ${this.tables.jobs} WHERE ${held.sql} FOR UPDATE`,
        held.values,
      );
      if (found.length > 0) {
        await this.exec(
          connection,
          `UPDATE ${this.tables.jobs}
           SET state = 'async', attempts = attempts - 1,
             lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL
           WHERE id IN (${marks(found.length)})`,
          found.map((r) => r.id),
        );
      }
      return found;
    });
    return { lost: [...lost, ...missing(valid, matched)] };
  }

  async renewLeases(
    owner: string,
    leaseMs: number,
    refs: readonly JobRef[],
  ): Promise<SettleResult> {
    if (refs.length === 0) return { lost: [] };
    const { valid, lost } = splitRefs(refs);
    if (valid.length === 0) return { lost };
    const held = heldCondition(valid);
    return this.run('renewLeases', async () => {
      // One statement for all of an owner's jobs (this runs every leaseMs / 3).
      const header = await this.retrying('renewLeases', () =>
        this.exec(
          this.pool,
          `UPDATE ${this.tables.jobs}
           SET lock_expires_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
           WHERE ${held.sql} AND lock_owner = ?`,
          [Math.max(0, Math.round(leaseMs)) * 1000, ...held.values, owner],
        ),
      );
      if (header.affectedRows === valid.length) return { lost };
      // Some were not renewed: the rows still held by owner and token are the renewed ones (a
      // token never comes back once a lease was lost).
      const still = await this.rows(
        this.pool,
        `SELECT id FROM ${this.tables.jobs} WHERE ${held.sql} AND lock_owner = ?`,
        [...held.values, owner],
      );
      return { lost: [...lost, ...missing(valid, still)] };
    });
  }

  async recoverExpiredLeases(limit: number): Promise<RecoverResult> {
    if (limit <= 0) return { requeued: [], deadlettered: [] };
    return this.transaction('recoverExpiredLeases', async (connection) => {
      const T = this.tables.jobs;
      // Locking the expired rows (skipping any a renewal or completion is writing right now)
      // and re-checking expiry in the UPDATEs makes a concurrent renewal win cleanly.
      const rows = await this.rows(
        connection,
        `SELECT id, retries_left FROM ${T}
         WHERE state = 'running' AND lock_expires_at <= UTC_TIMESTAMP(3)
         ORDER BY lock_expires_at, id LIMIT ?
         FOR UPDATE SKIP LOCKED`,
        [limit],
      );
      const requeued = rows.filter((r) => Number(r.retries_left) > 0).map((r) => String(r.id));
      const deadlettered = rows.filter((r) => Number(r.retries_left) <= 0).map((r) => String(r.id));
      const expired = `state = 'running' AND lock_expires_at <= UTC_TIMESTAMP(3)`;
      const cleared = `lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL,
        last_error_message = ?, last_error_stack = NULL`;
      if (requeued.length > 0) {
        await this.exec(
          connection,
          `UPDATE ${T} SET state = 'async', retries_left = retries_left - 1, ${cleared}
           WHERE id IN (${marks(requeued.length)}) AND ${expired}`,
          [LEASE_EXPIRED_MESSAGE, ...requeued],
        );
      }
      if (deadlettered.length > 0) {
        await this.exec(
          connection,
          `UPDATE ${T} SET state = 'deadletter', ${cleared}
           WHERE id IN (${marks(deadlettered.length)}) AND ${expired}`,
          [LEASE_EXPIRED_MESSAGE, ...deadlettered],
        );
      }
      return { requeued, deadlettered };
    });
  }

  async nextDueAt(
    request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>,
  ): Promise<Date | null> {
    if (request.types.length === 0) return null;
    if (request.queues?.length === 0 || request.tenants?.length === 0) return null;
    return this.run('nextDueAt', async () => {
      const { sql, values } = candidateFilter(request);
      const rows = await this.rows(
        this.pool,
        `SELECT MIN(j.due_at) AS due FROM ${this.tables.jobs} j WHERE j.waiting = 1 AND ${sql}`,
        values,
      );
      const due = rows[0]?.due;
      return due === null || due === undefined ? null : readTime(due);
    });
  }

  // ---------------------------------------------------------------------------------------------
  // admin

  async getJob(id: string): Promise<Job | null> {
    if (!isJobId(id)) return null;
    return this.run('getJob', async () => {
      const rows = await this.rows(this.pool, `SELECT * FROM ${this.tables.jobs} WHERE id = ?`, [
        id,
      ]);
      return rows[0] ? rowToJob(rows[0]) : null;
    });
  }

  async listJobs(request: ListJobsRequest): Promise<Job[]> {
    const limit = Math.max(0, Math.floor(request.limit));
    if (limit === 0) return [];
    return this.run('listJobs', async () => {
      const { sql, values } = filterConditions(request);
      const rows = await this.rows(
        this.pool,
        `SELECT * FROM ${this.tables.jobs} WHERE ${sql} ORDER BY id LIMIT ? OFFSET ?`,
        [...values, limit, Math.max(0, Math.floor(request.offset))],
      );
      return rows.map(rowToJob);
    });
  }

  async retryDeadletter(id: string, retries: number): Promise<Job | null> {
    if (!isJobId(id)) return null;
    return this.transaction('retryDeadletter', async (connection) => {
      const header = await this.exec(
        connection,
        `UPDATE ${this.tables.jobs}
         SET state = 'async', due_at = UTC_TIMESTAMP(3), retries_left = ?,
           lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL
         WHERE id = ? AND state = 'deadletter'`,
        [retries, id],
      );
      if (header.affectedRows === 0) return null;
      const rows = await this.rows(connection, `SELECT * FROM ${this.tables.jobs} WHERE id = ?`, [
        id,
      ]);
      return rows[0] ? rowToJob(rows[0]) : null;
    });
  }

  async deleteJob(id: string): Promise<boolean> {
    if (!isJobId(id)) return false;
    return this.run('deleteJob', async () => {
      const header = await this.retrying('deleteJob', () =>
        this.exec(this.pool, `DELETE FROM ${this.tables.jobs} WHERE id = ?`, [id]),
      );
      return header.affectedRows > 0;
    });
  }

  async suspend(filter: JobFilter): Promise<number> {
    return this.run('suspend', async () => {
      const { sql, values } = filterConditions(filter);
      // Single-table UPDATE assigns left to right: suspended_from reads the old state.
      const header = await this.retrying('suspend', () =>
        this.exec(
          this.pool,
          `UPDATE ${this.tables.jobs} SET suspended_from = state, state = 'suspended'
           WHERE state IN ('timer', 'async') AND ${sql}`,
          values,
        ),
      );
      return header.affectedRows;
    });
  }

  async activate(filter: JobFilter): Promise<number> {
    return this.run('activate', async () => {
      const { sql, values } = filterConditions(filter);
      const header = await this.retrying('activate', () =>
        this.exec(
          this.pool,
          `UPDATE ${this.tables.jobs}
           SET state = COALESCE(suspended_from, 'async'), suspended_from = NULL
           WHERE state = 'suspended' AND ${sql}`,
          values,
        ),
      );
      return header.affectedRows;
    });
  }

  async stats(): Promise<StatsRow[]> {
    return this.run('stats', async () => {
      const rows = await this.rows(
        this.pool,
        `SELECT type, state, COUNT(*) AS count FROM ${this.tables.jobs}
         GROUP BY type, state ORDER BY type, state`,
      );
      return rows.map((r) => ({
        type: String(r.type),
        state: String(r.state) as StatsRow['state'],
        count: Number(r.count),
      }));
    });
  }

  // ---------------------------------------------------------------------------------------------
  // schedules

  async saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null> {
    return this.transaction('saveSchedule', async (connection) => {
      const S = this.tables.schedules;
      const reset = request.resetProgress ? 1 : 0;
      const spec = encodeValue.json(request.spec);
      const nextAt = request.nextAt ? toSqlTime(request.nextAt) : null;
      const expected = request.expectedVersion;
      const insert = `INSERT INTO ${S} (name, spec, next_at, paused, pending_misfire, skipped, fired,
           version, created_at, updated_at)
         VALUES (?, ?, ?, 0, 0, 0, 0, 1, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`;
      if (typeof expected === 'number') {
        // Update only, and only the version the caller read: checked and written in one statement.
        const header = await this.exec(
          connection,
          `UPDATE ${S} SET spec = ?, next_at = ?, updated_at = UTC_TIMESTAMP(3),
             version = version + 1,
             fired = IF(?, 0, fired), skipped = IF(?, 0, skipped),
             pending_misfire = IF(?, 0, pending_misfire)
           WHERE name = ? AND version = ?`,
          [spec, nextAt, reset, reset, reset, request.name, expected],
        );
        if (header.affectedRows === 0) return null;
      } else if (expected === null) {
        // Create only: a duplicate key means the name exists (only the statement is rolled back).
        try {
          await this.exec(connection, insert, [request.name, spec, nextAt]);
        } catch (error) {
          if (errnoOf(error) === ER_DUP_ENTRY) return null;
          throw error;
        }
      } else {
        await this.exec(
          connection,
          `${insert}
           ON DUPLICATE KEY UPDATE
             spec = VALUES(spec), next_at = VALUES(next_at), updated_at = VALUES(updated_at),
             version = version + 1,
             fired = IF(?, 0, fired), skipped = IF(?, 0, skipped),
             pending_misfire = IF(?, 0, pending_misfire)`,
          [request.name, spec, nextAt, reset, reset, reset],
        );
      }
      const rows = await this.rows(connection, `SELECT * FROM ${S} WHERE name = ?`, [request.name]);
      if (!rows[0]) {
        throw new StoreError(`[@jobs/mysql] saveSchedule: schedule ${request.name} vanished`);
      }
      return rowToSchedule(rows[0]);
    });
  }

  async getSchedule(name: string): Promise<ScheduleRecord | null> {
    return this.run('getSchedule', async () => {
      const rows = await this.rows(
        this.pool,
        `SELECT * FROM ${this.tables.schedules} WHERE name = ?`,
        [name],
      );
      return rows[0] ? rowToSchedule(rows[0]) : null;
    });
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return this.run('listSchedules', async () => {
      const rows = await this.rows(
        this.pool,
        `SELECT * FROM ${this.tables.schedules} ORDER BY name`,
      );
      return rows.map(rowToSchedule);
    });
  }

  async deleteSchedule(name: string): Promise<boolean> {
    return this.run('deleteSchedule', async () => {
      const header = await this.retrying('deleteSchedule', () =>
        this.exec(this.pool, `DELETE FROM ${this.tables.schedules} WHERE name = ?`, [name]),
      );
      return header.affectedRows > 0;
    });
  }

  async setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null> {
    return this.transaction('setSchedulePaused', async (connection) => {
      const S = this.tables.schedules;
      const header = await this.exec(
        connection,
        `UPDATE ${S} SET paused = ?, version = version + 1, updated_at = UTC_TIMESTAMP(3)
         WHERE name = ?`,
        [paused ? 1 : 0, name],
      );
      if (header.affectedRows === 0) return null;
      const rows = await this.rows(connection, `SELECT * FROM ${S} WHERE name = ?`, [name]);
      return rows[0] ? rowToSchedule(rows[0]) : null;
    });
  }

  async dueSchedules(limit: number): Promise<ScheduleRecord[]> {
    if (limit <= 0) return [];
    return this.run('dueSchedules', async () => {
      const rows = await this.rows(
        this.pool,
        `SELECT * FROM ${this.tables.schedules}
         WHERE paused = 0 AND ((next_at IS NOT NULL AND next_at <= UTC_TIMESTAMP(3)) OR pending_misfire = 1)
         ORDER BY next_at IS NULL, next_at, name LIMIT ?`,
        [limit],
      );
      return rows.map(rowToSchedule);
    });
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    return this.transaction('fireSchedule', async (connection) => {
      const S = this.tables.schedules;
      // The row lock serialises engines firing the same schedule; the loser sees a new version.
      const rows = await this.rows(
        connection,
        `SELECT version FROM ${S} WHERE name = ? FOR UPDATE`,
        [fire.name],
      );
      if (!rows[0] || Number(rows[0].version) !== fire.version) {
        return { status: 'conflict', jobs: [] };
      }
      let busy = false;
      if (fire.overlap !== 'allow') {
        const unfinished = await this.rows(
          connection,
          `SELECT 1 AS busy FROM ${this.tables.jobs}
           WHERE schedule_name = ? AND state IN ('timer', 'async', 'running') LIMIT 1`,
          [fire.name],
        );
        busy = unfinished.length > 0;
      }
      let status: ScheduleFireResult['status'];
      let jobs: Job[] = [];
      let progress: string;
      const values: unknown[] = [fire.nextAt ? toSqlTime(fire.nextAt) : null];
      if (busy && fire.overlap === 'skip') {
        status = 'skipped';
        progress = 'skipped = skipped + 1';
      } else if (busy) {
        status = 'coalesced';
        progress = 'pending_misfire = 1';
      } else {
        status = 'fired';
        const results = fire.jobs.length > 0 ? await this.insertJobs(connection, fire.jobs) : [];
        jobs = results.map((r) => r.job);
        progress = 'pending_misfire = 0, fired = fired + ?';
        values.push(fire.occurrences);
      }
      await this.exec(
        connection,
        `UPDATE ${S} SET next_at = ?, ${progress}, version = version + 1,
           updated_at = UTC_TIMESTAMP(3)
         WHERE name = ?`,
        [...values, fire.name],
      );
      return { status, jobs };
    });
  }

  // ---------------------------------------------------------------------------------------------
  // plumbing

  private async dbNow(connection: Queryable): Promise<Date> {
    const rows = await this.rows(connection, 'SELECT UTC_TIMESTAMP(3) AS now');
    return readTime(rows[0]?.now);
  }

  private async rows(
    connection: Queryable,
    sql: string,
    values: unknown[] = [],
  ): Promise<SqlRow[]> {
    const [rows] = await connection.query<RowDataPacket[]>({ sql, values, dateStrings: true });
    return rows as SqlRow[];
  }

  private async exec(
    connection: Queryable,
    sql: string,
    values: unknown[] = [],
  ): Promise<ResultSetHeader> {
    const [header] = await connection.query<ResultSetHeader>({ sql, values });
    return header;
  }

  /** Runs `fn` for a public operation: open-check, version check, errors wrapped. */
  private async run<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreError(`[@jobs/mysql] ${operation}: the store is closed`);
    if (this.sessionSetupError !== null) {
      const error = this.sessionSetupError;
      this.sessionSetupError = null;
      throw new StoreError(
        `[@jobs/mysql] ${operation}: setting up a new connection's session failed: ${messageOf(error)}`,
        { cause: error },
      );
    }
    try {
      if (operation !== 'migrate') await this.serverVersion();
      return await fn();
    } catch (error) {
      throw this.wrap(operation, error);
    }
  }

  /** Runs `fn` again after a deadlock or lock wait timeout, with jittered backoff. */
  private async retrying<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (error) {
        const reason = retryReason(error);
        if (reason === null || attempt >= MAX_LOCK_RETRIES) throw error;
        if (reason === 'deadlock') this.counters.deadlockRetries += 1;
        else this.counters.lockWaitRetries += 1;
        const delayMs = backoffMs(attempt);
        const event: MysqlRetryEvent = {
          operation,
          reason,
          errno: errnoOf(error) as number,
          attempt,
          delayMs,
        };
        for (const listener of [...this.retryListeners]) listener(event);
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
  }

  /**
   * Runs `fn` in a store-owned READ COMMITTED transaction on one pooled connection, committed
   * when it returns; retried whole on deadlock / lock wait timeout. `onEnd` registers cleanup that
   * runs on the same connection after COMMIT or ROLLBACK (releasing named locks).
   */
  private transaction<T>(
    operation: string,
    fn: (connection: PoolConnection, onEnd: (cleanup: () => Promise<void>) => void) => Promise<T>,
  ): Promise<T> {
    return this.run(operation, () =>
      this.retrying(operation, async () => {
        const connection = await this.pool.getConnection();
        const cleanups: (() => Promise<void>)[] = [];
        let healthy = true;
        try {
          if (!this.ownsPool) {
            await connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
          }
          await connection.query('START TRANSACTION');
          let result: T;
          try {
            result = await fn(connection, (cleanup) => cleanups.push(cleanup));
            await connection.query('COMMIT');
          } catch (error) {
            try {
              await connection.query('ROLLBACK');
            } catch {
              // The connection is broken (the server rolls back on disconnect); drop it from the
              // pool and report the original error, which is what the caller needs.
              healthy = false;
            }
            throw error;
          }
          return result;
        } finally {
          for (const cleanup of cleanups) {
            if (!healthy) break;
            try {
              await cleanup();
            } catch {
              // Named locks die with the session, so a connection whose cleanup failed is
              // destroyed rather than handed back to the pool holding them.
              healthy = false;
            }
          }
          if (healthy) connection.release();
          else connection.destroy();
        }
      }),
    );
  }

  private wrap(operation: string, error: unknown): JobsError {
    if (error instanceof JobsError) return error;
    const errno = errnoOf(error);
    return new StoreError(
      `[@jobs/mysql] ${operation}: ${messageOf(error)}${errno === undefined ? '' : ` (errno ${errno})`}`,
      { cause: error },
    );
  }
}

/** Splits `indexes` into INSERT chunks of at most 500 rows and about 4 MiB of payload. */
function chunkIndexes(jobs: readonly NewJob[], indexes: readonly number[]): number[][] {
  const chunks: number[][] = [];
  let chunk: number[] = [];
  let bytes = 0;
  for (const index of indexes) {
    const size = String(encodeValue.json(jobs[index]?.payload)).length;
    if (
      chunk.length >= INSERT_CHUNK_ROWS ||
      (chunk.length > 0 && bytes + size > INSERT_CHUNK_BYTES)
    ) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(index);
    bytes += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/** False when the request can match nothing (no types, or an empty queue/tenant list). */
function acquirable(request: AcquireRequest): boolean {
  if (request.limit <= 0 || request.types.length === 0) return false;
  return request.queues?.length !== 0 && request.tenants?.length !== 0;
}

/** `WHERE` conditions shared by acquire and nextDueAt (alias `j`). */
function candidateFilter(request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>): {
  sql: string;
  values: unknown[];
} {
  const parts = [`j.type IN (${marks(request.types.length)})`];
  const values: unknown[] = [...request.types];
  if (request.queues) {
    parts.push(`j.queue IN (${marks(request.queues.length)})`);
    values.push(...request.queues);
  }
  if (request.tenants) {
    parts.push(`j.tenant_id IN (${marks(request.tenants.length)})`);
    values.push(...request.tenants);
  }
  return { sql: parts.join(' AND '), values };
}

/** Refs with a well-formed id (first occurrence of each id); the rest are lost outright. */
function splitRefs<R extends JobRef>(refs: readonly R[]): { valid: R[]; lost: string[] } {
  const seen = new Set<string>();
  const valid: R[] = [];
  const lost: string[] = [];
  for (const ref of refs) {
    if (!isJobId(ref.id) || seen.has(ref.id)) lost.push(ref.id);
    else {
      seen.add(ref.id);
      valid.push(ref);
    }
  }
  return { valid, lost };
}

/** Rows held under these (id, token) pairs: `id IN` lets the primary key find them. */
function heldCondition(refs: readonly JobRef[]): { sql: string; values: unknown[] } {
  return {
    sql: `id IN (${marks(refs.length)}) AND state = 'running' AND (id, lock_token) IN (${refs
      .map(() => '(?, ?)')
      .join(', ')})`,
    values: [...refs.map((r) => r.id), ...refs.flatMap((r) => [r.id, r.token])],
  };
}

/** Ids of `refs` that are not among `rows`' ids, in ref order. */
function missing(refs: readonly JobRef[], rows: readonly SqlRow[]): string[] {
  const found = new Set(rows.map((r) => String(r.id)));
  return refs.filter((r) => !found.has(r.id)).map((r) => r.id);
}

function asConnection(tx: unknown): Queryable {
  if (typeof tx === 'object' && tx !== null && typeof (tx as Queryable).query === 'function') {
    // A callback-style mysql2 connection (`mysql2`, not `mysql2/promise`) has `.promise()`,
    // which wraps the same session, so the open transaction is kept.
    const wrap = (tx as { promise?: unknown }).promise;
    if (typeof wrap === 'function') return wrap.call(tx) as Queryable;
    return tx as Queryable;
  }
  throw new ValidationError(
    'tx',
    'must be a mysql2 connection with an open transaction (pool.getConnection() then beginTransaction())',
  );
}

function hash(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
