-- PostgreSQL schema, version 3: indexes that keep every acquisition-path read O(batch), whatever
-- the backlog and whether or not the table was ever analysed. Never edit after release: add
-- 0004_*.sql instead. `{{jobs}}` is the quoted, schema-qualified jobs table, `{{qualifier}}` its
-- schema (or empty), `{{prefix}}` the validated table prefix.

-- Exclusive scopes, the two questions the scope rule asks for an exclusive candidate (see
-- scope-rule.ts), each one index probe:
-- * "is it the first due waiting exclusive job of its scope?": an ordered probe that stops at
--   the first entry (0001's scope index has the state before the order columns, so with two
--   waiting states it read and sorted the whole scope, for every exclusive row walked);
-- * "does an exclusive job of its scope run?": running exclusive rows only, at most one per
--   scope, so even read whole (a hashed check) it is as small as the work in flight.
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_scope_head" ON {{jobs}} (scope, priority DESC, due_at, id)
  WHERE exclusive AND scope IS NOT NULL AND state IN ('timer', 'async');

CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_scope_running" ON {{jobs}} (scope)
  WHERE exclusive AND scope IS NOT NULL AND state = 'running';

-- Replaced by the two above: one index fewer to write on every state change of an exclusive job.
DROP INDEX IF EXISTS {{qualifier}}"{{prefix}}jobs_exclusive_scope";

-- The earliest due time an idle engine sleeps until: read in due order, stopping at the first
-- row of a type it runs (the acquisition index leads with priority, so MIN(due_at) read every
-- waiting row).
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_due" ON {{jobs}} (due_at) WHERE state IN ('timer', 'async');
