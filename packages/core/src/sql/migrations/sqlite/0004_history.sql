-- @jobs/sqlite schema, version 4: the history table. Never edit after release: add 0005_*.sql.
-- `{{prefix}}` is replaced with the store's validated table prefix.
--
-- A finished job (completed; deleted from the dead-letter area; cancelled) is copied here by the
-- transaction that finishes it, when the engine's history keeps it, and pruned after the
-- retention period. The job's own columns keep their names and types (`owner` is its last lock
-- owner); `id` is the job's id (AUTOINCREMENT never reuses one).

CREATE TABLE IF NOT EXISTS {{prefix}}jobs_history (
  id INTEGER PRIMARY KEY,
  type TEXT NOT NULL,
  payload TEXT NOT NULL,
  priority INTEGER NOT NULL,
  due_at INTEGER NOT NULL,
  retries_left INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  scope TEXT,
  exclusive INTEGER NOT NULL,
  job_key TEXT,
  tenant_id TEXT,
  queue TEXT NOT NULL,
  last_error_message TEXT,
  last_error_stack TEXT,
  created_at INTEGER NOT NULL,
  owner TEXT,
  retry_policy TEXT,
  schedule_name TEXT,
  occurrence INTEGER,
  shard_index INTEGER,
  shard_count INTEGER,
  meta TEXT,
  outcome TEXT NOT NULL CHECK (outcome IN ('completed', 'deadletter', 'cancelled')),
  result TEXT,
  duration_ms INTEGER,
  finished_at INTEGER NOT NULL
);

-- listHistory pages newest first by (finished_at, id); pruning reads oldest first.
CREATE INDEX IF NOT EXISTS {{prefix}}jobs_history_finished_idx
  ON {{prefix}}jobs_history (finished_at, id);
CREATE INDEX IF NOT EXISTS {{prefix}}jobs_history_type_idx
  ON {{prefix}}jobs_history (type, finished_at);
CREATE INDEX IF NOT EXISTS {{prefix}}jobs_history_outcome_idx
  ON {{prefix}}jobs_history (outcome, finished_at);
