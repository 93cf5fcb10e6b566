-- PostgreSQL schema, version 15: signals for durable waits (`ctx.waitFor`, `engine.signal`). One
-- table, two kinds of rows for a (name, signal_key): a *signal* (`waiter_id` null, `payload` its
-- JSON text), kept until one waiting job consumes it — deleted in the same transaction as that job's
-- fenced checkpoint, so each signal is delivered once — and a *waiter* (`waiter_id` the job that
-- waits for it, `payload` null), which lets a signal make its job due at once. Never edit after
-- release: add a later file instead. `{{signals}}` is the quoted, schema-qualified table,
-- `{{prefix}}` the table prefix.
CREATE TABLE IF NOT EXISTS {{signals}} (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name       text NOT NULL,
  signal_key text NOT NULL,
  payload    text,
  waiter_id  bigint,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_signals_key" ON {{signals}} (name, signal_key, id);

CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_signals_waiter" ON {{signals}} (waiter_id);
