/**
 * MySQL 8 / MariaDB 10.6+, for `@jobs/mysql` and `@jobs/typeorm` alike (schema and the reasons
 * for its indexes: `migrations/mysql/0001_init.sql`):
 * - times are `DATETIME(3)` holding UTC on the server's clock (`UTC_TIMESTAMP(3)`), written as
 *   UTC text and read back as text, so no session time zone or driver option shifts them;
 * - acquisition is one READ COMMITTED transaction: `SELECT … FOR UPDATE SKIP LOCKED` walking the
 *   all-ascending index `ix_jobs_acquire`, then one `UPDATE`; the jobs are built from the locked
 *   rows (there is no `UPDATE … RETURNING`). Exclusive scopes: see `confirmLimited`;
 * - completion is one `DELETE … RETURNING` where the server has it (MariaDB; the dialect learns
 *   the server from `useServer`, or asks on its first acquisition), else the shared
 *   lock-then-delete in a transaction (MySQL); failures are one fenced `UPDATE` per job;
 * - enqueue inserts in multi-row INSERTs whose ids follow from `insertId` and the session's
 *   `auto_increment_increment` (no read-back). Keys are checked without gap locks, so keyed
 *   enqueues in callers' REPEATABLE READ transactions neither deadlock nor hold back other
 *   keys: a plain read finds held keys, and an INSERT's duplicate key those committed since
 *   (see `insertKeyed`).
 */
import { StoreError } from '../../errors.js';
import { leaseStarts, payloadJson } from '../../rules.js';
import type {
  AcquireRequest,
  EnqueueResult,
  Job,
  JobCompletion,
  JobFailure,
  JobRef,
  NewJob,
} from '../../store.js';
import {
  acquisitionOrderBy,
  type Dialect,
  JOB_COLUMN_NAMES,
  marks,
  type OpSpec,
  pairMarks,
  SCHEDULE_COLUMN_NAMES,
  type SqlEnv,
  selectList,
  type TableName,
  tableBaseName,
} from '../dialect.js';
import type { Operation, Query } from '../executor.js';
import { mysqlLockRetries } from '../lock-retries.js';
import { loadMigrations } from '../migrate.js';
import type { Migration } from '../migration.js';
import { MIGRATION_FILES } from '../migrations/index.js';
import { insertKeyed } from '../operations/jobs.js';
import {
  completeLockThenDelete,
  recoverLockThenUpdate,
  releaseLockThenUpdate,
  renewTwoStep,
  saveStepsTwoStep,
} from '../portable/lock-then-write.js';
import {
  durationOf,
  HISTORY_PARTITION_MS,
  historyInsert,
  INSERT_JOB_COLUMNS,
  insertedJob,
  newJobValues,
  readBool,
  readTime,
  rowToJob,
  type SqlRow,
  type SqlValue,
} from '../rows.js';
import { candidateWhere, scopeHeadIsFree } from '../scope-rule.js';
import { waiterPrefix } from '../wake-waiter.js';
import { driverErrno } from './support.js';

/** A parsed `SELECT VERSION()`. */
export interface ServerVersion {
  flavor: 'mysql' | 'mariadb';
  major: number;
  minor: number;
  patch: number;
  /** The text the server reported. */
  raw: string;
}

/**
 * Parses what `SELECT VERSION()` returns, e.g. `8.0.36`, `8.4.0-log`, `10.11.19-MariaDB-0+deb12u1`
 * or the replication-compatible `5.5.5-10.6.12-MariaDB`.
 *
 * @example
 * parseServerVersion('10.11.19-MariaDB-0+deb12u1'); // { flavor: 'mariadb', major: 10, minor: 11, patch: 19, … }
 */
export function parseServerVersion(raw: string): ServerVersion {
  const text = String(raw).trim();
  const flavor = /mariadb/i.test(text) ? 'mariadb' : 'mysql';
  // MariaDB may prefix its real version with `5.5.5-` so that old MySQL clients accept it.
  const version = flavor === 'mariadb' ? text.replace(/^5\.5\.5-/, '') : text;
  const match = /^(\d+)\.(\d+)(?:\.(\d+))?/.exec(version);
  if (!match) {
    throw new StoreError(
      `[@jobs/core/sql] cannot read the MySQL/MariaDB server version from ${JSON.stringify(text)}`,
    );
  }
  const [major, minor, patch] = [match[1], match[2], match[3] ?? 0].map(Number) as number[];
  return { flavor, major: major ?? 0, minor: minor ?? 0, patch: patch ?? 0, raw: text };
}

/** True for MySQL's duplicate-key error (ER_DUP_ENTRY), however a driver wrapped it. */
export function isDuplicateKey(error: unknown): boolean {
  return driverErrno(error) === 1062;
}

export interface MysqlDialectOptions {
  /** Prefix of the store's table names. */
  tablePrefix: string;
  /** Database holding the tables; their names are qualified with it. Default: the connection's. */
  database?: string | null;
  /**
   * Complete jobs with `DELETE … RETURNING`. Default: when the server has it (MariaDB, not
   * MySQL). False runs the MySQL path on MariaDB (tests).
   */
  deleteReturning?: boolean;
  /**
   * A former default prefix (`@jobs/typeorm` 0.1's `''`): `migrate()` renames that prefix's
   * tables to `tablePrefix` when only they exist (see `adoptTables`).
   */
  adoptPrefix?: string;
}

/** The MySQL dialect; it may be told the server so it need not ask. */
export interface MysqlDialect extends Dialect {
  /** The server, once known (`useServer`, or read on the first acquisition). */
  readonly server: ServerVersion | null;
  useServer(version: ServerVersion): void;
}

const quote = (identifier: string): string => `\`${identifier}\``;
const asText = (column: string): string => `CAST(${column} AS CHAR)`;
const NOW = 'UTC_TIMESTAMP(3)';
/** Deadlock (1213) and lock wait timeout (1205): the statement or transaction was undone. */
/** One scope's rows of one state, in acquisition order (migration 8; see `Dialect.scopeIndexHint`). */
const SCOPE_INDEX = 'FORCE INDEX (ix_jobs_scope_blocked)';
const RETRYABLE = new Set([1213, 1205]);
/** Jobs per multi-row INSERT, and about how many payload bytes: well under `max_allowed_packet`. */
const INSERT_CHUNK_ROWS = 500;
const INSERT_CHUNK_BYTES = 4 * 1024 * 1024;
/** Where a row of `newJobValues` has the JSON that makes it large: the payload and the meta. */
const PAYLOAD_AT = INSERT_JOB_COLUMNS.indexOf('payload');
const META_AT = INSERT_JOB_COLUMNS.indexOf('meta');
const MIGRATE_LOCK_SECONDS = 60;
const encode = {
  time: (date: Date): SqlValue => date.toISOString().replace('T', ' ').replace('Z', ''),
  bool: (value: boolean): SqlValue => (value ? 1 : 0),
};

/** The MySQL 8 / MariaDB 10.6+ dialect (see the file comment). */
export function mysqlDialect(options: MysqlDialectOptions): MysqlDialect {
  const { tablePrefix } = options;
  const database = options.database ?? null;
  const qualifier = database === null ? '' : `${quote(database)}.`;
  const table = (name: TableName): string =>
    `${qualifier}${quote(`${tablePrefix}${tableBaseName(name)}`)}`;
  const jobs = table('jobs');
  const jobColumns = (alias?: string): string =>
    selectList(
      JOB_COLUMN_NAMES,
      quote,
      { due_at: asText, created_at: asText, lock_expires_at: asText, occurrence: asText },
      alias,
    );
  // Named locks are server-wide: their names hash the database and prefix (as @jobs/mysql 0.1).
  const namespace = `COALESCE(?, DATABASE())`;
  const migrateLock = `CONCAT('jobs_migrate_', SHA1(CONCAT(${namespace}, '.', ?)))`;
  const scopeLock = `CONCAT('jobs_scope_', SHA1(CONCAT(${namespace}, ?)))`;
  const pruneLock = `CONCAT('jobs_prune_', SHA1(CONCAT(${namespace}, '.', ?)))`;
  const scopeLockParams = (scope: string): unknown[] => [database, `.${tablePrefix}\u0000${scope}`];
  const headIsFree = scopeHeadIsFree(
    {
      now: NOW,
      TRUE: '1',
      quote,
      negPriority: true,
      scopeIndexHint: SCOPE_INDEX,
      acquisitionOrder: acquisitionOrderBy(true),
    },
    'j',
    jobs,
  );
  let server: ServerVersion | null = null;
  const deleteReturning = (): boolean => options.deleteReturning ?? server?.flavor === 'mariadb';

  /**
   * Renames the tables of prefix `from` to `tablePrefix` when only they exist: their jobs table,
   * their version table without `name` (a `name` is @jobs/mysql 0.1's, adopted below), and no
   * jobs or version table under `tablePrefix`. Their former index names go first (0002 adds
   * this schema's), so a crash between the two statements leaves a state the next run adopts.
   */
  function* adoptTables(from: string): Operation<void> {
    const names = (prefix: string): string[] =>
      ['jobs', 'schedules', 'jobs_migrations'].map((t) => `${prefix}${t}`);
    const [jobsFrom, schedulesFrom, versionsFrom] = names(from) as [string, string, string];
    const [jobsTo, schedulesTo, versionsTo] = names(tablePrefix) as [string, string, string];
    const columns = (yield {
      sql: `SELECT TABLE_NAME AS t, COLUMN_NAME AS c FROM information_schema.COLUMNS
        WHERE TABLE_SCHEMA = ${namespace} AND TABLE_NAME IN (?, ?, ?, ?, ?)
          AND COLUMN_NAME IN ('lock_token', 'version', 'name')`,
      params: [database, jobsFrom, schedulesFrom, versionsFrom, jobsTo, versionsTo],
    }).rows;
    const has = (name: string, column?: string): boolean =>
      columns.some((row) => row.t === name && (column === undefined || row.c === column));
    if (!has(jobsFrom, 'lock_token') || !has(versionsFrom, 'version') || has(versionsFrom, 'name'))
      return;
    if (has(jobsTo) || has(versionsTo)) return;
    const former = ['jobs_key_uq', 'jobs_due_idx', 'jobs_scope_idx', 'jobs_schedule_idx'];
    const indexes = (yield {
      sql: `SELECT DISTINCT INDEX_NAME AS i FROM information_schema.STATISTICS
        WHERE TABLE_SCHEMA = ${namespace} AND TABLE_NAME = ? AND INDEX_NAME IN (${marks(4)})`,
      params: [database, jobsFrom, ...former.map((name) => `${from}${name}`)],
    }).rows.map((row) => `DROP INDEX ${quote(String(row.i))}`);
    if (indexes.length > 0) {
      yield { sql: `ALTER TABLE ${qualifier}${quote(jobsFrom)} ${indexes.join(', ')}`, params: [] };
    }
    const renames = [
      [jobsFrom, jobsTo],
      ...(has(schedulesFrom) ? [[schedulesFrom, schedulesTo]] : []),
      [versionsFrom, versionsTo],
    ].map(([a, b]) => `${qualifier}${quote(a as string)} TO ${qualifier}${quote(b as string)}`);
    yield { sql: `RENAME TABLE ${renames.join(', ')}`, params: [] };
  }

  /** Asks the server what it is, once, unless told (`useServer`) or forced by the options. */
  function* knowServer(): Operation<void> {
    if (server || options.deleteReturning !== undefined) return;
    const row = (yield { sql: 'SELECT VERSION() AS version', params: [] }).rows[0];
    server = parseServerVersion(String(row?.version ?? ''));
  }

  /**
   * Limited rows of a locked batch, under races: the locking SELECT already left out rows that
   * the scope rule refuses (subqueries: plain reads of the latest committed rows). That check
   * and the commit are not atomic — another acquirer may commit rows of the scope in between (a
   * due time crossing now can also move a row ahead) — so a scope's rows are kept only under a
   * server-wide named lock (`GET_LOCK(…, 0)`: never waits; a scope another acquirer holds waits
   * for the next round), after a fresh read of the rule. The lock is released after COMMIT (see
   * `acquire`), so any acquirer that gets it next sees this one's rows running.
   */
  function* confirmLimited(rows: SqlRow[]): Operation<{ kept: SqlRow[]; held: string[] }> {
    const scoped = new Map<string, SqlRow[]>();
    for (const row of rows) {
      if (!readBool(row.exclusive) || row.scope === null) continue;
      const scope = String(row.scope);
      const list = scoped.get(scope);
      if (list) list.push(row);
      else scoped.set(scope, [row]);
    }
    if (scoped.size === 0) return { kept: rows, held: [] };
    const scopes = [...scoped.keys()];
    const got = (yield {
      sql: `SELECT ${scopes.map((_, i) => `GET_LOCK(${scopeLock}, 0) AS l${i}`).join(', ')}`,
      params: scopes.flatMap(scopeLockParams),
    }).rows[0];
    const held = scopes.filter((_, i) => Number(got?.[`l${i}`]) === 1);
    const candidates = held.flatMap((scope) => (scoped.get(scope) ?? []).map((row) => row.id));
    const confirmed = new Set<string>();
    if (candidates.length > 0) {
      const ok = yield {
        sql: `SELECT j.id FROM ${jobs} j WHERE j.id IN (${marks(candidates.length)}) AND ${headIsFree}`,
        params: candidates,
      };
      for (const row of ok.rows) confirmed.add(String(row.id));
    }
    const kept = rows.filter(
      (row) => !readBool(row.exclusive) || row.scope === null || confirmed.has(String(row.id)),
    );
    return { kept, held };
  }

  /** One multi-row INSERT per chunk; the ids written, by input index. */
  function* insertRows(values: SqlValue[][], indexes: number[]): Operation<Map<number, string>> {
    const stored = new Map<number, string>();
    const columns = INSERT_JOB_COLUMNS.map(quote).join(', ');
    const rowMarks = `(${marks(INSERT_JOB_COLUMNS.length)})`;
    for (const chunk of chunksOf(values, indexes)) {
      const header = yield {
        sql: `INSERT INTO ${jobs} (${columns}) VALUES ${chunk.map(() => rowMarks).join(', ')}`,
        params: chunk.flatMap((index) => values[index] as SqlValue[]),
      };
      // A multi-row INSERT with a known row count is a "simple insert": InnoDB reserves all its
      // ids at once, in every lock mode, so they are insertId, insertId + step, … where step is
      // the session's auto_increment_increment (1, or e.g. the cluster size under Galera; read
      // on the inserting connection, for every multi-row INSERT).
      let step = 1n;
      if (chunk.length > 1) {
        const row = (yield { sql: 'SELECT @@session.auto_increment_increment AS step', params: [] })
          .rows[0];
        step = BigInt(Math.max(1, Number(row?.step ?? 1)));
      }
      if (header.insertId === null) {
        throw new Error('the driver reported no insertId');
      }
      const first = BigInt(header.insertId);
      chunk.forEach((index, i) => {
        stored.set(index, String(first + BigInt(i) * step));
      });
    }
    return stored;
  }

  // ---- the hot path: the statements `ops` runs ----
  const own = {
    // ---- the hot path ----
    *acquire(request: AcquireRequest, token: string): Operation<SqlRow[]> {
      yield* knowServer();
      const where = candidateWhere(d, request);
      const rows = (yield {
        // FORCE INDEX: the walk in acquisition order must not depend on InnoDB's sampled
        // statistics (a filesort of every waiting row is the alternative they may suggest).
        sql: `SELECT ${jobColumns('j')}, ${asText(NOW)} AS db_now
          FROM ${jobs} j FORCE INDEX (ix_jobs_acquire)
          WHERE j.waiting = 1 AND ${where.sql}
          ORDER BY ${d.acquisitionOrder('j')} LIMIT ? FOR UPDATE SKIP LOCKED`,
        params: [...where.params, request.limit],
      }).rows;
      if (rows.length === 0) return [];
      const { kept, held } = yield* confirmLimited(rows);
      try {
        if (kept.length === 0) return [];
        const dbNow = readTime(rows[0]?.db_now);
        const lockExpiresAt = encode.time(new Date(dbNow.getTime() + request.leaseMs));
        // Recorded as started, by rank in acquisition order (as `kept` is): see `leaseStarts`.
        const rule = leaseStarts(request, kept.length);
        const starts = kept.map((row, i) => rule.records(i, Number(row.retries_left)));
        const startedIds = kept.filter((_, i) => starts[i]).map((row) => row.id);
        const startedAt = encode.time(dbNow);
        const startedSet =
          startedIds.length === kept.length
            ? { sql: '?', params: [startedAt] }
            : startedIds.length === 0
              ? { sql: 'NULL', params: [] }
              : {
                  sql: `IF(id IN (${marks(startedIds.length)}), ?, NULL)`,
                  params: [...startedIds, startedAt],
                };
        yield {
          sql: `UPDATE ${jobs} SET state = 'running', lock_owner = ?, lock_expires_at = ?,
              lock_token = ?, attempts = attempts + 1, started_at = ${startedSet.sql}
            WHERE id IN (${marks(kept.length)})`,
          params: [
            request.owner,
            lockExpiresAt,
            token,
            ...startedSet.params,
            ...kept.map((row) => row.id),
          ],
        };
        // The scope locks go only after COMMIT: this transaction ends here (see the Dialect's
        // `acquire`), and the executor's own COMMIT then finds nothing to do.
        if (held.length > 0) yield { sql: 'COMMIT', params: [] };
        // The driver's rows, leased in place (`db_now` left on them, read by no one): V8 builds a
        // rest-and-spread copy with properties added on its slow path, ~2 µs a row.
        return kept.map((row, i) => {
          row.state = 'running';
          row.lock_owner = request.owner;
          row.lock_expires_at = lockExpiresAt;
          row.lock_token = token;
          row.attempts = Number(row.attempts) + 1;
          row.started_at = starts[i] ? startedAt : null;
          return row;
        });
      } finally {
        if (held.length > 0) {
          yield {
            sql: `SELECT ${held.map(() => `RELEASE_LOCK(${scopeLock})`).join(', ')}`,
            params: held.flatMap(scopeLockParams),
          };
        }
      }
    },
    *failHeld(failures: readonly JobFailure[]): Operation<string[]> {
      // One fenced UPDATE per job, which says exactly whether it was held; rows in primary-key
      // order, as every multi-row statement takes them, so a concurrent renewal cannot deadlock.
      const changed: string[] = [];
      for (const failure of [...failures].sort(byId)) {
        const result = yield {
          sql: `UPDATE ${jobs}
            SET state = ?, due_at = IF(?, due_at, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND),
              retries_left = IF(?, retries_left, retries_left - 1),
              lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL,
              last_error_message = ?, last_error_stack = ?
            WHERE id = ? AND lock_token = ? AND state = 'running' AND cancel_requested = FALSE`,
          params: [
            failure.deadletter ? 'deadletter' : 'timer',
            failure.deadletter ? 1 : 0,
            Math.max(0, Math.round(failure.retryDelayMs)) * 1000,
            failure.deadletter ? 1 : 0,
            failure.error.message,
            failure.error.stack ?? null,
            failure.id,
            failure.token,
          ],
        };
        if (result.affected > 0) changed.push(failure.id);
      }
      return changed;
    },
    // One keyed job alone is one INSERT (or a duplicate and a read): atomic on its own.
    enqueueNeedsTransaction: (batch: readonly NewJob[]): boolean =>
      (batch.length > 1 && batch.some((job) => job.key !== null)) ||
      chunksOf(
        batch.map((job) => {
          const row: SqlValue[] = [];
          row[PAYLOAD_AT] = payloadJson(job.payload);
          row[META_AT] = job.meta ? JSON.stringify(job.meta) : null;
          return row;
        }),
        batch.map((_, i) => i),
      ).length > 1,
    /**
     * History's partitions (migration 0018): splits the empty `pmax` until the partitions reach
     * three days past today, then drops each day partition whose bound is at or before
     * `now - retentionMs` (every record in it older), counting its records first. Each ALTER
     * waits at most one second for the table's metadata lock (a long transaction reading history
     * holds it); one that cannot have it is left for the next call, so completions queued behind
     * it wait no longer than that.
     */
    *maintainHistoryPartitions(retentionMs: number): Operation<number> {
      const history = table('history');
      // One read when there is nothing to do (most calls): the partitions and the clock.
      const rows = (yield {
        sql: `SELECT PARTITION_NAME AS name, ${asText('UTC_DATE()')} AS today,
            ${asText(`TIMESTAMPADD(MICROSECOND, ROUND(? * 1000), ${NOW})`)} AS cutoff,
            @@SESSION.lock_wait_timeout AS waits
          FROM information_schema.PARTITIONS
          WHERE TABLE_SCHEMA = ${database === null ? 'DATABASE()' : '?'} AND TABLE_NAME = ?
            AND PARTITION_NAME IS NOT NULL ORDER BY PARTITION_ORDINAL_POSITION`,
        params: [
          -retentionMs,
          ...(database === null ? [] : [database]),
          `${tablePrefix}jobs_history`,
        ],
      }).rows;
      const [first] = rows;
      const parts = rows.map((row) => String(row.name));
      if (!first || !parts.includes('pmax')) return 0;
      // pYYYYMMDD: the records before that day; its bound as epoch ms of UTC midnight.
      const boundOf = (name: string): number =>
        Date.UTC(Number(name.slice(1, 5)), Number(name.slice(5, 7)) - 1, Number(name.slice(7, 9)));
      const days = parts.filter((name) => /^p\d{8}$/.test(name));
      const today = Date.parse(`${String(first.today)}T00:00:00Z`);
      const cutoff = Date.parse(`${String(first.cutoff).replace(' ', 'T')}Z`);
      const last = days.length > 0 ? boundOf(days[days.length - 1] as string) : today;
      const expired = days.filter((name) => boundOf(name) <= cutoff);
      if (last >= today + 3 * HISTORY_PARTITION_MS && expired.length === 0) return 0;
      const dayText = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
      yield { sql: 'SET SESSION lock_wait_timeout = 1', params: [] };
      let dropped = 0;
      try {
        for (let bound = last; bound < today + 3 * HISTORY_PARTITION_MS; ) {
          bound = Math.max(bound + HISTORY_PARTITION_MS, today + HISTORY_PARTITION_MS);
          const name = `p${dayText(bound).replace(/-/g, '')}`;
          try {
            yield {
              sql: `ALTER TABLE ${history} REORGANIZE PARTITION \`pmax\` INTO (PARTITION \`${name}\` VALUES LESS THAN ('${dayText(bound)}'), PARTITION \`pmax\` VALUES LESS THAN (MAXVALUE))`,
              params: [],
            };
          } catch {
            break; // The lock not granted in time, or another process split it: next call.
          }
        }
        for (const name of expired) {
          try {
            const [count] = (yield {
              sql: `SELECT COUNT(*) AS n FROM ${history} PARTITION (\`${name}\`)`,
              params: [],
            }).rows;
            yield { sql: `ALTER TABLE ${history} DROP PARTITION \`${name}\``, params: [] };
            dropped += Number(count?.n ?? 0);
          } catch {
            break; // As above: the next call drops it.
          }
        }
      } finally {
        yield { sql: 'SET SESSION lock_wait_timeout = ?', params: [Number(first.waits)] };
      }
      return dropped;
    },
    *enqueueJobs(newJobs: readonly NewJob[], notify: Query | null): Operation<EnqueueResult[]> {
      const now = readTime(
        (yield { sql: `SELECT ${asText(NOW)} AS now`, params: [] }).rows[0]?.now,
      );
      const values = newJobs.map((job) => newJobValues(job, now, encode));
      const keyOf = (index: number): string | null => newJobs[index]?.key ?? null;
      const firstOfKey = new Map<string, number>();
      newJobs.forEach((job, index) => {
        if (job.key !== null && !firstOfKey.has(job.key)) firstOfKey.set(job.key, index);
      });
      // Keys already held as this transaction sees them (a plain read: no locks), confirmed by
      // a locking read of those rows by primary key: record locks only, where a locking read
      // by `job_key` (a secondary index) would also lock the gap below each key in a
      // REPEATABLE READ transaction. Other keys go straight to the INSERT (see `insertOneKeyed`).
      const holders = new Map<string, SqlRow>();
      const keys = [...firstOfKey.keys()];
      const seen =
        keys.length === 0
          ? []
          : (yield {
              sql: `SELECT id FROM ${jobs} WHERE job_key IN (${marks(keys.length)})`,
              params: keys,
            }).rows.map((row) => row.id);
      if (seen.length > 0) {
        const found = yield {
          sql: `SELECT ${jobColumns()} FROM ${jobs} WHERE id IN (${marks(seen.length)}) LOCK IN SHARE MODE`,
          params: seen,
        };
        for (const row of found.rows) holders.set(String(row.job_key), row);
      }
      const toInsert = newJobs
        .map((_, index) => index)
        .filter((index) => {
          const key = keyOf(index);
          return key === null || (!holders.has(key) && firstOfKey.get(key) === index);
        });
      // The ids written, by input index.
      const inserted = new Map<number, string>();
      for (const chunk of chunksOf(values, toInsert)) {
        try {
          for (const [index, id] of yield* insertRows(values, chunk)) inserted.set(index, id);
        } catch (error) {
          // A held key undid this INSERT alone (not the transaction): its rows go in again, the
          // keyed ones one at a time, in input order (ids keep following it).
          if (!isDuplicateKey(error) || !chunk.some((index) => keyOf(index) !== null)) throw error;
          let run: number[] = [];
          const flush = function* (): Operation<void> {
            if (run.length > 0) {
              for (const [i, id] of yield* insertRows(values, run)) inserted.set(i, id);
            }
            run = [];
          };
          for (const index of chunk) {
            const key = keyOf(index);
            if (key === null) {
              run.push(index);
              continue;
            }
            yield* flush();
            const one = yield* insertOneKeyed(values, index, key);
            if (one.created) inserted.set(index, one.id);
            else holders.set(key, one.row);
          }
          yield* flush();
        }
      }
      if (notify && inserted.size > 0) yield notify;
      const written = (index: number, id: string): Job =>
        insertedJob(newJobs[index] as NewJob, { id, createdAt: now });
      return newJobs.map((job, index) => {
        const mine = inserted.get(index);
        if (mine !== undefined) return { job: written(index, mine), created: true };
        const key = job.key as string;
        const holder = holders.get(key);
        if (holder) return { job: rowToJob(holder), created: false };
        // Its key went to an earlier job of this batch.
        const first = firstOfKey.get(key) as number;
        const firstId = inserted.get(first);
        if (firstId === undefined) {
          throw new Error(`lost track of the holder of key ${JSON.stringify(key)}`);
        }
        return { job: written(first, firstId), created: false };
      });
    },
  };
  const d: MysqlDialect = {
    name: 'mysql',
    get server() {
      return server;
    },
    useServer(version) {
      server = version;
    },
    table,
    quote,
    sql: (text) => text.replace(/"/g, '`'),
    placeholders: (sql) => sql,
    now: NOW,
    nowPlusMs: `TIMESTAMPADD(MICROSECOND, ROUND(? * 1000), ${NOW})`,
    TRUE: '1',
    FALSE: '0',
    time: encode.time,
    bool: encode.bool,
    timeText: asText,
    jobColumns,
    scheduleColumns: selectList(SCHEDULE_COLUMN_NAMES, quote, {
      next_at: asText,
      created_at: asText,
      updated_at: asText,
    }),
    // A locking read sees the latest committed row even in a REPEATABLE READ transaction.
    latestRead: ' LOCK IN SHARE MODE',
    // InnoDB's sampled row count (0 until its statistics first run: no estimate). MySQL 8 caches
    // it for `information_schema_stats_expiry` (a day by default); MariaDB reads it live.
    estimateJobs: {
      sql: `SELECT NULLIF(TABLE_ROWS, 0) AS n FROM information_schema.TABLES
        WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`,
      params: [database, `${tablePrefix}${tableBaseName('jobs')}`],
    },
    setup: [],
    returning: false,
    deleteLimit: true,
    // Batches of up to 2,000 by default: InnoDB's cost per acquisition (a locking walk, an
    // UPDATE rewriting four secondary indexes, a commit, and the purge of what they leave behind)
    // falls per job as batches grow, more than PostgreSQL's. Draining 20,000 no-op jobs on
    // MariaDB 10.11 with one worker process (2 cores, until the table was empty, three rounds
    // each): ~15,900 jobs/s with batches of up to 1,000, ~18,400 with 2,000, ~18,600 with 4,000.
    // With two processes the machine is full and the completions are the bottleneck: no gain
    // (~16,700 against ~15,400, four rounds each, within the swing); 2,000 keeps the last,
    // biggest batches (and what a crash strands) at half of 4,000's.
    batchLimit: 2_000,
    lockSkipLocked: ' FOR UPDATE SKIP LOCKED',
    forUpdate: ' FOR UPDATE',
    acquisitionOrder: acquisitionOrderBy(true),
    pairs: pairMarks,
    onConflictDoNothing: () => '',
    isDuplicateKey,
    isRetryable: (error) => RETRYABLE.has(driverErrno(error) ?? 0),
    lockRetries: mysqlLockRetries,
    probeBeforeAcquire: false,
    negPriority: true,
    scopeIndexHint: SCOPE_INDEX,

    // ---- schema ----
    migrations: loadMigrations(MIGRATION_FILES.mysql, {
      jobs,
      schedules: table('schedules'),
      history: table('history'),
      rate_limits: table('rate_limits'),
      followups: table('followups'),
      signals: table('signals'),
      prefix: tablePrefix,
      database: database === null ? 'DATABASE()' : `'${database}'`,
      // The alias prefix of the idle waiters on these tables (`WakeWaiter`), whose waits the SQL
      // enqueue procedure ends; unqualified tables: waiters on this database only.
      wait_prefix: waiterPrefix(jobs),
      wait_same_db: database === null ? ' AND DB = DATABASE()' : '',
    }),
    versionTable: `CREATE TABLE IF NOT EXISTS ${table('migrations')} (\`version\` INT NOT NULL PRIMARY KEY, \`applied_at\` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)) ENGINE=InnoDB`,
    recordVersion: (migration: Migration): Query => ({
      sql: `INSERT INTO ${table('migrations')} (\`version\`, \`applied_at\`) VALUES (?, ${NOW})`,
      params: [migration.version],
    }),
    migrateLock: {
      // DDL commits implicitly in MySQL, so a session lock (held by this connection) guards it.
      lock: [
        {
          sql: `SELECT GET_LOCK(${migrateLock}, ${MIGRATE_LOCK_SECONDS}) AS got`,
          params: [database, tablePrefix],
        },
      ],
      unlock: [
        { sql: `SELECT RELEASE_LOCK(${migrateLock}) AS released`, params: [database, tablePrefix] },
      ],
      transactional: false,
    },
    *beforeMigrate(): Operation<void> {
      const held = yield {
        sql: `SELECT IS_USED_LOCK(${migrateLock}) = CONNECTION_ID() AS mine`,
        params: [database, tablePrefix],
      };
      if (Number(held.rows[0]?.mine) !== 1) {
        throw new Error(
          `another process held the migration lock for ${MIGRATE_LOCK_SECONDS} s; try again`,
        );
      }
      const { adoptPrefix } = options;
      if (adoptPrefix !== undefined && adoptPrefix !== tablePrefix) yield* adoptTables(adoptPrefix);
      // @jobs/mysql 0.1 recorded versions in `<prefix>migrations` (version, name, applied_at):
      // adopt it as the one version table (`<prefix>jobs_migrations`: version, applied_at).
      const former = `${tablePrefix}migrations`;
      const current = `${tablePrefix}jobs_migrations`;
      const columns = (yield {
        sql: `SELECT TABLE_NAME AS t, COLUMN_NAME AS c FROM information_schema.COLUMNS
          WHERE TABLE_SCHEMA = ${namespace} AND TABLE_NAME IN (?, ?)`,
        params: [database, former, current],
      }).rows;
      const has = (name: string, column?: string): boolean =>
        columns.some((row) => row.t === name && (column === undefined || row.c === column));
      const adopt = has(former, 'version') && has(former, 'name') && !has(current);
      if (adopt) {
        yield {
          sql: `RENAME TABLE ${qualifier}${quote(former)} TO ${table('migrations')}`,
          params: [],
        };
      }
      if (adopt || has(current, 'name')) {
        yield {
          sql: `ALTER TABLE ${table('migrations')} DROP COLUMN \`name\`,
            MODIFY \`applied_at\` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)`,
          params: [],
        };
      }
    },
    // The end of the primary key: one index dive ("select tables optimized away"), however many
    // rows. Ids only grow, so a new job (from any connection, committed) changes it; nothing is
    // written for it, so enqueue pays nothing. Two blind spots, both covered by the engine's
    // fallback poll: a job that commits after a younger one was already seen (concurrent
    // transactions; the next insert by anyone wakes too), and jobs that become acquirable
    // without an insert (released, retried or activated elsewhere).
    wakeSignal: { sql: `SELECT CAST(COALESCE(MAX(id), 0) AS CHAR) AS v FROM ${jobs}`, params: [] },
    // `ix_jobs_due (waiting, due_at)` read in order: `state IN (…)` would not use the index on
    // the generated `waiting` column, and MIN() over the rest reads every waiting row.
    dueOrder: { from: `${jobs} j FORCE INDEX (ix_jobs_due)`, waiting: 'j.waiting = 1' },
    // One pruner of history at a time: a session lock that never waits (GET_LOCK … 0).
    historyLock: {
      take: { sql: `SELECT GET_LOCK(${pruneLock}, 0) AS got`, params: [database, tablePrefix] },
      release: [
        { sql: `SELECT RELEASE_LOCK(${pruneLock}) AS released`, params: [database, tablePrefix] },
      ],
    },
    historyPartitions: {
      partitionMs: HISTORY_PARTITION_MS,
      dropBefore: (retentionMs) => own.maintainHistoryPartitions(retentionMs),
    },
    ops: {
      enqueue: {
        run: (c, jobs) => own.enqueueJobs(jobs, c.notify),
        transaction: (_, jobs) => own.enqueueNeedsTransaction(jobs),
      },
      acquire: { run: (_, request, token) => own.acquire(request, token), transaction: true },
      acquireLocked: null,
      completeAndAcquire: null,
      // MariaDB: one DELETE … RETURNING; MySQL: lock, then delete, in the store's transaction.
      complete: {
        run: (c, refs) =>
          deleteReturning() ? completeReturning(refs) : completeLockThenDelete.run(c, refs),
        transaction: () => !deleteReturning(),
      },
      completeWithHistory: { run: (_, done) => completeHeldWithHistory(done), transaction: true },
      fail: { run: (_, failures) => own.failHeld(failures), transaction: true },
      release: byPrimaryKey(releaseLockThenUpdate),
      renew: byPrimaryKey(renewTwoStep),
      recover: recoverLockThenUpdate,
      saveSteps: byPrimaryKey(saveStepsTwoStep),
    },
  };

  /**
   * One keyed job whose holder, if any, this transaction's snapshot did not show: insert, and
   * only a duplicate key says a holder exists (committed since the snapshot, or just now). It
   * is then read by one point read, `LOCK IN SHARE MODE` so that a caller's REPEATABLE READ
   * snapshot cannot hide it. A locking read of a missing key would lock its gap in a
   * REPEATABLE READ transaction, and callers holding one gap each then deadlock on each other's
   * inserts. (The failed INSERT itself locks the gap below the held key until the transaction
   * ends, as InnoDB's duplicate check does: the one case where a caller holds back others, and
   * only keys between that one and the next lower.) A holder that finished before the read:
   * the job is inserted again.
   */
  function* insertOneKeyed(
    values: SqlValue[][],
    index: number,
    key: string,
  ): Operation<{ created: true; id: string } | { created: false; row: SqlRow }> {
    let answer: { created: true; id: string } | { created: false; row: SqlRow } | undefined;
    yield* insertKeyed(
      [key],
      (k) => k,
      function* () {
        try {
          answer = {
            created: true,
            id: (yield* insertRows(values, [index])).get(index) as string,
          };
          return [];
        } catch (error) {
          if (!isDuplicateKey(error)) throw error;
        }
        const holder = (yield {
          sql: `SELECT ${jobColumns()} FROM ${jobs} WHERE job_key = ? LOCK IN SHARE MODE`,
          params: [key],
        }).rows[0];
        if (!holder) return [key];
        answer = { created: false, row: holder };
        return [];
      },
    );
    return answer as { created: true; id: string } | { created: false; row: SqlRow };
  }

  /**
   * Completion while history keeps completed jobs, in the transaction the store opens: lock
   * the rows by primary key in key order, copy the held ones to history, delete them by
   * primary key. Every step reads the primary key only (FORCE INDEX): with a long id list the
   * optimizer may otherwise scan the table, and two completers scanning past each other's
   * locked rows deadlock (MariaDB, several nodes, history on).
   */
  function* completeHeldWithHistory(done: readonly JobCompletion[]): Operation<string[]> {
    const sorted = [...done].sort(byId);
    const tokens = new Map(
      (yield {
        sql: `SELECT id, lock_token FROM ${jobs} FORCE INDEX (PRIMARY)
          WHERE id IN (${marks(sorted.length)}) AND state = 'running' AND cancel_requested = FALSE
          ORDER BY id FOR UPDATE`,
        params: sorted.map((ref) => ref.id),
      }).rows.map((row) => [String(row.id), String(row.lock_token)]),
    );
    const held = sorted.filter((ref) => tokens.get(ref.id) === ref.token);
    if (held.length === 0) return [];
    const values = held.map((_, i) =>
      i === 0 ? 'SELECT ? AS id, ? AS result, ? AS duration_ms' : 'SELECT ?, ?, ?',
    );
    yield {
      sql: d.sql(
        `${historyInsert(table('history'), 'j', "'completed'", 'r.result', 'r.duration_ms', NOW)}
          FROM ${jobs} j FORCE INDEX (PRIMARY) JOIN (${values.join(' UNION ALL ')}) r ON j.id = r.id
          ORDER BY j.id`,
      ),
      params: held.flatMap((ref) => [ref.id, ref.resultJson ?? null, durationOf(ref)]),
    };
    const ids = held.map((ref) => ref.id);
    yield {
      sql: `DELETE j FROM ${jobs} j FORCE INDEX (PRIMARY) WHERE j.id IN (${marks(ids.length)})`,
      params: ids,
    };
    return ids;
  }

  /** MariaDB: one statement, and RETURNING says exactly which rows were held. */
  function* completeReturning(refs: readonly JobRef[]): Operation<string[]> {
    const held = (yield {
      sql: `DELETE FROM ${jobs} WHERE id IN (${marks(refs.length)}) AND state = 'running'
        AND (id, lock_token) IN (${pairMarks(refs.length)}) AND cancel_requested = FALSE
        RETURNING id`,
      params: [...refs.map((ref) => ref.id), ...refs.flatMap((ref) => [ref.id, ref.token])],
    }).rows;
    return held.map((row) => String(row.id));
  }

  return d;
}

/**
 * `spec` reading and writing the jobs table by primary key only (`FORCE INDEX (PRIMARY)` after
 * the table's name, where its statements name it: `UPDATE … SET`, `SELECT … FROM … WHERE`).
 * Its statements name their rows by id, but they also say `state = 'running'`, and when few
 * rows run (fewer than the ids named: a heartbeat still names jobs whose completions just
 * committed) the optimizer reads `ix_jobs_lease (state, lock_expires_at)` instead: a walk over
 * every node's running rows that locks each in turn, so a node's renewal waited for any other
 * node's completion holding a row (a wait that can close a lock cycle in a busy multi-node
 * drain). By primary key, a statement locks only the rows it names, in key order, as every
 * other multi-row statement here takes them.
 */
function byPrimaryKey<A extends unknown[], R>(spec: OpSpec<A, R>): OpSpec<A, R> {
  const hinted = (c: SqlEnv): SqlEnv => ({ ...c, jobs: `${c.jobs} FORCE INDEX (PRIMARY)` });
  return {
    run: (c, ...args) => spec.run(hinted(c), ...args),
    transaction: spec.transaction,
  };
}

/** Orders refs by numeric id (ids are canonical decimals: shorter is smaller). */
function byId(a: JobRef, b: JobRef): number {
  return a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Splits `indexes` into INSERT chunks of at most 500 rows and about 4 MiB of payload and meta. */
function chunksOf(values: readonly (readonly unknown[])[], indexes: readonly number[]): number[][] {
  const chunks: number[][] = [];
  let chunk: number[] = [];
  let bytes = 0;
  for (const index of indexes) {
    const row = values[index];
    const size = String(row?.[PAYLOAD_AT] ?? '').length + String(row?.[META_AT] ?? '').length;
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
