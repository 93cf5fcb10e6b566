-- PostgreSQL schema, version 1 (first shipped by @jobs/postgres). Never edit after release: add
-- 0003_*.sql instead. `{{jobs}}`/`{{schedules}}` are the quoted, schema-qualified table names,
-- `{{prefix}}` the validated table prefix (empty for @jobs/postgres).
-- A finished job's row is deleted, so every row is an unfinished job.

CREATE TABLE {{jobs}} (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  type               text NOT NULL,
  payload            jsonb NOT NULL,
  state              text NOT NULL
                     CHECK (state IN ('timer', 'async', 'running', 'deadletter', 'suspended')),
  priority           integer NOT NULL DEFAULT 0,
  due_at             timestamptz(3) NOT NULL,
  retries_left       integer NOT NULL,
  attempts           integer NOT NULL DEFAULT 0,
  scope              text,
  exclusive          boolean NOT NULL DEFAULT false,
  job_key            text,
  tenant_id          text,
  queue              text NOT NULL DEFAULT 'default',
  last_error_message text,
  last_error_stack   text,
  created_at         timestamptz(3) NOT NULL DEFAULT now(),
  lock_owner         text,
  lock_expires_at    timestamptz(3),
  lock_token         text,
  retry_policy       jsonb,
  suspended_from     text CHECK (suspended_from IN ('timer', 'async')),
  schedule_name      text,
  occurrence         timestamptz(3),
  shard_index        integer,
  shard_count        integer
);

-- Unique keys among unfinished jobs (= all rows).
CREATE UNIQUE INDEX "{{prefix}}jobs_key" ON {{jobs}} (job_key) WHERE job_key IS NOT NULL;

-- Acquisition: walk waiting rows in acquisition order.
CREATE INDEX "{{prefix}}jobs_acquire" ON {{jobs}} (priority DESC, due_at, id)
  WHERE state IN ('timer', 'async');

-- Exclusive scopes: "is something of this scope running / waiting ahead of me?"
CREATE INDEX "{{prefix}}jobs_exclusive_scope" ON {{jobs}} (scope, state, priority DESC, due_at, id)
  WHERE exclusive AND scope IS NOT NULL;

-- Lease recovery: running rows by expiry.
CREATE INDEX "{{prefix}}jobs_lease" ON {{jobs}} (lock_expires_at) WHERE state = 'running';

-- Schedule overlap checks. (No general (state, type) index: admin queries are rare, and every
-- index on state costs the hot path a write per state change.)
CREATE INDEX "{{prefix}}jobs_schedule" ON {{jobs}} (schedule_name) WHERE schedule_name IS NOT NULL;

CREATE TABLE {{schedules}} (
  name            text PRIMARY KEY,
  spec            jsonb NOT NULL,
  next_at         timestamptz(3),
  paused          boolean NOT NULL DEFAULT false,
  pending_misfire boolean NOT NULL DEFAULT false,
  skipped         integer NOT NULL DEFAULT 0,
  fired           integer NOT NULL DEFAULT 0,
  version         integer NOT NULL DEFAULT 1,
  created_at      timestamptz(3) NOT NULL DEFAULT now(),
  updated_at      timestamptz(3) NOT NULL DEFAULT now()
);
