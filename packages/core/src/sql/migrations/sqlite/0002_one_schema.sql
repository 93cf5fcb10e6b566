-- SQLite schema, version 2: ONE schema for @jobs/sqlite and @jobs/typeorm. Never edit after
-- release: add 0003_*.sql instead. `{{prefix}}` is the store's validated table prefix.
--
-- A database at version 1 was made either by 0001_init.sql (@jobs/sqlite) or by the TypeORM
-- store's former inline DDL (no CHECKs, other defaults, other indexes — some under the same
-- names — and a version table without `name`). SQLite cannot change a column's default or
-- constraints in place, so each table is rebuilt with the 0001_init.sql definition (SQLite's
-- create-copy-drop-rename procedure), inside the migration's one BEGIN IMMEDIATE transaction.
-- A database made by 0001_init.sql ends exactly where it started: same columns, rows, ids and
-- indexes. Both paths end at the same schema, byte for byte in sqlite_schema.

-- ---- jobs ----

-- "id" is quoted because TypeORM finds an AUTOINCREMENT column only by its quoted name, and
-- `@jobs/typeorm`'s `jobsEntities` mirror this table.
CREATE TABLE {{prefix}}jobs_v2 (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
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

-- AUTOINCREMENT's high-water mark first: an id of a finished (deleted) job is never reused.
INSERT INTO sqlite_sequence (name, seq)
  SELECT '{{prefix}}jobs_v2', seq FROM sqlite_sequence WHERE name = '{{prefix}}jobs';

INSERT INTO {{prefix}}jobs_v2 (
    id, type, payload, state, priority, due_at, retries_left, attempts, scope, exclusive,
    job_key, tenant_id, queue, last_error_message, last_error_stack, created_at, lock_owner,
    lock_expires_at, lock_token, retry_policy, suspended_from, schedule_name, occurrence,
    shard_index, shard_count)
  SELECT
    id, type, payload, state, priority, due_at, retries_left, attempts, scope, exclusive,
    job_key, tenant_id, queue, last_error_message, last_error_stack, created_at, lock_owner,
    lock_expires_at, lock_token, retry_policy, suspended_from, schedule_name, occurrence,
    shard_index, shard_count
  FROM {{prefix}}jobs;

-- Drops the old indexes with the table, also TypeORM's under the names used below.
DROP TABLE {{prefix}}jobs;

ALTER TABLE {{prefix}}jobs_v2 RENAME TO {{prefix}}jobs;

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

-- ---- schedules ----

CREATE TABLE {{prefix}}schedules_v2 (
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

INSERT INTO {{prefix}}schedules_v2 (
    name, spec, next_at, paused, pending_misfire, skipped, fired, version, created_at,
    updated_at)
  SELECT
    name, spec, next_at, paused, pending_misfire, skipped, fired, version, created_at,
    updated_at
  FROM {{prefix}}schedules;

DROP TABLE {{prefix}}schedules;

ALTER TABLE {{prefix}}schedules_v2 RENAME TO {{prefix}}schedules;

CREATE INDEX {{prefix}}schedules_next_idx ON {{prefix}}schedules (next_at) WHERE paused = 0;

-- ---- version table: `version`, `applied_at` (0001_init.sql's loader also kept a `name`) ----
CREATE TABLE {{prefix}}jobs_migrations_v2 (
  version INTEGER PRIMARY KEY,
  applied_at INTEGER NOT NULL
);
INSERT INTO {{prefix}}jobs_migrations_v2 (version, applied_at)
  SELECT version, applied_at FROM {{prefix}}jobs_migrations;
DROP TABLE {{prefix}}jobs_migrations;
ALTER TABLE {{prefix}}jobs_migrations_v2 RENAME TO {{prefix}}jobs_migrations;
