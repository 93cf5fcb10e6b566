/**
 * The SQL text of @jobs/sqlite, one entry per operation, for a given table prefix.
 *
 * Conventions: times are INTEGER epoch ms and every statement gets the caller's single `@now`
 * read; lists (types, queues, job refs, failures, new rows) travel as ONE JSON parameter read
 * with `json_each`, so a batch of any size is one statement.
 */
import { INSERT_JOB_COLUMNS } from '@jobs/core';

/** Waiting states: the only ones acquisition and suspension look at. */
const WAITING = `('timer', 'async')`;

/** `@types` / `@queues` / `@tenants` filters of an acquire request, on alias `j`. */
const REQUEST_FILTER = `
      j.type IN (SELECT value FROM json_each(@types))
  AND (@queues IS NULL OR j.queue IN (SELECT value FROM json_each(@queues)))
  AND (@tenants IS NULL OR j.tenant_id IN (SELECT value FROM json_each(@tenants)))`;

/** Rows of a JSON array `[[id, token], ...]` as (id, token). */
const REFS = `(SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS id,
                 json_extract(value, '$[1]') AS token
            FROM json_each(@refs))`;

const CLEAR_LOCK = 'lock_owner = NULL, lock_expires_at = NULL, lock_token = NULL';

export interface SqliteStatements {
  insertJob: string;
  insertJobs: string;
  jobsByKeys: string;
  anyDue: string;
  acquire: string;
  complete: string;
  fail: string;
  release: string;
  renew: string;
  recover: string;
  nextDueAt: string;
  getJob: string;
  deleteJob: string;
  retryDeadletter: string;
  stats: string;
  saveSchedule: string;
  getSchedule: string;
  listSchedules: string;
  deleteSchedule: string;
  setSchedulePaused: string;
  dueSchedules: string;
  scheduleBusy: string;
  settleFire: string;
  dataVersion: string;
}

export function sqliteStatements(prefix: string): SqliteStatements {
  const jobs = `${prefix}jobs`;
  const schedules = `${prefix}schedules`;
  const columns = INSERT_JOB_COLUMNS.join(', ');
  const extracts = INSERT_JOB_COLUMNS.map((_, i) => `json_extract(value, '$[${i}]')`).join(', ');

  return {
    // One INSERT for a whole batch; rows go in array order (ORDER BY key), so the ids they get
    // follow input order. `WHERE true` is SQLite's required disambiguation for an upsert on
    // INSERT … SELECT. DO NOTHING: a held key inserts nothing (the caller reads the holder).
    insertJobs: `INSERT INTO ${jobs} (${columns})
      SELECT ${extracts} FROM json_each(@rows) WHERE true ORDER BY key
      ON CONFLICT DO NOTHING
      RETURNING *`,

    // The common single-job enqueue, without the JSON round trip.
    insertJob: `INSERT INTO ${jobs} (${columns})
      VALUES (${INSERT_JOB_COLUMNS.map(() => '?').join(', ')})
      ON CONFLICT DO NOTHING
      RETURNING *`,

    jobsByKeys: `SELECT * FROM ${jobs} WHERE job_key IN (SELECT value FROM json_each(@keys))`,

    // A superset of what `acquire` takes, read without the write lock: when it finds nothing,
    // an acquisition need not take the lock at all.
    anyDue: `SELECT 1 FROM ${jobs} AS j
      WHERE j.state IN ${WAITING} AND j.due_at <= @now AND ${REQUEST_FILTER}
      LIMIT 1`,

    // Exclusive rule, in SQL: an exclusive job qualifies only when (a) no exclusive job of its
    // scope runs with a live lease and (b) no due waiting exclusive job of its scope comes first
    // in acquisition order (of ANY type/queue: order is per scope). So a batch never holds two
    // jobs of one scope, and a scope's jobs start in order.
    acquire: `UPDATE ${jobs}
      SET state = 'running', lock_owner = @owner, lock_expires_at = @now + @leaseMs,
          lock_token = @token, attempts = attempts + 1
      WHERE id IN (
        SELECT j.id FROM ${jobs} AS j
        WHERE j.state IN ${WAITING} AND j.due_at <= @now AND ${REQUEST_FILTER}
          AND (j.exclusive = 0 OR j.scope IS NULL OR (
            NOT EXISTS (
              SELECT 1 FROM ${jobs} AS r
              WHERE r.exclusive = 1 AND r.scope = j.scope AND r.state = 'running'
                AND r.lock_expires_at > @now)
            AND NOT EXISTS (
              SELECT 1 FROM ${jobs} AS w
              WHERE w.exclusive = 1 AND w.scope = j.scope AND w.state IN ${WAITING}
                AND w.due_at <= @now
                AND (w.priority > j.priority OR (w.priority = j.priority
                  AND (w.due_at < j.due_at OR (w.due_at = j.due_at AND w.id < j.id)))))))
        ORDER BY j.priority DESC, j.due_at, j.id
        LIMIT @limit)
      RETURNING *`,

    complete: `DELETE FROM ${jobs} WHERE id IN (
        SELECT j.id FROM ${REFS} AS r JOIN ${jobs} AS j ON j.id = r.id AND j.lock_token = r.token
        WHERE j.state = 'running')
      RETURNING id`,

    // @failures: [[id, token, deadletter 0/1, retryDelayMs, message, stack], ...]
    fail: `UPDATE ${jobs}
      SET state = CASE WHEN f.deadletter THEN 'deadletter' ELSE 'timer' END,
          due_at = CASE WHEN f.deadletter THEN ${jobs}.due_at ELSE @now + f.delay END,
          retries_left = CASE WHEN f.deadletter THEN ${jobs}.retries_left
                              ELSE ${jobs}.retries_left - 1 END,
          ${CLEAR_LOCK}, last_error_message = f.message, last_error_stack = f.stack
      FROM (SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS id,
                   json_extract(value, '$[1]') AS token,
                   json_extract(value, '$[2]') AS deadletter,
                   json_extract(value, '$[3]') AS delay,
                   json_extract(value, '$[4]') AS message,
                   json_extract(value, '$[5]') AS stack
              FROM json_each(@failures)) AS f
      WHERE ${jobs}.id = f.id AND ${jobs}.lock_token = f.token AND ${jobs}.state = 'running'
      RETURNING id`,

    release: `UPDATE ${jobs}
      SET state = 'async', attempts = attempts - 1, ${CLEAR_LOCK}
      FROM ${REFS} AS r
      WHERE ${jobs}.id = r.id AND ${jobs}.lock_token = r.token AND ${jobs}.state = 'running'
      RETURNING id`,

    // Allowed after expiry as long as the token still matches: nobody else has taken the job.
    renew: `UPDATE ${jobs}
      SET lock_expires_at = @now + @leaseMs
      FROM ${REFS} AS r
      WHERE ${jobs}.id = r.id AND ${jobs}.lock_token = r.token AND ${jobs}.state = 'running'
        AND ${jobs}.lock_owner = @owner
      RETURNING id`,

    // The expiry condition is repeated in the UPDATE itself, not only in the id subquery.
    recover: `UPDATE ${jobs}
      SET state = CASE WHEN retries_left > 0 THEN 'async' ELSE 'deadletter' END,
          retries_left = CASE WHEN retries_left > 0 THEN retries_left - 1 ELSE retries_left END,
          ${CLEAR_LOCK}, last_error_message = @message, last_error_stack = NULL
      WHERE id IN (
          SELECT id FROM ${jobs} WHERE state = 'running' AND lock_expires_at <= @now
          ORDER BY lock_expires_at, id LIMIT @limit)
        AND state = 'running' AND lock_expires_at <= @now
      RETURNING id, state`,

    nextDueAt: `SELECT MIN(j.due_at) FROM ${jobs} AS j
      WHERE j.state IN ${WAITING} AND ${REQUEST_FILTER}`,

    getJob: `SELECT * FROM ${jobs} WHERE id = @id`,
    deleteJob: `DELETE FROM ${jobs} WHERE id = @id`,
    retryDeadletter: `UPDATE ${jobs}
      SET state = 'async', due_at = @now, retries_left = @retries, ${CLEAR_LOCK}
      WHERE id = @id AND state = 'deadletter'
      RETURNING *`,
    stats: `SELECT type, state, COUNT(*) AS count FROM ${jobs} GROUP BY type, state ORDER BY type, state`,

    // One statement, so the version check and the write are atomic. @checked: an expected version
    // was given; @expected: null (create only) or the version an update requires. A numeric
    // @expected never inserts; a failed check returns no row.
    saveSchedule: `INSERT INTO ${schedules}
        (name, spec, next_at, paused, pending_misfire, skipped, fired, version, created_at, updated_at)
      SELECT @name, @spec, @nextAt, 0, 0, 0, 0, 1, @now, @now
      WHERE @expected IS NULL OR EXISTS (SELECT 1 FROM ${schedules} WHERE name = @name)
      ON CONFLICT (name) DO UPDATE SET
        spec = excluded.spec, next_at = excluded.next_at, updated_at = excluded.updated_at,
        version = version + 1,
        fired = CASE WHEN @reset THEN 0 ELSE fired END,
        skipped = CASE WHEN @reset THEN 0 ELSE skipped END,
        pending_misfire = CASE WHEN @reset THEN 0 ELSE pending_misfire END
      WHERE @checked = 0 OR version = @expected
      RETURNING *`,
    getSchedule: `SELECT * FROM ${schedules} WHERE name = @name`,
    listSchedules: `SELECT * FROM ${schedules} ORDER BY name`,
    deleteSchedule: `DELETE FROM ${schedules} WHERE name = @name`,
    setSchedulePaused: `UPDATE ${schedules}
      SET paused = @paused, version = version + 1, updated_at = @now
      WHERE name = @name
      RETURNING *`,
    dueSchedules: `SELECT * FROM ${schedules}
      WHERE paused = 0 AND ((next_at IS NOT NULL AND next_at <= @now) OR pending_misfire = 1)
      ORDER BY next_at IS NULL, next_at, name
      LIMIT @limit`,
    scheduleBusy: `SELECT EXISTS (SELECT 1 FROM ${jobs}
      WHERE schedule_name = @name AND state IN ('timer', 'async', 'running'))`,
    // Compare-and-set on the version: a fire that read an old version changes nothing.
    settleFire: `UPDATE ${schedules}
      SET next_at = @nextAt, version = version + 1, updated_at = @now,
          skipped = skipped + @skipped, fired = fired + @fired,
          pending_misfire = COALESCE(@pendingMisfire, pending_misfire)
      WHERE name = @name AND version = @version
      RETURNING *`,

    dataVersion: 'PRAGMA data_version',
  };
}
