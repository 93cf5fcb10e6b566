-- PostgreSQL schema, version 5: `meta`, the small string headers the enqueuing code stores with
-- a job in the same INSERT (e.g. the W3C trace context `@jobs/otel` writes: `traceparent`,
-- `tracestate`). Null for a job without any. Never edit after release: add 0006_*.sql instead.
-- `{{jobs}}` is the quoted, schema-qualified jobs table.
--
-- A nullable column without a default: PostgreSQL adds it without rewriting the table.
ALTER TABLE {{jobs}} ADD COLUMN IF NOT EXISTS meta jsonb;
