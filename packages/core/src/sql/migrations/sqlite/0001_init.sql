-- @jobs/sqlite schema, version 1. Never edit after release: add 0002_*.sql instead.
-- `{{prefix}}` is replaced with the store's validated table prefix.
-- Times are INTEGER epoch milliseconds; booleans are INTEGER 0/1; JSON is TEXT.

CREATE TABLE {{prefix}}jobs (
  -- AUTOINCREMENT: ids follow insertion order and are never reused after a finished job's row
  -- is deleted, so an old id never names a new job.
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  type TEXT NOT NULL,
  payload TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('timer', 'async', 'running', 'deadletter', 'suspended')),
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
  suspended_from TEXT CHECK (suspended_from IS NULL OR suspended_from IN ('timer', 'async')),
  schedule_name TEXT,
  occurrence INTEGER,
  shard_index INTEGER,
  shard_count INTEGER
);

-- Acquisition walks waiting jobs in acquisition order (priority DESC, due_at, id).
CREATE INDEX {{prefix}}jobs_acquire_idx
  ON {{prefix}}jobs (priority DESC, due_at, id) WHERE state IN ('timer', 'async');

-- nextDueAt and "is anything due at all" when most waiting jobs are future timers.
CREATE INDEX {{prefix}}jobs_due_idx
  ON {{prefix}}jobs (due_at) WHERE state IN ('timer', 'async');

-- Exclusive-scope checks: a running holder of the scope, or an earlier waiting job of it.
CREATE INDEX {{prefix}}jobs_scope_idx
  ON {{prefix}}jobs (scope, state, priority DESC, due_at, id)
  WHERE exclusive = 1 AND scope IS NOT NULL;

-- A key is unique among unfinished jobs (finished rows are deleted).
CREATE UNIQUE INDEX {{prefix}}jobs_key_idx
  ON {{prefix}}jobs (job_key) WHERE job_key IS NOT NULL;

-- Expired-lease recovery.
CREATE INDEX {{prefix}}jobs_lease_idx
  ON {{prefix}}jobs (lock_expires_at) WHERE state = 'running';

-- Schedule overlap checks ("is an occurrence of this schedule still unfinished?").
CREATE INDEX {{prefix}}jobs_schedule_idx
  ON {{prefix}}jobs (schedule_name, state) WHERE schedule_name IS NOT NULL;

CREATE TABLE {{prefix}}schedules (
  name TEXT PRIMARY KEY,
  spec TEXT NOT NULL,
  next_at INTEGER,
  paused INTEGER NOT NULL DEFAULT 0,
  pending_misfire INTEGER NOT NULL DEFAULT 0,
  skipped INTEGER NOT NULL DEFAULT 0,
  fired INTEGER NOT NULL DEFAULT 0,
  version INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE INDEX {{prefix}}schedules_next_idx ON {{prefix}}schedules (next_at) WHERE paused = 0;
