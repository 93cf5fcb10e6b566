-- SQLite schema, version 17: signals nobody took expire (`StoreWaits.pruneSignals`, the engine's
-- `signalRetention`). The pruning statement reads the oldest signals (`waiter_id` null) by
-- `created_at`; this partial index (signals only, waiter rows left out) keeps that a short range
-- scan on any number of rows. Never edit after
-- release: add a later file instead. `{{prefix}}` is the validated table prefix.
CREATE INDEX IF NOT EXISTS {{prefix}}jobs_signals_prune_idx ON {{prefix}}jobs_signals (created_at, id) WHERE waiter_id IS NULL;
