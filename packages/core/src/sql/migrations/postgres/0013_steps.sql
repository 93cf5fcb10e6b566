-- PostgreSQL schema, version 13: durable steps. `steps` is the step list of a job's handlers
-- (`ctx.step`, JSON `[{ name, result, at, durationMs }]`), written under the lease's token by a
-- fenced UPDATE and kept in history. Never edit after release: add a later file instead.
-- `{{jobs}}` is the quoted, schema-qualified jobs table, `{{history}}` the history table.
--
-- Nullable columns without a default: added without rewriting the tables.
ALTER TABLE {{jobs}} ADD COLUMN IF NOT EXISTS steps jsonb;

ALTER TABLE {{history}} ADD COLUMN IF NOT EXISTS steps jsonb;
