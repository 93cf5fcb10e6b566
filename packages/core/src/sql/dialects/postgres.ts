/**
 * The PostgreSQL dialect: its syntax, traits, migrations and hot-path statements, and the
 * resumed walk of its acquisition (a walk that starts where the last one stopped when the head
 * of the due index is slow to pass).
 *
 * Each section below keeps its own header.
 */
import { monotonicNow } from '../../clock.js';
import { leaseStarts, payloadJson } from '../../rules.js';
import type {
  AcquireRequest,
  EnqueueResult,
  Job,
  JobCompletion,
  JobFailure,
  JobRef,
  LeaseRenewalRef,
  NewJob,
  RecoverResult,
  StepSave,
} from '../../store.js';
import {
  acquisitionOrderBy,
  type Dialect,
  JOB_COLUMN_NAMES,
  pairMarks,
  type RenewAnswer,
  SCHEDULE_COLUMN_NAMES,
  selectList,
  type TableName,
  tableBaseName,
} from '../dialect.js';
import type { Operation, Query } from '../executor.js';
import { loadMigrations } from '../migrate.js';
import type { Migration } from '../migration.js';
import { MIGRATION_FILES } from '../migrations/index.js';
import { insertKeyed } from '../operations/jobs.js';
import {
  durationOf,
  HISTORY_PARTITION_MS,
  historyInsert,
  INSERT_JOB_COLUMNS,
  insertedJob,
  isLimited,
  jobRowAt,
  jobRowLayout,
  LEASE_EXPIRED_MESSAGE,
  LEASED_COLUMN_NAMES,
  readTime,
  recoverResult,
  rowToJob,
  type SqlRow,
  storedScopeLimit,
} from '../rows.js';
import { scopeHeadIsFree } from '../scope-rule.js';
import { driverCode } from './support.js';

// ─── the dialect ─────────────────────────────────────────────────────────────────────────────────
/*
 * PostgreSQL, for `@jobs/postgres` and `@jobs/typeorm` alike:
 * - the clock is `statement_timestamp()` (the database's time when a statement starts, also
 *   inside a longer transaction, where `now()` would be the transaction's start); due times
 *   written are cut to the millisecond, so a job enqueued "now" is due for the very next
 *   statement (the columns hold milliseconds, and rounding up would make it wait);
 * - hot-path statements take array parameters (`unnest($1::bigint[], $2::text[])`), so their
 *   text is the same whatever the batch size and a driver can prepare each once per
 *   connection;
 * - acquisition is one `FOR UPDATE SKIP LOCKED` statement that leaves exclusive jobs to a
 *   second, locked step (`acquireLimited`, per-scope advisory locks); `completeAndAcquire`
 *   deletes the finished batch in that same statement;
 * - enqueue inserts a whole batch, keyed or not, and sends its wake-up in one statement.
 * The statements of the members below are written with `$n` parameters (no `?`), which
 * `placeholders` leaves alone.
 */

export interface PostgresDialectOptions {
  /** Prefix of the store's table names. */
  tablePrefix: string;
  /** Schema of the tables; null for the connection's search path. */
  schema: string | null;
  /**
   * The tables were formerly on the connection's search path (`@jobs/typeorm` 0.1's default):
   * `migrate()` moves them into `schema` (`ALTER TABLE … SET SCHEMA`, indexes and the id
   * sequence go along) when only they exist — their jobs table and a version table of
   * `version` and `applied_at` there, and neither table in `schema`.
   */
  adoptSearchPath?: boolean;
  /**
   * The LISTEN/NOTIFY channel the store listens to, which the SQL enqueue function (migration
   * 13) notifies. Default `<schema or public>_<prefix>jobs`, both stores' default.
   */
  notifyChannel?: string;
  /**
   * Told (at most every 10 minutes) when acquisitions resume a slow walk after the last job
   * leased (the resumed walk below): a sign that something holds back vacuum.
   */
  onSlowWalks?: (message: string) => void;
}

const quote = (identifier: string): string => `"${identifier}"`;
const RETRYABLE = new Set(['40P01', '40001', '55P03']);
/** The database's now: the start of the current statement. */
const NOW = 'statement_timestamp()';
/** Now for due times written: cut to the millisecond (see the file comment). */
const NOW_MS = `date_trunc('milliseconds', ${NOW})`;

/**
 * `notify` (a SELECT with `?` parameters) as a scalar subquery whose parameters are numbered
 * from `$first`: evaluated once, and only when the statement returns a row — a statement that
 * changed nothing wakes nobody.
 */
/** Ids and lease tokens as they always are: digits, hex and dashes (no quoting needed). */
const PLAIN_ELEMENT = /^[0-9A-Za-z-]+$/;

/**
 * `values` as a PostgreSQL array literal (`{1,2,3}`) when every element is plain (ids, tokens),
 * built in one join instead of `pg` quoting each element; else the array, which `pg` quotes.
 */
function arrayText(values: readonly string[]): string | readonly string[] {
  for (const value of values) {
    if (!PLAIN_ELEMENT.test(value) || value.toUpperCase() === 'NULL') return values;
  }
  return `{${values.join(',')}}`;
}

function wake(notify: Query | null, first: number): { sql: string; params: unknown[] } {
  if (!notify) return { sql: 'NULL', params: [] };
  let n = first;
  const sql = notify.sql.replace(/\?/g, () => `$${n++}`);
  return { sql: `(SELECT count(*) FROM (${sql}) AS wake)`, params: [...notify.params] };
}

/** The owner and token a lease wrote. */
interface Lease {
  owner: string;
  token: string;
}

/** Where the leased columns stand in a lease's select list. */
const LEASED_LAYOUT = jobRowLayout(LEASED_COLUMN_NAMES);

/** The PostgreSQL dialect (see the file comment). */
export function postgresDialect({
  tablePrefix,
  schema,
  adoptSearchPath,
  notifyChannel,
  onSlowWalks,
}: PostgresDialectOptions): Dialect {
  const qualifier = schema ? `${quote(schema)}.` : '';
  const table = (name: TableName): string =>
    `${qualifier}${quote(`${tablePrefix}${tableBaseName(name)}`)}`;
  const jobs = table('jobs');
  const order = acquisitionOrderBy(false);
  const versionTable = table('migrations');
  const versionTableDdl = `CREATE TABLE IF NOT EXISTS ${versionTable} ("version" integer PRIMARY KEY, "applied_at" timestamptz(3) NOT NULL DEFAULT now())`;
  // jsonb as text: rowToJob parses it (a driver's jsonb parser would turn a JSON string payload
  // into a bare string, which reads as JSON text). Times as epoch ms (exact: timestamptz(3)):
  // pg parses a float8 with parseFloat, a timestamptz with a regular expression per value, 4
  // per job on the hot path.
  const columnWraps = {
    payload: (c: string) => `${c}::text`,
    retry_policy: (c: string) => `${c}::text`,
    progress: (c: string) => `${c}::text`,
    logs: (c: string) => `${c}::text`,
    steps: (c: string) => `${c}::text`,
    due_at: epochMs,
    created_at: epochMs,
    lock_expires_at: epochMs,
    occurrence: epochMs,
    started_at: epochMs,
  };
  const jobColumns = (alias?: string): string =>
    selectList(JOB_COLUMN_NAMES, quote, columnWraps, alias);
  /** What a lease returns: the columns it did not write itself (`LEASED_COLUMN_NAMES`). */
  const leasedColumns = (alias?: string): string =>
    selectList(LEASED_COLUMN_NAMES, quote, columnWraps, alias);
  /** Advisory-lock namespace of this table (the same text @jobs/postgres 0.1 locked). */
  const lockSpace = `${schema ? `${schema}.` : ''}${tablePrefix}jobs`;
  const headIsFree = scopeHeadIsFree(
    { now: NOW, TRUE: 'true', quote, correlatedLimit: true, acquisitionOrder: order },
    'j',
    jobs,
  );

  // ---- acquisition ----
  // Parameters: $1 owner, $2 limit, $3 lease ms, $4 types, $5 queues (null: all), $6 tenants
  // (null: all), $7 token, $8 how many are recorded as started whatever their retries, $9 how
  // many more only if they have retries left (`startRanks`, `leaseStarts`).
  //
  // Every acquisition walks \`jobs_acquire\` (priority DESC, due_at, id; waiting rows only) in
  // order and stops after the batch — whatever the table's statistics. Two details of the text
  // make the planner choose that walk also on a table that was never analysed (where it
  // estimates a handful of matching rows, and then prefers a bitmap scan of every waiting row
  // and a sort of them all, ~1 s per call at 1M rows):
  // - filters are written \`array_position(list, column) IS NOT NULL\`: without statistics the
  //   planner guesses 99.5% for that (and 0.5% per element for \`= ANY\`), so its row estimate
  //   stays far above the batch size;
  // - the limit is \`LIMIT (SELECT n)\`, a value the planner cannot read, so it plans to stop
  //   after a fraction of the rows instead of trusting its estimate (custom and generic plans
  //   alike, as prepared statements get after five runs).
  // That unknown limit counts as a tenth of the waiting rows, though, so on an analysed table
  // the planner joined the batch to the table it updates by hashing every row of it (a
  // sequential scan per acquisition: ~40 ms at 200,000 rows, growing with the backlog). The
  // lease therefore reads its batch as an array (\`unnest(ARRAY(…))\`, which the planner counts
  // as a few rows): one primary-key probe per row, analysed or not (see \`lease\`).
  // \`pnpm bench plans\` prints the plans (bench/README.md).
  const matches = (types = 4, queues = 5, tenants = 6): string =>
    `j.state IN ('timer', 'async') AND j.due_at <= ${NOW}
      AND array_position($${types}::text[], j.type) IS NOT NULL
      AND ($${queues}::text[] IS NULL OR array_position($${queues}::text[], j.queue) IS NOT NULL)
      AND ($${tenants}::text[] IS NULL
           OR array_position($${tenants}::text[], j.tenant_id) IS NOT NULL)`;
  const EXCLUSIVE = '(j.exclusive AND j.scope IS NOT NULL)';
  /**
   * "Still running", in the statements that find the jobs of a list of refs (ids and tokens
   * unnested from arrays): written as a CASE, which the planner cannot match to the running
   * rows' index (\`jobs_lease\`), so each ref is found by primary key. With that index in
   * reach, a prepared statement on a table analysed while few jobs ran read the running rows
   * as "about one row" and compared each of them with every ref: a nested loop growing as the
   * square of the batch (45 ms for 500 refs, against 2–3 ms).
   */
  const HELD = "CASE WHEN j.state = 'running' THEN true ELSE false END";
  /**
   * The acquisition walk: candidates in acquisition order, \`limit\` at most. An exclusive row is
   * a candidate when it heads a free scope on this snapshot (\`scopes\`: and its scope is one of
   * these locked ones).
   */
  const walk = (columns: string, limit: string, filters: string, scopes = ''): string =>
    `SELECT ${columns} FROM ${jobs} j
    WHERE ${filters}
      AND (NOT ${EXCLUSIVE} OR (${scopes}${headIsFree}))
    ORDER BY ${order('j')} LIMIT (SELECT ${limit}::int)`;
  /**
   * The lease of the candidates `picked` (locked rows in acquisition order). It reads them as
   * an array numbered in that order (\`unnest … WITH ORDINALITY\`): the first $8 are recorded
   * as started, and up to $9 more with retries left (\`started_at\`, \`leaseStarts\`). The
   * array keeps the walk's order (its ORDER BY, which locking and skipping keep) without
   * sorting the rows again, and the planner counts it as a few rows, so it probes the primary
   * key once per row instead of joining the batch to the whole table. The engine reads which rows were recorded from
   * \`started_at\`, never from this numbering, so a numbering out of order could only start a
   * job a round trip later, never unrecorded.
   */
  const lease = (onlyIf = 'true'): string => `acq AS (
    UPDATE ${jobs} j
    SET state = 'running', lock_owner = $1, lock_token = $7,
        lock_expires_at = ${NOW} + $3::float8 * interval '1 millisecond',
        attempts = j.attempts + 1,
        started_at = CASE WHEN c.rn <= $8::int OR (c.rn <= $8::int + $9::int AND j.retries_left > 0)
                          THEN ${NOW} END
    FROM unnest(ARRAY(SELECT id FROM picked)) WITH ORDINALITY AS c(id, rn)
    WHERE j.id = c.id AND ${onlyIf}
    RETURNING ${leasedColumns('j')})`;
  /**
   * The fast path: one statement, no transaction. When an exclusive job could start within the
   * batch (it heads a free scope on this snapshot), it takes nothing and says so
   * (\`needs_exclusive\`), so the locked step decides under the scope's lock and acquisition
   * order (priority first) holds across both. Exclusive rows of busy scopes are skipped by the
   * walk; a stale snapshot at worst leaves a free scope for the next call.
   */
  const fast = (resumeAt = 0): string => `${resumeAt ? pickedResumed(resumeAt) : pickedFromHead},
  flag AS (SELECT coalesce(bool_or(picked.excl), false) AS needs_exclusive FROM picked),
  ${lease('NOT (SELECT needs_exclusive FROM flag)')}`;
  const PICKED_COLUMNS = `j.id, ${EXCLUSIVE} AS excl`;
  const pickedFromHead = `picked AS (
    ${walk(PICKED_COLUMNS, '$2', matches())} FOR UPDATE OF j SKIP LOCKED)`;
  /**
   * A walk resumed after the last job leased (the resumed walk below), $at its priority and $at+1
   * its due time (epoch ms), in acquisition order: the rows of higher priorities (\`ahead\`,
   * from the head of theirs), those of its priority from its due time on (\`resumed\`: priority
   * and due time are index conditions of \`jobs_acquire\`, so the walk starts there), then the
   * lower priorities (\`below\`). Only a row of the same priority due before the point waits
   * for the next walk from the head.
   */
  const pickedResumed = (at: number): string => {
    const arm = (name: string, taken: string[], where: string): string => {
      const limit = taken.length
        ? `($2::int - ${taken.map((t) => `(SELECT count(*)::int FROM ${t})`).join(' - ')})`
        : '$2';
      return `${name} AS (
    ${walk(PICKED_COLUMNS, limit, `${matches()} AND ${where}`)} FOR UPDATE OF j SKIP LOCKED)`;
    };
    return `${arm('ahead', [], `j.priority > $${at}::int`)},
  ${arm('resumed', ['ahead'], `j.priority = $${at}::int AND j.due_at >= to_timestamp($${at + 1}::float8 / 1000)`)},
  ${arm('below', ['ahead', 'resumed'], `j.priority < $${at}::int`)},
  picked AS (SELECT id, excl FROM ahead UNION ALL SELECT id, excl FROM resumed
    UNION ALL SELECT id, excl FROM below)`;
  };
  const acquireFast = (resumeAt = 0): string => `WITH ${fast(resumeAt)}
  SELECT flag.needs_exclusive, acq.* FROM flag LEFT JOIN acq ON true`;
  const acquireFromHead = acquireFast();
  /** After the 9 parameters of \`acquireParams\`. */
  const acquireResumed = acquireFast(10);
  /**
   * History records of the rows `done` deleted (all their columns), each with its result and
   * duration from the parameter arrays `$ids`, `$results`, `$durations`.
   */
  const recordDone = (ids: string, results: string, durations: string): string => `hist AS (
    ${historyInsert(table('history'), 'done', `'completed'`, 'r.result::jsonb', 'r.duration_ms', NOW)}
    FROM done JOIN unnest(${ids}::bigint[], ${results}::text[], ${durations}::bigint[])
      AS r(id, result, duration_ms) ON r.id = done.id)`;
  // $10 ids, $11 tokens of finished jobs, deleted by the same statement; with history, $12
  // results and $13 durations of their records.
  const completeAndAcquireFast = (history: boolean, resumeAt = 0): string => `WITH done AS (
    DELETE FROM ${jobs} j USING unnest($10::bigint[], $11::text[]) AS d(id, token)
    WHERE j.id = d.id AND j.lock_token = d.token AND ${HELD}
      AND NOT j.cancel_requested
    RETURNING ${history ? 'j.*' : 'j.id'}),${
      history
        ? `
  ${recordDone('$10', '$12', '$13')},`
        : ''
    }
  ${fast(resumeAt)}
  SELECT flag.needs_exclusive, acq.*,
    -- The ids NOT deleted (usually none: null), repeated on every row.
    (SELECT array_agg(d.id::text) FROM unnest($10::bigint[]) AS d(id)
     WHERE d.id NOT IN (SELECT id FROM done)) AS lost_ids
  FROM flag LEFT JOIN acq ON true`;
  /**
   * Locked step 1 (in a transaction): try-lock the scopes of the exclusive heads within the
   * batch's walk. A scope lock is held until commit, so whoever decides about a scope does so
   * after the previous holder committed — step 2 is a new statement, and READ COMMITTED gives
   * it a new snapshot. A stale snapshot here can only lock too few scopes. $1 limit, $2–$4
   * filters.
   */
  const lockScopes = `SELECT coalesce(array_agg(c.scope), '{}') AS scopes
  FROM (${walk(`j.scope, ${EXCLUSIVE} AS excl`, '$1', matches(2, 3, 4))}) c
  WHERE c.excl AND pg_try_advisory_xact_lock(hashtext('${lockSpace}'), hashtext(c.scope))`;
  // Locked step 2: $10 = the scopes locked in step 1.
  const acquireLocked = `WITH picked AS (
    ${walk('j.id', '$2', matches(), 'j.scope = ANY($10::text[]) AND ')} FOR UPDATE OF j SKIP LOCKED),
  ${lease()}
  SELECT * FROM acq`;
  /** Where this store's walks resume (the resumed walk below). */
  const walks = new WalkResume(
    monotonicNow,
    onSlowWalks
      ? (head, resumed) =>
          onSlowWalks(
            `[@jobs/postgres] walking the acquisition index of ${jobs} from its head took ${Math.round(head.ms)} ms for ${head.jobs} jobs, and ${Math.round(resumed.ms)} ms for ${resumed.jobs} resumed after the last job leased: acquisitions now resume their walks, and walk from the head every few seconds. Dead row versions not yet vacuumed do this: autovacuum falling behind a busy queue (n_dead_tup of the table in pg_stat_user_tables), or a transaction left open that keeps vacuum from removing them (an idle BEGIN, a long REPEATABLE READ report: an old xact_start in pg_stat_activity). See "Long transactions" in the deployment guide.`,
          )
      : null,
  );
  const resumeParams = (from: ResumePoint | null): unknown[] =>
    from ? [from.priority, from.dueMs] : [];
  /** Notes what a walk cost and where it ended; gives back its leased rows. */
  const walked = (
    key: string,
    request: AcquireRequest,
    from: ResumePoint | null,
    ms: number,
    jobs: SqlRow[],
  ): SqlRow[] => {
    if (jobs[0]?.needs_exclusive !== true) {
      if (from) walks.walkedOn(key, ms, jobs);
      else walks.walkedHead(key, ms, jobs, request.limit);
    }
    return jobs;
  };
  /** $8 and $9 of `lease` (see `leaseStarts`): recorded unconditionally, with retries left. */
  const startRanks = (request: AcquireRequest): [number, number] => {
    const { always, withRetriesLeft } = leaseStarts(request, request.limit);
    return [always, Math.max(0, withRetriesLeft - always)];
  };
  const acquireParams = (request: AcquireRequest, token: string): unknown[] => [
    request.owner,
    request.limit,
    request.leaseMs,
    request.types,
    request.queues,
    request.tenants,
    token,
    ...startRanks(request),
  ];
  /**
   * Leased rows, or the one `needs_exclusive` row (see `Dialect.acquireLimited`), of a
   * statement whose select list is `needs_exclusive` (unless `at` is 0), the leased columns,
   * then maybe more. `pg` returns them as arrays (`arrayRows`); a driver without an array mode,
   * by name. Either way the rows come back whole: a lease's own columns from `lease`.
   */
  const leased = (rows: SqlRow[], lease: Lease, at = 1): SqlRow[] => {
    const first = rows[0] as unknown;
    if (Array.isArray(first)) {
      if (at > 0 && first[0] === true) return [{ needs_exclusive: true }];
      const out: SqlRow[] = [];
      for (const values of rows as unknown as unknown[][]) {
        if (values[at] !== null) out.push(jobRowAt(values, at, LEASED_LAYOUT, lease));
      }
      return out;
    }
    if (at > 0 && rows[0]?.needs_exclusive === true) return rows.slice(0, 1);
    const out: SqlRow[] = [];
    for (const row of rows) {
      if (row.id === null || row.id === undefined) continue;
      // In place (the driver's row is this call's): V8 builds a spread with properties added
      // on its slow path, ~2 µs a row.
      row.state = 'running';
      row.lock_owner = lease.owner;
      row.lock_token = lease.token;
      out.push(row);
    }
    return out;
  };
  /** `lost_ids` of the fused statement's first row: after the leased columns in an array row. */
  const lostIds = (rows: SqlRow[]): string[] => {
    const first = rows[0] as unknown;
    const ids = Array.isArray(first) ? first[1 + LEASED_COLUMN_NAMES.length] : rows[0]?.lost_ids;
    return (ids as string[] | null | undefined) ?? [];
  };

  // ---- enqueue ----
  /**
   * A batch in input order (ids follow it) and one wake-up, $20… = `notify`'s parameters.
   * `keyed`: some jobs have a unique key; a held key inserts nothing (the caller reads the
   * holder). Without keys the plain INSERT skips the cost of speculative insertion.
   */
  const unnestAll = (types: string): string =>
    types
      .split(' ')
      .map((type, i) =>
        type === 'json' ? `jsonb_array_elements($${i + 1}::jsonb)` : `unnest($${i + 1}::${type}[])`,
      )
      .join(', ');
  const insertBatch = (keyed: boolean, wakeSql: string): string => `WITH input AS (
    SELECT * FROM ROWS FROM (${unnestAll(
      'text json int timestamptz float8 int text bool text text text jsonb text timestamptz int int jsonb int int',
    )}) WITH ORDINALITY
      AS i(type, payload, priority, due_given, delay_ms, retries, scope, exclusive, job_key,
           tenant_id, queue, retry_policy, schedule_name, occurrence, shard_index, shard_count,
           meta, scope_limit, timeout_ms, ord)),
  due AS (
    SELECT i.*, coalesce(i.due_given, ${NOW_MS}) + i.delay_ms * interval '1 millisecond' AS due_at
    FROM input i),${
      keyed
        ? `
  -- Two batches inserting the same keys in opposite orders would deadlock on the unique index;
  -- the keys' advisory locks, taken in sorted order, make the second wait for the first.
  key_locks AS (
    SELECT count(*) AS n FROM (
      SELECT pg_advisory_xact_lock(hashtext('${lockSpace}.key'), hashtext(k.job_key))
      FROM (SELECT DISTINCT job_key FROM input WHERE job_key IS NOT NULL ORDER BY job_key) k) l),`
        : ''
    }
  ins AS (
    INSERT INTO ${jobs} (${INSERT_JOB_COLUMNS.join(', ')})
    SELECT type, payload, CASE WHEN due_at > ${NOW} THEN 'timer' ELSE 'async' END, priority,
           due_at, retries, 0, scope, exclusive, job_key, tenant_id, queue, ${NOW},
           retry_policy, schedule_name, occurrence, shard_index, shard_count, meta, scope_limit,
           timeout_ms
    FROM due${keyed ? ' WHERE (SELECT n FROM key_locks) IS NOT NULL' : ''} ORDER BY ord${
      keyed ? '\n    ON CONFLICT (job_key) WHERE job_key IS NOT NULL DO NOTHING' : ''
    }
    -- What the database decided; the rest of each job is what the caller sent. Times as epoch
    -- milliseconds: cheaper to read than timestamps, exact for timestamptz(3).
    RETURNING id, job_key, state,
      (extract(epoch FROM due_at) * 1000)::float8 AS due_at,
      (extract(epoch FROM created_at) * 1000)::float8 AS created_at)
  SELECT ins.*, ${wakeSql} AS notified FROM ins ORDER BY ins.id`;

  // ---- settlement ($1 ids, $2 tokens) ----
  const completeSql = `DELETE FROM ${jobs} j
  USING unnest($1::bigint[], $2::text[]) AS d(id, token)
  WHERE j.id = d.id AND j.lock_token = d.token AND ${HELD}
      AND NOT j.cancel_requested
  RETURNING j.id::text AS id`;
  // Each checkpoint fenced by its own token, as `operations/steps.ts` writes one.
  const saveStepsSql = `UPDATE ${jobs} j SET steps = s.steps::jsonb
  FROM unnest($1::bigint[], $2::text[], $3::text[]) AS s(id, token, steps)
  WHERE j.id = s.id AND j.lock_token = s.token AND ${HELD}
  RETURNING j.id::text AS id`;
  // With history: $3 results, $4 durations.
  const completeWithHistorySql = `WITH done AS (
    DELETE FROM ${jobs} j USING unnest($1::bigint[], $2::text[]) AS d(id, token)
    WHERE j.id = d.id AND j.lock_token = d.token AND ${HELD}
      AND NOT j.cancel_requested
    RETURNING j.*),
  ${recordDone('$1', '$3', '$4')}
  SELECT done.id::text AS id FROM done`;
  const failSql = `UPDATE ${jobs} j
  SET state = CASE WHEN f.deadletter THEN 'deadletter' ELSE 'timer' END,
      due_at = CASE WHEN f.deadletter THEN j.due_at
                    ELSE ${NOW_MS} + f.delay_ms * interval '1 millisecond' END,
      retries_left = CASE WHEN f.deadletter THEN j.retries_left ELSE j.retries_left - 1 END,
      lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL,
      last_error_message = f.message, last_error_stack = f.stack
  FROM unnest($1::bigint[], $2::text[], $3::bool[], $4::float8[], $5::text[], $6::text[])
       AS f(id, token, deadletter, delay_ms, message, stack)
  WHERE j.id = f.id AND j.lock_token = f.token AND ${HELD}
    AND NOT j.cancel_requested
  RETURNING j.id::text AS id`;
  const releaseSql = (wakeSql: string): string => `WITH released AS (
    UPDATE ${jobs} j
    SET state = 'async', attempts = j.attempts - 1,
        lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL
    FROM unnest($1::bigint[], $2::text[]) AS r(id, token)
    WHERE j.id = r.id AND j.lock_token = r.token AND ${HELD}
    RETURNING j.id::text AS id)
  SELECT released.id, ${wakeSql} AS notified FROM released`;
  // Allowed after expiry as long as the token still matches: nobody else took the job.
  // $5: each ref's progress as JSON text, null for unchanged; $6: whether its handler starts
  // now (true), takes back a start recorded ahead (false), or neither (null; see
  // `LeaseRenewalRef.start`); $7: each ref's whole log as JSON text, null for unchanged.
  // The owner $1 is compared as a column of the refs, like the token: as a filter of the table,
  // an owner the statistics do not know reads as "about one row", and the planner then
  // scanned the table for it and compared every row found with every ref (500 × 500).
  const renewSql = `UPDATE ${jobs} j
  SET lock_expires_at = ${NOW} + $2::float8 * interval '1 millisecond',
      progress = coalesce(r.progress::jsonb, j.progress),
      logs = coalesce(r.logs::jsonb, j.logs),
      started_at = CASE WHEN r.start THEN coalesce(j.started_at, ${NOW})
                        WHEN NOT r.start THEN NULL ELSE j.started_at END
  FROM unnest($3::bigint[], $4::text[], $5::text[], $6::bool[], $7::text[],
              array_fill($1::text, ARRAY[cardinality($3::bigint[])]))
    AS r(id, token, progress, start, logs, owner)
  WHERE j.id = r.id AND j.lock_token = r.token AND j.lock_owner = r.owner AND ${HELD}
  RETURNING j.id::text AS id, j.cancel_requested`;
  // The expiry is re-checked on the latest row version after the row lock (EvalPlanQual), so
  // a renewal or completion that commits first wins. $1 limit, $2 message.
  // A job whose handler never started (`started_at` null) goes back with its attempt given
  // back, its retries and last error untouched; cancel-requested jobs are the shared
  // operation's (`recoverCancelled`), never requeued here.
  const recoverSql = (wakeSql: string): string => `WITH expired AS (
    SELECT id FROM ${jobs}
    WHERE state = 'running' AND lock_expires_at <= ${NOW} AND NOT cancel_requested
    ORDER BY lock_expires_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED),
  recovered AS (
    UPDATE ${jobs} j
    SET state = CASE WHEN j.started_at IS NULL OR j.retries_left > 0 THEN 'async'
                     ELSE 'deadletter' END,
        retries_left = CASE WHEN j.started_at IS NOT NULL AND j.retries_left > 0
                            THEN j.retries_left - 1 ELSE j.retries_left END,
        attempts = CASE WHEN j.started_at IS NULL THEN j.attempts - 1 ELSE j.attempts END,
        lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL,
        last_error_message = CASE WHEN j.started_at IS NULL THEN j.last_error_message ELSE $2 END,
        last_error_stack = CASE WHEN j.started_at IS NULL THEN j.last_error_stack END
    FROM expired
    WHERE j.id = expired.id AND j.state = 'running' AND j.lock_expires_at <= ${NOW}
      AND NOT j.cancel_requested
    RETURNING j.id::text AS id, j.state, j.started_at IS NULL AS unstarted)
  -- Requeued jobs are acquirable again: wake every engine, not only the one that recovered them.
  SELECT recovered.id, recovered.state, recovered.unstarted,
         CASE WHEN EXISTS (SELECT 1 FROM recovered r WHERE r.state = 'async')
              THEN ${wakeSql} END AS notified
  FROM recovered`;
  const refArrays = (
    refs: readonly JobRef[],
  ): [string | readonly string[], string | readonly string[]] => [
    arrayText(refs.map((ref) => ref.id)),
    arrayText(refs.map((ref) => ref.token)),
  ];
  const ids = (rows: SqlRow[]): string[] => rows.map((row) => String(row.id));
  /** Result and duration arrays of history records, in `done`'s order. */
  const recordArrays = (done: readonly JobCompletion[]): [(string | null)[], (number | null)[]] => [
    done.map((ref) => ref.resultJson ?? null),
    done.map((ref) => durationOf(ref)),
  ];

  // ---- the hot path: the statements `ops` runs ----
  const own = {
    *acquire(request: AcquireRequest, token: string): Operation<SqlRow[]> {
      const key = WalkResume.keyOf(request);
      const from = walks.from(key);
      const sentAt = monotonicNow();
      const rows = (yield {
        sql: from ? acquireResumed : acquireFromHead,
        params: [...acquireParams(request, token), ...resumeParams(from)],
        arrayRows: true,
      }).rows;
      const jobs = leased(rows, { owner: request.owner, token });
      return walked(key, request, from, monotonicNow() - sentAt, jobs);
    },
    *completeAndAcquire(
      done: readonly JobCompletion[],
      request: AcquireRequest,
      token: string,
      history: boolean,
    ): Operation<{ completed: string[]; rows: SqlRow[] }> {
      const doneIds = done.map((ref) => ref.id);
      const key = WalkResume.keyOf(request);
      const from = walks.from(key);
      const params = [
        ...acquireParams(request, token),
        arrayText(doneIds),
        arrayText(done.map((ref) => ref.token)),
        ...(history ? recordArrays(done) : []),
      ];
      // A resumed walk's parameters follow the statement's own.
      const sql = completeAndAcquireFast(history, from ? params.length + 1 : 0);
      const sentAt = monotonicNow();
      const rows = (yield { sql, params: [...params, ...resumeParams(from)], arrayRows: true })
        .rows;
      const lost = new Set(lostIds(rows));
      const jobs = leased(rows, { owner: request.owner, token });
      return {
        completed: doneIds.filter((id) => !lost.has(id)),
        rows: walked(key, request, from, monotonicNow() - sentAt, jobs),
      };
    },
    *acquireLimited(request: AcquireRequest, token: string): Operation<SqlRow[]> {
      const locked = (yield {
        sql: lockScopes,
        params: [request.limit, request.types, request.queues, request.tenants],
      }).rows[0]?.scopes;
      const rows = (yield {
        sql: acquireLocked,
        params: [...acquireParams(request, token), locked ?? []],
        arrayRows: true,
      }).rows;
      return leased(rows, { owner: request.owner, token }, 0);
    },
    *enqueueJobs(input: readonly NewJob[], notify: Query | null): Operation<EnqueueResult[]> {
      const results: (EnqueueResult | undefined)[] = new Array(input.length);
      const w = wake(notify, 20);
      // A job whose key is held gets the holder back; a holder that finished between our
      // insert and our read is inserted again (`insertKeyed`).
      yield* insertKeyed(
        input.map((_, i) => i),
        (i) => (input[i] as NewJob).key,
        function* (pending) {
          const batch = pending.map((i) => input[i] as NewJob);
          const keyed = batch.some((job) => job.key !== null);
          const rows = (yield {
            sql: insertBatch(keyed, w.sql),
            params: [...enqueueParams(batch), ...w.params],
          }).rows;
          // Ids follow input order, so inserted rows line up with the inputs that were inserted:
          // every job without a key, and the first job of each key no other row held.
          const insertedKeys = new Set(rows.map((row) => row.job_key).filter((k) => k !== null));
          const seenKeys = new Set<string>();
          const held: number[] = [];
          let n = 0;
          for (const i of pending) {
            const job = input[i] as NewJob;
            if (job.key === null || (insertedKeys.has(job.key) && !seenKeys.has(job.key))) {
              if (job.key !== null) seenKeys.add(job.key);
              results[i] = { job: decidedJob(job, rows[n++] as SqlRow), created: true };
            } else held.push(i);
          }
          if (held.length === 0) return [];
          const keys = [...new Set(held.map((i) => (input[i] as NewJob).key as string))];
          const holders = (yield {
            sql: `SELECT ${jobColumns()} FROM ${jobs} WHERE job_key = ANY($1::text[])`,
            params: [keys],
          }).rows;
          const byKey = new Map(holders.map((row) => [String(row.job_key), rowToJob(row)]));
          const again: number[] = [];
          for (const i of held) {
            const holder = byKey.get((input[i] as NewJob).key as string);
            if (holder) results[i] = { job: holder, created: false };
            else again.push(i);
          }
          return again;
        },
      );
      return results as EnqueueResult[];
    },

    *saveSteps(saves: readonly StepSave[]): Operation<string[]> {
      const saved = new Set(
        ids(
          (yield {
            sql: saveStepsSql,
            params: [
              arrayText(saves.map((save) => save.ref.id)),
              arrayText(saves.map((save) => save.ref.token)),
              saves.map((save) => save.stepsJson),
            ],
          }).rows,
        ),
      );
      return saves.filter((save) => !saved.has(save.ref.id)).map((save) => save.ref.id);
    },

    // ---- settlement ----
    *completeHeld(refs: readonly JobRef[]): Operation<string[]> {
      return ids((yield { sql: completeSql, params: refArrays(refs) }).rows);
    },
    *completeHeldWithHistory(done: readonly JobCompletion[]): Operation<string[]> {
      return ids(
        (yield {
          sql: completeWithHistorySql,
          params: [...refArrays(done), ...recordArrays(done)],
        }).rows,
      );
    },
    *failHeld(failures: readonly JobFailure[]): Operation<string[]> {
      const params = [
        ...refArrays(failures),
        failures.map((f) => f.deadletter),
        failures.map((f) => Math.max(0, f.retryDelayMs)),
        failures.map((f) => f.error.message),
        failures.map((f) => f.error.stack ?? null),
      ];
      return ids((yield { sql: failSql, params }).rows);
    },
    *releaseHeld(refs: readonly JobRef[], notify: Query | null): Operation<string[]> {
      // Released jobs are due at once (e.g. on shutdown): tell the other engines.
      const w = wake(notify, 3);
      return ids(
        (yield { sql: releaseSql(w.sql), params: [...refArrays(refs), ...w.params] }).rows,
      );
    },
    *renewHeld(
      owner: string,
      leaseMs: number,
      refs: readonly LeaseRenewalRef[],
    ): Operation<RenewAnswer> {
      const rows = (yield {
        sql: renewSql,
        params: [
          owner,
          leaseMs,
          ...refArrays(refs),
          refs.map((ref) => ref.progressJson ?? null),
          refs.some((ref) => ref.start !== undefined) ? refs.map((ref) => ref.start ?? null) : null,
          refs.some((ref) => ref.logsJson != null) ? refs.map((ref) => ref.logsJson ?? null) : null,
        ],
      }).rows;
      return {
        renewed: ids(rows),
        cancelRequested: ids(rows.filter((row) => row.cancel_requested)),
      };
    },
    *recoverExpiredLeases(limit: number, notify: Query | null): Operation<RecoverResult> {
      if (limit <= 0) return { requeued: [], deadlettered: [] };
      const w = wake(notify, 3);
      const rows = (yield {
        sql: recoverSql(w.sql),
        params: [limit, LEASE_EXPIRED_MESSAGE, ...w.params],
      }).rows.sort((a, b) => (BigInt(String(a.id)) < BigInt(String(b.id)) ? -1 : 1));
      return recoverResult(
        ids(rows.filter((row) => row.state === 'async' && !row.unstarted)),
        ids(rows.filter((row) => row.state === 'deadletter')),
        ids(rows.filter((row) => row.unstarted)),
      );
    },
  };
  const d: Dialect = {
    name: 'postgres',
    table,
    quote,
    sql: (text) => text,
    placeholders(sql) {
      let n = 0;
      return sql.replace(/\?/g, () => `$${++n}`);
    },
    now: NOW,
    nowPlusMs: `(${NOW_MS} + ?::float8 * interval '1 millisecond')`,
    TRUE: 'true',
    FALSE: 'false',
    time: (date) => date.toISOString(),
    bool: (value) => value,
    timeText: (expression) => expression,
    jsonText: (expression) => `${expression}::text`,
    jobColumns,
    scheduleColumns: selectList(SCHEDULE_COLUMN_NAMES, quote, { spec: (c) => `${c}::text` }),
    latestRead: '',
    // The planner's own estimate: rows per page at the last ANALYZE/VACUUM times today's pages.
    // reltuples is -1 (0 before PostgreSQL 14) until then: no estimate.
    estimateJobs: {
      sql: `SELECT CASE WHEN c.reltuples <= 0 OR c.relpages = 0 THEN NULL
          ELSE round(c.reltuples / c.relpages
            * (pg_relation_size(c.oid) / current_setting('block_size')::bigint)) END AS n
        FROM pg_class c WHERE c.oid = to_regclass(?)`,
      params: [jobs],
    },
    returning: true,
    lockSkipLocked: ' FOR UPDATE SKIP LOCKED',
    forUpdate: ' FOR UPDATE',
    acquisitionOrder: order,
    pairs: pairMarks,
    onConflictDoNothing: (column) => ` ON CONFLICT (${quote(column)}) DO NOTHING`,
    isDuplicateKey: (error) => driverCode(error) === '23505',
    isRetryable: (error) => RETRYABLE.has(driverCode(error) ?? ''),
    wakeQuery: (channel) => ({ sql: "SELECT pg_notify(?, '')", params: [channel] }),
    probeBeforeAcquire: false,
    correlatedLimit: true,
    arrayParam: (type) => `?::${type}[]`,
    recursiveSkipScan: true,

    // ---- schema ----
    migrations: loadMigrations(MIGRATION_FILES.postgres, {
      jobs,
      schedules: table('schedules'),
      history: table('history'),
      rate_limits: table('rate_limits'),
      followups: table('followups'),
      signals: table('signals'),
      qualifier,
      prefix: tablePrefix,
      channel: notifyChannel ?? `${schema ?? 'public'}_${tablePrefix}jobs`,
    }),
    setup: schema ? [`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`] : [],
    // @jobs/postgres 0.1 kept its versions in `<schema>.migrations` (version, name, applied_at):
    // they move to the version table, and the old table goes — only that exact table next to
    // our jobs table (another tool's `migrations` is left alone).
    *beforeMigrate(): Operation<void> {
      if (adoptSearchPath && schema) {
        const old = (name: string): string => quote(`${tablePrefix}${name}`);
        yield {
          sql: `DO $$ BEGIN
  IF to_regclass('${versionTable}') IS NULL AND to_regclass('${jobs}') IS NULL
     AND (SELECT array_agg(attname::text ORDER BY attname) FROM pg_attribute
          WHERE attrelid = to_regclass('${old('jobs_migrations')}') AND attnum > 0
            AND NOT attisdropped) = ARRAY['applied_at', 'version']
     AND EXISTS (SELECT 1 FROM pg_attribute
                 WHERE attrelid = to_regclass('${old('jobs')}') AND attname = 'lock_token') THEN
    ALTER TABLE ${old('jobs')} SET SCHEMA ${quote(schema)};
    ALTER TABLE IF EXISTS ${old('schedules')} SET SCHEMA ${quote(schema)};
    ALTER TABLE ${old('jobs_migrations')} SET SCHEMA ${quote(schema)};
  END IF;
END $$`,
          params: [],
        };
      }
      if (tablePrefix !== '') return;
      yield {
        sql: `DO $$ BEGIN
  IF to_regclass('${versionTable}') IS NULL
     AND (SELECT array_agg(attname::text ORDER BY attname) FROM pg_attribute
          WHERE attrelid = to_regclass('${qualifier}"migrations"') AND attnum > 0
            AND NOT attisdropped) = ARRAY['applied_at', 'name', 'version']
     AND EXISTS (SELECT 1 FROM pg_attribute
                 WHERE attrelid = to_regclass('${jobs}') AND attname = 'lock_token') THEN
    ${versionTableDdl};
    INSERT INTO ${versionTable} ("version", "applied_at")
      SELECT "version", "applied_at" FROM ${qualifier}"migrations";
    DROP TABLE ${qualifier}"migrations";
  END IF;
END $$`,
        params: [],
      };
    },
    versionTable: versionTableDdl,
    recordVersion: (migration: Migration): Query => ({
      sql: `INSERT INTO ${versionTable} ("version") VALUES (?)`,
      params: [migration.version],
    }),
    migrateLock: {
      // Transaction-scoped: released by the COMMIT that also makes the DDL visible.
      lock: [
        {
          sql: 'SELECT pg_advisory_xact_lock(hashtextextended(?, 0))',
          params: [`${jobs}:migrate`],
        },
      ],
      unlock: [],
      transactional: true,
    },
    historyLock: {
      // Transaction-scoped: the pruning batch's COMMIT releases it.
      take: {
        sql: 'SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS got',
        params: [`${jobs}:history-prune`],
      },
      release: [],
    },
    historyPartitions: {
      partitionMs: HISTORY_PARTITION_MS,
      // One call of the function migration 0018 made: it creates and drops the partitions.
      *dropBefore(retentionMs) {
        const { rows } = yield {
          sql: `SELECT ${qualifier}${quote(`${tablePrefix}jobs_history_maintain`)}(${NOW_MS} + ?::float8 * interval '1 millisecond') AS dropped`,
          params: [-retentionMs],
        };
        return Number(rows[0]?.dropped ?? 0);
      },
    },
    ops: {
      enqueue: { run: (c, jobs) => own.enqueueJobs(jobs, c.notify), transaction: false },
      acquire: { run: (_, request, token) => own.acquire(request, token), transaction: false },
      // Its own transaction: the per-scope locks last until it ends.
      acquireLocked: {
        run: (_, request, token) => own.acquireLimited(request, token),
        transaction: true,
      },
      completeAndAcquire: {
        run: (_, done, request, token, history) =>
          own.completeAndAcquire(done, request, token, history),
        transaction: false,
      },
      // One statement each (history records included): atomic without a transaction.
      complete: { run: (_, refs) => own.completeHeld(refs), transaction: false },
      completeWithHistory: {
        run: (_, done) => own.completeHeldWithHistory(done),
        transaction: false,
      },
      fail: { run: (_, failures) => own.failHeld(failures), transaction: false },
      release: { run: (c, refs) => own.releaseHeld(refs, c.notify), transaction: false },
      renew: {
        run: (_, owner, leaseMs, refs) => own.renewHeld(owner, leaseMs, refs),
        transaction: false,
      },
      recover: { run: (c, limit) => own.recoverExpiredLeases(limit, c.notify), transaction: false },
      // One statement for the batch.
      saveSteps: { run: (_, saves) => own.saveSteps(saves), transaction: false },
    },
  };
  return d;
}

/**
 * The 18 columns of a batch insert, in `insertBatch`'s order: an array each, or null for a
 * column no job of the batch sets (`ROWS FROM` pads it with nulls), and the payloads as one JSON
 * array. Both spare the driver escaping every element of every array, the bulk of a batch's
 * cost on the client.
 */
function enqueueParams(jobs: readonly NewJob[]): unknown[] {
  const col = <T>(f: (job: NewJob) => T): T[] | null => {
    const values = jobs.map(f);
    return values.every((value) => value === null || value === undefined) ? null : values;
  };
  return [
    col((j) => j.type),
    `[${jobs.map((j) => payloadJson(j.payload)).join(',')}]`,
    col((j) => j.priority),
    col((j) => (j.dueAt ? j.dueAt.toISOString() : null)),
    col((j) => j.delayMs),
    col((j) => j.retries),
    col((j) => j.scope),
    col((j) => isLimited(j)),
    col((j) => j.key),
    col((j) => j.tenantId),
    col((j) => j.queue),
    col((j) => (j.retryPolicy ? JSON.stringify(j.retryPolicy) : null)),
    col((j) => j.schedule),
    col((j) => (j.occurrence ? j.occurrence.toISOString() : null)),
    col((j) => (j.shard ? j.shard.index : null)),
    col((j) => (j.shard ? j.shard.count : null)),
    col((j) => (j.meta ? JSON.stringify(j.meta) : null)),
    col((j) => storedScopeLimit(j)),
    col((j) => j.timeoutMs ?? null),
  ];
}

/** A timestamptz column as epoch milliseconds (float8). */
function epochMs(column: string): string {
  return `(extract(epoch FROM ${column}) * 1000)::float8`;
}

/**
 * The job just inserted: what the caller sent plus what the database decided (id, state, due
 * and creation time) — reading whole rows back from a bulk insert costs more than the insert.
 */
function decidedJob(job: NewJob, decided: SqlRow): Job {
  return insertedJob(job, {
    id: String(decided.id),
    state: decided.state === 'timer' ? 'timer' : 'async',
    dueAt: readTime(decided.due_at),
    createdAt: readTime(decided.created_at),
  });
}

// ─── resumed walks ───────────────────────────────────────────────────────────────────────────────
/*
 * Resuming PostgreSQL's acquisition walk after the last job it leased, while walking from the
 * head is slow (issue: long transactions beside the queue; `pnpm bench long-tx`).
 *
 * Every acquisition walks `jobs_acquire` from its head. A job leased or finished leaves its old
 * row version's entry there until vacuum removes it, and while a transaction holds the server's
 * xmin horizon (an idle `BEGIN` in a console, a REPEATABLE READ reader) nothing can be removed:
 * each walk visits every row version dead since, so its cost grows with the jobs run since the
 * horizon was taken, and throughput falls with it.
 *
 * So when a walk from the head was slow (`walkResumeTuning`: 25 ms, and 150 µs a job) for a full
 * batch of at least `minResumeBatch` jobs, the next walks start where it ended: higher priorities from the
 * head of theirs, then the priority of the last job it leased from that job's due time on — an
 * index condition, so the dead entries before it are not visited — then lower priorities.
 * The head is walked again after ten times its own last duration (within 0.1–5 s), and
 * resuming stops as soon as it does not pay: a resumed walk that is not at least twice as fast
 * per job as the last walk from the head (a machine slow for every statement, not a walk over
 * dead entries).
 *
 * What it can cost: a job that became acquirable behind the resume point — of the same
 * priority and due before it (enqueued by a transaction that committed late, given back) — waits
 * for the next walk from the head: at most `headEveryMaxMs` (5 s). It never takes a job the walk
 * from the head would not: same filters, same locks, same lease; it only starts later in the
 * acquisition order. A quick walk from the head is never resumed.
 */

/**
 * When walks resume. Tests lower `slowHeadMs`, `slowHeadMsPerJob` and `minResumeBatch` and raise
 * `resumedCostAtMost` to make every walk resume, which a quick machine with few dead row
 * versions never does.
 */
export const walkResumeTuning = {
  /**
   * A walk from the head slower than this (ms), and than `slowHeadMsPerJob` a job leased, for a
   * full batch is resumed next time.
   */
  slowHeadMs: 25,
  /**
   * A statement that walks from the head and leases costs 15–90 µs a job on a busy 2-core
   * machine; one that also visits the dead entries of the jobs run since a held horizon costs
   * 150 µs a job after a minute of it, 600 µs after five.
   */
  slowHeadMsPerJob: 0.15,
  /** The smallest full batch whose walk is resumed (a few jobs are never worth reordering). */
  minResumeBatch: 100,
  /** The head is walked again after this many times its last duration… */
  headEveryFactor: 10,
  /** …but never sooner than this (ms)… */
  headEveryMinMs: 100,
  /** …nor later: the longest a job behind the resume point waits for a walk from the head. */
  headEveryMaxMs: 5_000,
  /** A resumed walk goes on while it costs at most this share per job of the walk from the head. */
  resumedCostAtMost: 0.5,
};
/** The least time between two `onResumed` calls of one store. */
export const RESUMED_NOTICE_EVERY_MS = 10 * 60_000;
/** Walks remembered per store: one per engine and filter. */
const MAX_WALKS = 64;

/** Where a resumed walk starts: the priority of the last job leased, and its due time. */
export interface ResumePoint {
  priority: number;
  dueMs: number;
}

interface Walk {
  /** When the last walk from the head ran (`now()`), how long it took, and the jobs it leased. */
  headAt: number;
  headMs: number;
  headJobs: number;
  from: ResumePoint | null;
}

/**
 * What a store hears when a resumed walk has paid (at most every `RESUMED_NOTICE_EVERY_MS`): the
 * last walk from the head, its ms and jobs, and the resumed one's.
 */
export type ResumedNotice = (
  head: { ms: number; jobs: number },
  resumed: { ms: number; jobs: number },
) => void;

/** The walks of one store (see the file comment). `now` is injectable for tests. */
export class WalkResume {
  private readonly walks = new Map<string, Walk>();
  private noticedAt: number | null = null;

  constructor(
    private readonly now: () => number = monotonicNow,
    private readonly onResumed: ResumedNotice | null = null,
  ) {}

  /** The walk an acquisition request belongs to: its engine and its filters. */
  static keyOf(request: AcquireRequest): string {
    return JSON.stringify([request.owner, request.types, request.queues, request.tenants]);
  }

  /** Where the next walk of `key` starts; null: from the head. */
  from(key: string): ResumePoint | null {
    const walk = this.walks.get(key);
    if (!walk?.from) return null;
    const { headEveryFactor, headEveryMinMs, headEveryMaxMs } = walkResumeTuning;
    const every = Math.min(headEveryMaxMs, Math.max(headEveryMinMs, walk.headMs * headEveryFactor));
    return this.now() - walk.headAt < every ? walk.from : null;
  }

  /**
   * A walk from the head took `ms` and leased `leased` of the `limit` asked for. A slow one is
   * resumed after its last job when it filled a batch of at least `minResumeBatch`; a slow one
   * that came up short (it found every due job) keeps resuming walks already resumed, from its
   * own last job if it leased any.
   */
  walkedHead(key: string, ms: number, leased: readonly SqlRow[], limit: number): void {
    const before = this.walks.get(key);
    if (!before && this.walks.size >= MAX_WALKS) this.walks.clear();
    let from: ResumePoint | null = null;
    const { slowHeadMs, slowHeadMsPerJob } = walkResumeTuning;
    if (ms >= slowHeadMs && ms >= slowHeadMsPerJob * Math.max(1, leased.length)) {
      if (leased.length === limit && limit >= walkResumeTuning.minResumeBatch) {
        from = lastLeased(leased);
      } else if (before?.from) {
        from = lastLeased(leased) ?? before.from;
      }
    }
    this.walks.set(key, {
      headAt: this.now(),
      headMs: ms,
      headJobs: leased.length,
      from,
    });
  }

  /**
   * A resumed walk took `ms` and leased `leased`: it goes on from its last job while it costs
   * at most half as much per job as the last walk from the head. One that leased nothing
   * (nothing due after the point) leaves the point where it is.
   */
  walkedOn(key: string, ms: number, leased: readonly SqlRow[]): void {
    const walk = this.walks.get(key);
    if (!walk || leased.length === 0) return;
    const headMsPerJob = walk.headMs / Math.max(1, walk.headJobs);
    const pays = ms / leased.length <= headMsPerJob * walkResumeTuning.resumedCostAtMost;
    walk.from = pays ? lastLeased(leased) : null;
    const now = this.now();
    if (
      pays &&
      this.onResumed &&
      (this.noticedAt === null || now - this.noticedAt >= RESUMED_NOTICE_EVERY_MS)
    ) {
      this.noticedAt = now;
      this.onResumed({ ms: walk.headMs, jobs: walk.headJobs }, { ms, jobs: leased.length });
    }
  }
}

/**
 * The last of `leased` in acquisition order (priority descending, then due time): the lowest
 * priority, and of those the latest due time.
 */
function lastLeased(leased: readonly SqlRow[]): ResumePoint | null {
  let last: ResumePoint | null = null;
  for (const row of leased) {
    const priority = Number(row.priority);
    const dueMs = Number(row.due_at);
    if (!Number.isFinite(priority) || !Number.isFinite(dueMs)) return null;
    if (!last || priority < last.priority || (priority === last.priority && dueMs > last.dueMs)) {
      last = { priority, dueMs };
    }
  }
  return last;
}
