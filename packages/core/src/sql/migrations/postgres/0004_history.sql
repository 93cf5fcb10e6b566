-- PostgreSQL schema, version 4: the history table. Never edit after release: add 0005_*.sql
-- instead. `{{history}}` is the quoted, schema-qualified history table, `{{prefix}}` the
-- validated table prefix.
--
-- A finished job (completed; deleted from the dead-letter area; cancelled) is copied here by the
-- statement or transaction that finishes it, when the engine's history keeps it, and pruned
-- after the retention period. The job's own columns keep their names and types (`owner` is its
-- last lock owner); `id` is the job's id (identity values are never reused).

CREATE TABLE IF NOT EXISTS {{history}} (
  id                 bigint PRIMARY KEY,
  type               text NOT NULL,
  payload            jsonb NOT NULL,
  priority           integer NOT NULL,
  due_at             timestamptz(3) NOT NULL,
  retries_left       integer NOT NULL,
  attempts           integer NOT NULL,
  scope              text,
  exclusive          boolean NOT NULL,
  job_key            text,
  tenant_id          text,
  queue              text NOT NULL,
  last_error_message text,
  last_error_stack   text,
  created_at         timestamptz(3) NOT NULL,
  owner              text,
  retry_policy       jsonb,
  schedule_name      text,
  occurrence         timestamptz(3),
  shard_index        integer,
  shard_count        integer,
  meta               jsonb,
  outcome            text NOT NULL CHECK (outcome IN ('completed', 'deadletter', 'cancelled')),
  result             jsonb,
  duration_ms        bigint,
  finished_at        timestamptz(3) NOT NULL
);

-- listHistory pages newest first by (finished_at, id); pruning reads oldest first.
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_history_finished" ON {{history}} (finished_at, id);
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_history_type" ON {{history}} (type, finished_at);
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_history_outcome" ON {{history}} (outcome, finished_at);
