-- SQLite schema, version 11: follow-ups of keyed jobs. A `replace` or `debounce` enqueue whose key
-- is held by a *running* job cannot change it (its handler already has the payload): the change
-- is kept here, one row per key — the latest change wins — and becomes a job of its own when that
-- holder finishes, so it runs after the holder with the latest payload, never beside it and never
-- lost. `holder_id` is the running job; `job` the change as JSON text (`NewJob` fields, the due
-- time absolute); `created_at` epoch ms. Never edit after release: add a later file instead.
-- `{{prefix}}` is the validated table prefix.
CREATE TABLE IF NOT EXISTS {{prefix}}jobs_followups (
  job_key    TEXT PRIMARY KEY,
  holder_id  INTEGER NOT NULL,
  job        TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS {{prefix}}jobs_followups_holder_idx ON {{prefix}}jobs_followups (holder_id);
