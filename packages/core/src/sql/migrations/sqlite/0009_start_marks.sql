-- SQLite schema, version 9: start marks. `started_at` (epoch ms) is when the handler of a running
-- job's current lease started (the store's clock), null while the job is leased but not started
-- (prefetched by its owner). Recovery gives a job whose lease lapsed before its handler started
-- back without counting an attempt; history keeps when the last run started. Written by
-- acquisitions and lease renewals; meaningful only while the job is running. Never edit after
-- release: add a later file instead. `{{prefix}}` is the validated table prefix.
--
-- Nullable columns: SQLite adds them by changing the schema only, no rewrite.
ALTER TABLE {{prefix}}jobs ADD COLUMN started_at INTEGER;

ALTER TABLE {{prefix}}jobs_history ADD COLUMN started_at INTEGER;
