-- SQLite schema, version 5: `meta`, the small string headers the enqueuing code stores with a
-- job in the same INSERT (e.g. the W3C trace context `@jobs/otel` writes: `traceparent`,
-- `tracestate`), as JSON text; null for a job without any. Never edit after release: add
-- 0006_*.sql instead. `{{prefix}}` is the validated table prefix.
--
-- A nullable column without a default: SQLite adds it by changing the schema only, no rewrite;
-- the migration's transaction makes it all or nothing.
ALTER TABLE {{prefix}}jobs ADD COLUMN meta TEXT;
