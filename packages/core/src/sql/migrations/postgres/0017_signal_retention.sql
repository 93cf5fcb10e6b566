-- PostgreSQL schema, version 17: signals nobody took expire (`StoreWaits.pruneSignals`, the
-- engine's `signalRetention`). The pruning statement reads the oldest signals (`waiter_id` null)
-- by `created_at`; this index keeps that a short range scan on any number of rows, waiter rows
-- left out. Never edit after release: add a later file instead. `{{signals}}` is the quoted,
-- schema-qualified table, `{{prefix}}` the table prefix.
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_signals_prune" ON {{signals}} (created_at, id) WHERE waiter_id IS NULL;
