-- SQLite schema, version 12: per-job time limits and job logs. `timeout_ms` is a job's own time
-- limit (null: its type's), `logs` the lines its handlers wrote with `ctx.log` (JSON text
-- `[{ at, message }]`, at most 100 lines), written with lease renewals and kept in history.
-- Never edit after release: add a later file instead. `{{prefix}}` is the validated table
-- prefix.
ALTER TABLE {{prefix}}jobs ADD COLUMN timeout_ms INTEGER;

ALTER TABLE {{prefix}}jobs ADD COLUMN logs TEXT;

ALTER TABLE {{prefix}}jobs_history ADD COLUMN timeout_ms INTEGER;

ALTER TABLE {{prefix}}jobs_history ADD COLUMN logs TEXT;
