-- PostgreSQL schema, version 9: start marks. `started_at` is when the handler of a running job's
-- current lease started (the store's clock), null while the job is leased but not started
-- (prefetched by its owner). Recovery gives a job whose lease lapsed before its handler started
-- back without counting an attempt; history keeps when the last run started. Written by
-- acquisitions and lease renewals; meaningful only while the job is running. Never edit after
-- release: add a later file instead. `{{jobs}}` is the quoted, schema-qualified jobs table,
-- `{{history}}` the history table.
--
-- Nullable columns without a default: added without rewriting the table.
ALTER TABLE {{jobs}} ADD COLUMN IF NOT EXISTS started_at timestamptz(3);

ALTER TABLE {{history}} ADD COLUMN IF NOT EXISTS started_at timestamptz(3);
