-- SQLite schema, version 13: durable steps. `steps` is the step list of a job's handlers
-- (`ctx.step`, JSON text `[{ name, result, at, durationMs }]`), written under the lease's token
-- by a fenced UPDATE and kept in history. Never edit after release: add a later file instead.
-- `{{prefix}}` is the validated table prefix.
ALTER TABLE {{prefix}}jobs ADD COLUMN steps TEXT;

ALTER TABLE {{prefix}}jobs_history ADD COLUMN steps TEXT;
