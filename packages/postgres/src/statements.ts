/**
 * The SQL text of the PostgreSQL store, built once per schema. Hot-path statements run as named
 * prepared statements (see `PostgresJobStore`), so each is parsed and planned once per
 * connection.
 *
 * Time: every comparison uses `statement_timestamp()` — the database clock at the start of the
 * statement, also inside a longer transaction (where `now()` would be the transaction's start).
 */
import { INSERT_JOB_COLUMNS } from '@jobs/core';

/** Database "now" used by every statement. */
const NOW = 'statement_timestamp()';
/**
 * "Now" for due times we write, cut to the millisecond: columns hold milliseconds, and rounding
 * half a millisecond up would make a job enqueued "now" not yet due for the next statement.
 */
export const NOW_MS = `date_trunc('milliseconds', ${NOW})`;

export interface Statements {
  enqueue: string;
  enqueueKeyed: string;
  acquireFast: string;
  completeAndAcquireFast: string;
  lockExclusiveScopes: string;
  acquireLocked: string;
  complete: string;
  fail: string;
  release: string;
  renew: string;
  recover: string;
  nextDueAt: string;
}

/**
 * Acquisition filter shared by the candidate scan and the "is there exclusive work" probe:
 * by default `$4` types, `$5` queues (null = all), `$6` tenants (null = all).
 */
function matchesRequest(a: string, types = 4, queues = 5, tenants = 6): string {
  return `${a}.state IN ('timer', 'async') AND ${a}.due_at <= ${NOW}
      AND ${a}.type = ANY($${types}::text[])
      AND ($${queues}::text[] IS NULL OR ${a}.queue = ANY($${queues}::text[]))
      AND ($${tenants}::text[] IS NULL OR ${a}.tenant_id = ANY($${tenants}::text[]))`;
}

export function buildStatements(schema: string): Statements {
  const jobs = `"${schema}".jobs`;
  const insertColumns = INSERT_JOB_COLUMNS.join(', ');

  /**
   * An exclusive candidate `j` may start only when no exclusive job of its scope holds a live
   * lease and no other due waiting exclusive job of its scope (of any type) comes before it.
   * Decides only while this transaction holds the scope's advisory lock (see `acquireLocked`);
   * elsewhere it is a hint for picking the path and the scopes to lock.
   */
  const scopeHeadIsFree = `NOT EXISTS (
        SELECT 1 FROM ${jobs} r
        WHERE r.scope = j.scope AND r.exclusive AND r.state = 'running'
          AND r.lock_expires_at > ${NOW})
      AND NOT EXISTS (
        SELECT 1 FROM ${jobs} w
        WHERE w.scope = j.scope AND w.exclusive AND w.state IN ('timer', 'async')
          AND w.due_at <= ${NOW}
          AND (w.priority > j.priority OR (w.priority = j.priority
               AND (w.due_at < j.due_at OR (w.due_at = j.due_at AND w.id < j.id)))))`;

  // $1 owner, $2 limit, $3 lease ms, $4 types, $5 queues, $6 tenants, $7 token.
  const leaseUpdate = `acq AS (
    UPDATE ${jobs} j
    SET state = 'running', lock_owner = $1, lock_token = $7,
        lock_expires_at = ${NOW} + $3::float8 * interval '1 millisecond',
        attempts = j.attempts + 1
    FROM cand WHERE j.id = cand.id
    RETURNING j.*)`;

  /**
   * The fast path never takes an exclusive job: exclusive jobs need the scope lock (see
   * `acquireLocked`). When an exclusive job could start (it heads a free scope on this
   * snapshot) it takes nothing at all and says so, so the caller runs the locked path and
   * acquisition order (priority first) holds across both. Scopes blocked by a running job keep
   * the fast path; a stale snapshot at worst leaves a free scope for the next acquisition.
   */
  const fastCandidates = `ex AS (
    SELECT EXISTS (
      SELECT 1 FROM ${jobs} j
      WHERE j.exclusive AND j.scope IS NOT NULL AND ${matchesRequest('j')}
        AND ${scopeHeadIsFree}) AS needs_exclusive),
  cand AS (
    SELECT j.id FROM ${jobs} j
    WHERE ${matchesRequest('j')}
      AND NOT (j.exclusive AND j.scope IS NOT NULL)
      AND NOT (SELECT needs_exclusive FROM ex)
    ORDER BY j.priority DESC, j.due_at, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED)`;

  const acquireFast = `WITH ${fastCandidates},
  ${leaseUpdate}
  SELECT ex.needs_exclusive, acq.* FROM ex LEFT JOIN acq ON true`;

  // $8 ids, $9 tokens of finished jobs; they are deleted in the same statement.
  const completeAndAcquireFast = `WITH done AS (
    DELETE FROM ${jobs} j
    USING unnest($8::bigint[], $9::text[]) AS d(id, token)
    WHERE j.id = d.id AND j.lock_token = d.token AND j.state = 'running'
    RETURNING j.id),
  ${fastCandidates},
  ${leaseUpdate}
  SELECT ex.needs_exclusive,
         (SELECT array_agg(d.id::text) FROM unnest($8::bigint[]) AS d(id)
          WHERE d.id NOT IN (SELECT id FROM done)) AS lost_ids,
         acq.*
  FROM ex LEFT JOIN acq ON true`;

  /**
   * Step 1 of the locked path (inside a transaction): try-lock the scopes of the first due
   * exclusive candidates. A scope lock is held until commit, so everyone who decides about a
   * scope does so one after the other — and each decides on a snapshot taken after the previous
   * holder committed (step 2 is a new statement, so READ COMMITTED gives it a new snapshot).
   * $1 limit, $2 types, $3 queues, $4 tenants.
   */
  const lockExclusiveScopes = `SELECT coalesce(array_agg(c.scope), '{}') AS scopes
  FROM (
    -- Heads of free scopes on this snapshot, best first (at most one row per scope). A stale
    -- snapshot can only make us lock too few scopes; step 2 re-decides under the locks.
    SELECT j.scope FROM ${jobs} j
    WHERE j.exclusive AND j.scope IS NOT NULL AND ${matchesRequest('j', 2, 3, 4)}
      AND ${scopeHeadIsFree}
    ORDER BY j.priority DESC, j.due_at, j.id
    LIMIT $1) c
  WHERE pg_try_advisory_xact_lock(hashtext('${schema}.jobs'), hashtext(c.scope))`;

  // Step 2: $8 = scopes locked in step 1.
  const acquireLocked = `WITH cand AS (
    SELECT j.id FROM ${jobs} j
    WHERE ${matchesRequest('j')}
      AND (NOT (j.exclusive AND j.scope IS NOT NULL)
           OR (j.scope = ANY($8::text[]) AND ${scopeHeadIsFree}))
    ORDER BY j.priority DESC, j.due_at, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED),
  ${leaseUpdate}
  SELECT acq.* FROM acq`;

  /**
   * Inserts a batch in input order (ids follow it) with one NOTIFY. `keyed`: some jobs have a
   * unique key, so conflicts return nothing for them (the caller reads the holders); without
   * keys the plain INSERT skips the cost of speculative insertion.
   */
  const insertJobs = (keyed: boolean): string => `WITH input AS (
    SELECT * FROM unnest(
      $1::text[], $2::jsonb[], $3::int[], $4::timestamptz[], $5::float8[], $6::int[],
      $7::text[], $8::bool[], $9::text[], $10::text[], $11::text[], $12::jsonb[],
      $13::text[], $14::timestamptz[], $15::int[], $16::int[]) WITH ORDINALITY
      AS i(type, payload, priority, due_given, delay_ms, retries, scope, exclusive, job_key,
           tenant_id, queue, retry_policy, schedule_name, occurrence, shard_index, shard_count,
           ord)),
  due AS (
    SELECT i.*, coalesce(i.due_given, ${NOW_MS}) + i.delay_ms * interval '1 millisecond' AS due_at
    FROM input i),${
      keyed
        ? `
  -- Two batches inserting the same keys in opposite orders would deadlock on the unique index
  -- (each waits for the other's uncommitted key). Taking the keys' advisory locks first, in
  -- sorted order, makes the second batch wait for the first and then find its jobs.
  key_locks AS (
    SELECT count(*) AS n FROM (
      SELECT pg_advisory_xact_lock(hashtext('${schema}.jobs.key'), hashtext(k.job_key))
      FROM (SELECT DISTINCT job_key FROM input WHERE job_key IS NOT NULL ORDER BY job_key) k) l),`
        : ''
    }
  ins AS (
    INSERT INTO ${jobs} (${insertColumns})
    SELECT type, payload, CASE WHEN due_at > ${NOW} THEN 'timer' ELSE 'async' END, priority,
           due_at, retries, 0, scope, exclusive, job_key, tenant_id, queue, ${NOW},
           retry_policy, schedule_name, occurrence, shard_index, shard_count
    FROM due${keyed ? ' WHERE (SELECT n FROM key_locks) IS NOT NULL' : ''} ORDER BY ord${
      keyed ? '\n    ON CONFLICT (job_key) WHERE job_key IS NOT NULL DO NOTHING' : ''
    }
    -- Only what the database decided; the rest of each job is what the caller sent. Times as
    -- epoch milliseconds: cheaper to read than timestamp text, exact for timestamptz(3).
    RETURNING id, job_key, state,
      (extract(epoch FROM due_at) * 1000)::float8 AS due_at,
      (extract(epoch FROM created_at) * 1000)::float8 AS created_at)
  -- One notification per statement, inside the caller's transaction: delivered on commit only.
  SELECT ins.*, (SELECT 1 FROM pg_notify($17, '')) AS notified FROM ins ORDER BY ins.id`;
  const enqueue = insertJobs(false);
  const enqueueKeyed = insertJobs(true);

  const complete = `DELETE FROM ${jobs} j
  USING unnest($1::bigint[], $2::text[]) AS d(id, token)
  WHERE j.id = d.id AND j.lock_token = d.token AND j.state = 'running'
  RETURNING j.id::text AS id`;

  const fail = `UPDATE ${jobs} j
  SET state = CASE WHEN f.deadletter THEN 'deadletter' ELSE 'timer' END,
      due_at = CASE WHEN f.deadletter THEN j.due_at
                    ELSE ${NOW_MS} + f.delay_ms * interval '1 millisecond' END,
      retries_left = CASE WHEN f.deadletter THEN j.retries_left ELSE j.retries_left - 1 END,
      lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL,
      last_error_message = f.message, last_error_stack = f.stack
  FROM unnest($1::bigint[], $2::text[], $3::bool[], $4::float8[], $5::text[], $6::text[])
       AS f(id, token, deadletter, delay_ms, message, stack)
  WHERE j.id = f.id AND j.lock_token = f.token AND j.state = 'running'
  RETURNING j.id::text AS id`;

  // Released jobs are due at once: tell other engines ($3 = channel), e.g. on shutdown.
  const release = `WITH released AS (
    UPDATE ${jobs} j
    SET state = 'async', attempts = j.attempts - 1,
        lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL
    FROM unnest($1::bigint[], $2::text[]) AS r(id, token)
    WHERE j.id = r.id AND j.lock_token = r.token AND j.state = 'running'
    RETURNING j.id::text AS id)
  SELECT released.id, (SELECT 1 FROM pg_notify($3, '')) AS notified FROM released`;

  // Allowed after expiry as long as the token still matches: nobody else took the job.
  const renew = `UPDATE ${jobs} j
  SET lock_expires_at = ${NOW} + $2::float8 * interval '1 millisecond'
  FROM unnest($3::bigint[], $4::text[]) AS r(id, token)
  WHERE j.id = r.id AND j.lock_token = r.token AND j.lock_owner = $1 AND j.state = 'running'
  RETURNING j.id::text AS id`;

  // The expiry condition is re-checked on the latest row version after the row lock
  // (EvalPlanQual), so a renew or complete that commits first wins.
  const recover = `WITH expired AS (
    SELECT id FROM ${jobs}
    WHERE state = 'running' AND lock_expires_at <= ${NOW}
    ORDER BY lock_expires_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED),
  recovered AS (
    UPDATE ${jobs} j
    SET state = CASE WHEN j.retries_left > 0 THEN 'async' ELSE 'deadletter' END,
        retries_left = CASE WHEN j.retries_left > 0 THEN j.retries_left - 1 ELSE j.retries_left END,
        lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL,
        last_error_message = $2, last_error_stack = NULL
    FROM expired
    WHERE j.id = expired.id AND j.state = 'running' AND j.lock_expires_at <= ${NOW}
    RETURNING j.id::text AS id, j.state)
  -- Requeued jobs are acquirable again: wake every engine, not only the one that recovered them.
  SELECT recovered.id, recovered.state,
         (SELECT 1 FROM pg_notify($3, '')
          WHERE EXISTS (SELECT 1 FROM recovered r WHERE r.state = 'async')) AS notified
  FROM recovered`;

  const nextDueAt = `SELECT min(due_at) AS due_at FROM ${jobs}
  WHERE state IN ('timer', 'async') AND type = ANY($1::text[])
    AND ($2::text[] IS NULL OR queue = ANY($2::text[]))
    AND ($3::text[] IS NULL OR tenant_id = ANY($3::text[]))`;

  return {
    enqueue,
    enqueueKeyed,
    acquireFast,
    completeAndAcquireFast,
    lockExclusiveScopes,
    acquireLocked,
    complete,
    fail,
    release,
    renew,
    recover,
    nextDueAt,
  };
}
