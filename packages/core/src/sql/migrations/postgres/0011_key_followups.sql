-- PostgreSQL schema, version 11: follow-ups of keyed jobs. A `replace` or `debounce` enqueue whose
-- key is held by a *running* job cannot change it (its handler already has the payload): the
-- change is kept here, one row per key — the latest change wins — and becomes a job of its own
-- when that holder finishes, so it runs after the holder with the latest payload, never beside
-- it and never lost. `holder_id` is the running job; `job` the change as JSON (`NewJob` fields,
-- the due time absolute). Never edit after release: add a later file instead. `{{followups}}` is
-- the quoted, schema-qualified table, `{{prefix}}` the table prefix.
CREATE TABLE IF NOT EXISTS {{followups}} (
  job_key    text PRIMARY KEY,
  holder_id  bigint NOT NULL,
  job        jsonb NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_followups_holder" ON {{followups}} (holder_id);
