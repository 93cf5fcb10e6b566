-- PostgreSQL schema, version 2: ONE schema for @jobs/postgres and @jobs/typeorm. Never edit after
-- release: add 0003_*.sql instead. `{{jobs}}`/`{{schedules}}` are the quoted, schema-qualified
-- table names, `{{qualifier}}` their schema (`"jobs".`, or empty for the search path),
-- `{{prefix}}` the validated table prefix.
--
-- A database at version 1 was made either by 0001_init.sql (@jobs/postgres) or by the TypeORM
-- store's former DDL (varchar columns, a bigserial id, JSON as text, no CHECKs, other indexes).
-- This brings the second to exactly the first: same column types, defaults, constraints,
-- identity and indexes. On a database made by 0001_init.sql every statement finds nothing to do.

-- The former TypeORM indexes; 0001's are created at the end.
DROP INDEX IF EXISTS {{qualifier}}"{{prefix}}jobs_key_uq";
DROP INDEX IF EXISTS {{qualifier}}"{{prefix}}jobs_due_idx";
DROP INDEX IF EXISTS {{qualifier}}"{{prefix}}jobs_scope_idx";
DROP INDEX IF EXISTS {{qualifier}}"{{prefix}}jobs_schedule_idx";

-- varchar(n) → text rewrites nothing; text → jsonb rewrites the table once (the JSON was
-- written by the store, so it parses). A column that already has its type is left as it is.
ALTER TABLE {{jobs}}
  ALTER COLUMN type TYPE text,
  ALTER COLUMN state TYPE text,
  ALTER COLUMN scope TYPE text,
  ALTER COLUMN job_key TYPE text,
  ALTER COLUMN tenant_id TYPE text,
  ALTER COLUMN queue TYPE text,
  ALTER COLUMN lock_owner TYPE text,
  ALTER COLUMN lock_token TYPE text,
  ALTER COLUMN retry_policy TYPE jsonb USING retry_policy::jsonb,
  ALTER COLUMN suspended_from TYPE text,
  ALTER COLUMN schedule_name TYPE text;

-- Defaults as 0001 writes them (a type change keeps a varchar-typed default expression).
ALTER TABLE {{jobs}}
  ALTER COLUMN queue SET DEFAULT 'default',
  ALTER COLUMN created_at SET DEFAULT now();

ALTER TABLE {{schedules}}
  ALTER COLUMN name TYPE text,
  ALTER COLUMN spec TYPE jsonb USING spec::jsonb,
  ALTER COLUMN created_at SET DEFAULT now(),
  ALTER COLUMN updated_at SET DEFAULT now();

DO $$
DECLARE
  old_sequence text;
  next_id bigint;
BEGIN
  -- bigserial → identity. Ids continue after the last one handed out: a finished job's id is
  -- never given to another job.
  IF (SELECT attidentity FROM pg_attribute
      WHERE attrelid = '{{jobs}}'::regclass AND attname = 'id') = '' THEN
    old_sequence := pg_get_serial_sequence('{{jobs}}', 'id');
    EXECUTE format('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM %s',
      old_sequence) INTO next_id;
    next_id := greatest(next_id, (SELECT coalesce(max(id), 0) + 1 FROM {{jobs}}));
    ALTER TABLE {{jobs}} ALTER COLUMN id DROP DEFAULT;
    EXECUTE format('DROP SEQUENCE %s', old_sequence);
    ALTER TABLE {{jobs}} ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY;
    EXECUTE format('ALTER TABLE {{jobs}} ALTER COLUMN id RESTART WITH %s', next_id);
  END IF;
  -- The CHECKs of 0001, under the names PostgreSQL gave them there.
  IF NOT EXISTS (SELECT 1 FROM pg_constraint
      WHERE conrelid = '{{jobs}}'::regclass AND conname = '{{prefix}}jobs_state_check') THEN
    ALTER TABLE {{jobs}} ADD CONSTRAINT "{{prefix}}jobs_state_check"
      CHECK (state IN ('timer', 'async', 'running', 'deadletter', 'suspended'));
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_constraint
      WHERE conrelid = '{{jobs}}'::regclass AND conname = '{{prefix}}jobs_suspended_from_check') THEN
    ALTER TABLE {{jobs}} ADD CONSTRAINT "{{prefix}}jobs_suspended_from_check"
      CHECK (suspended_from IN ('timer', 'async'));
  END IF;
END $$;

CREATE UNIQUE INDEX IF NOT EXISTS "{{prefix}}jobs_key" ON {{jobs}} (job_key)
  WHERE job_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_acquire" ON {{jobs}} (priority DESC, due_at, id)
  WHERE state IN ('timer', 'async');
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_exclusive_scope"
  ON {{jobs}} (scope, state, priority DESC, due_at, id)
  WHERE exclusive AND scope IS NOT NULL;
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_lease" ON {{jobs}} (lock_expires_at)
  WHERE state = 'running';
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_schedule" ON {{jobs}} (schedule_name)
  WHERE schedule_name IS NOT NULL;
