-- SQLite schema, version 15: signals for durable waits (`ctx.waitFor`, `engine.signal`). One
-- table, two kinds of rows for a (name, signal_key): a *signal* (`waiter_id` null, `payload` its
-- JSON text), kept until one waiting job consumes it — deleted in the same transaction as that
-- job's fenced checkpoint, so each signal is delivered once — and a *waiter* (`waiter_id` the job
-- that waits for it, `payload` null), which lets a signal make its job due at once. `created_at`
-- epoch ms. Never edit after release: add a later file instead. `{{prefix}}` is the validated
-- table prefix.
CREATE TABLE IF NOT EXISTS {{prefix}}jobs_signals (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  name       TEXT NOT NULL,
  signal_key TEXT NOT NULL,
  payload    TEXT,
  waiter_id  INTEGER,
  created_at INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS {{prefix}}jobs_signals_key_idx ON {{prefix}}jobs_signals (name, signal_key, id);

CREATE INDEX IF NOT EXISTS {{prefix}}jobs_signals_waiter_idx ON {{prefix}}jobs_signals (waiter_id);
