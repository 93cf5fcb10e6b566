-- SQLite schema, version 6: cancellation and progress. `progress` is the latest value a running
-- job's handler reported (`ctx.progress`, JSON text of at most 8 KiB), written with the lease
-- renewal and copied to history; `cancel_requested` (0/1) marks a running job an operator
-- cancelled: its owner learns it from its next renewal. Never edit after release: add a later
-- file instead. `{{prefix}}` is the validated table prefix.
--
-- Columns with constant defaults: SQLite adds them by changing the schema only, no rewrite; the
-- migration's transaction makes it all or nothing.
ALTER TABLE {{prefix}}jobs ADD COLUMN progress TEXT;

ALTER TABLE {{prefix}}jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;

ALTER TABLE {{prefix}}jobs_history ADD COLUMN progress TEXT;
