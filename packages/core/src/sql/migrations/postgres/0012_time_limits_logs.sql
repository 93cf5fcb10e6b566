-- PostgreSQL schema, version 12: per-job time limits and job logs. `timeout_ms` is a job's own
-- time limit (null: its type's), `logs` the lines its handlers wrote with `ctx.log` (JSON
-- `[{ at, message }]`, at most 100 lines), written with lease renewals and kept in history.
-- Never edit after release: add a later file instead. `{{jobs}}` is the quoted,
-- schema-qualified jobs table, `{{history}}` the history table.
--
-- Nullable columns without a default: added without rewriting the tables.
ALTER TABLE {{jobs}} ADD COLUMN IF NOT EXISTS timeout_ms integer;

ALTER TABLE {{jobs}} ADD COLUMN IF NOT EXISTS logs jsonb;

ALTER TABLE {{history}} ADD COLUMN IF NOT EXISTS timeout_ms integer;

ALTER TABLE {{history}} ADD COLUMN IF NOT EXISTS logs jsonb;
