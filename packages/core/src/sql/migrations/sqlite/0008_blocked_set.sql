-- SQLite schema, version 8: the state `blocked`, a limited job that is due but waits for a free
-- slot of its full scope. It stays out of the acquisition indexes (partial on
-- `state IN ('timer', 'async')`), so a full scope's backlog costs the acquisition walk nothing;
-- a suspended blocked job remembers it in `suspended_from`. Never edit after release: add a
-- later file instead. `{{prefix}}` is the validated table prefix.
--
-- SQLite cannot change a CHECK in place, so the jobs table is rebuilt by SQLite's procedure
-- (create, copy, drop, rename, then its indexes again), inside the migration's one BEGIN
-- IMMEDIATE transaction: the same columns in the same order with the same types and defaults
-- (0002's table, then 0005–0007's columns), rows, ids and AUTOINCREMENT mark. No table of the
-- store refers to this one, so foreign keys need not be turned off (nor can they be inside a
-- transaction).

-- "id" is quoted because TypeORM finds an AUTOINCREMENT column only by its quoted name.
CREATE TABLE {{prefix}}jobs_v8 (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  type TEXT NOT NULL,
  payload TEXT NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('timer', 'async', 'running', 'deadletter', 'suspended', 'blocked')),
  priority INTEGER NOT NULL DEFAULT 0,
  due_at INTEGER NOT NULL,
  retries_left INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  scope TEXT,
  exclusive INTEGER NOT NULL DEFAULT 0,
  job_key TEXT,
  tenant_id TEXT,
  queue TEXT NOT NULL,
  last_error_message TEXT,
  last_error_stack TEXT,
  created_at INTEGER NOT NULL,
  lock_owner TEXT,
  lock_expires_at INTEGER,
  lock_token TEXT,
  retry_policy TEXT,
  suspended_from TEXT
    CHECK (suspended_from IS NULL OR suspended_from IN ('timer', 'async', 'blocked')),
  schedule_name TEXT,
  occurrence INTEGER,
  shard_index INTEGER,
  shard_count INTEGER,
  meta TEXT,
  progress TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  scope_limit INTEGER
);

-- AUTOINCREMENT's high-water mark first: an id of a finished (deleted) job is never reused.
INSERT INTO sqlite_sequence (name, seq)
  SELECT '{{prefix}}jobs_v8', seq FROM sqlite_sequence WHERE name = '{{prefix}}jobs';

INSERT INTO {{prefix}}jobs_v8 (
    id, type, payload, state, priority, due_at, retries_left, attempts, scope, exclusive,
    job_key, tenant_id, queue, last_error_message, last_error_stack, created_at, lock_owner,
    lock_expires_at, lock_token, retry_policy, suspended_from, schedule_name, occurrence,
    shard_index, shard_count, meta, progress, cancel_requested, scope_limit)
  SELECT
    id, type, payload, state, priority, due_at, retries_left, attempts, scope, exclusive,
    job_key, tenant_id, queue, last_error_message, last_error_stack, created_at, lock_owner,
    lock_expires_at, lock_token, retry_policy, suspended_from, schedule_name, occurrence,
    shard_index, shard_count, meta, progress, cancel_requested, scope_limit
  FROM {{prefix}}jobs;

-- Drops the table's indexes with it; all of 0001–0007's are made again below.
DROP TABLE {{prefix}}jobs;

ALTER TABLE {{prefix}}jobs_v8 RENAME TO {{prefix}}jobs;

-- 0001/0002's.
CREATE INDEX {{prefix}}jobs_acquire_idx
  ON {{prefix}}jobs (priority DESC, due_at, id) WHERE state IN ('timer', 'async');

CREATE INDEX {{prefix}}jobs_due_idx
  ON {{prefix}}jobs (due_at) WHERE state IN ('timer', 'async');

CREATE INDEX {{prefix}}jobs_scope_idx
  ON {{prefix}}jobs (scope, state, priority DESC, due_at, id)
  WHERE exclusive = 1 AND scope IS NOT NULL;

CREATE UNIQUE INDEX {{prefix}}jobs_key_idx
  ON {{prefix}}jobs (job_key) WHERE job_key IS NOT NULL;

CREATE INDEX {{prefix}}jobs_lease_idx
  ON {{prefix}}jobs (lock_expires_at) WHERE state = 'running';

CREATE INDEX {{prefix}}jobs_schedule_idx
  ON {{prefix}}jobs (schedule_name, state) WHERE schedule_name IS NOT NULL;

-- 0003's.
CREATE INDEX {{prefix}}jobs_scope_head_idx
  ON {{prefix}}jobs (scope, priority DESC, due_at, id)
  WHERE exclusive = 1 AND scope IS NOT NULL AND state IN ('timer', 'async');

-- A limited job's scope gets a free slot: its blocked jobs in acquisition order, read from the
-- first entry.
CREATE INDEX {{prefix}}jobs_scope_blocked
  ON {{prefix}}jobs (scope, priority DESC, due_at, id) WHERE state = 'blocked';
