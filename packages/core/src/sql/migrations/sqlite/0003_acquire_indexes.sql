-- SQLite schema, version 3: the head of an exclusive scope in one index probe. Never edit after
-- release: add 0004_*.sql instead. `{{prefix}}` is the validated table prefix.
--
-- The scope rule asks, for every exclusive row the acquisition walk meets, "is it the first due
-- waiting exclusive job of its scope?" (scope-rule.ts). 0001's scope index has the state before
-- the order columns, so with two waiting states SQLite read the scope's rows and sorted them
-- for every such row; this one is read in order and stops at the first entry.
CREATE INDEX IF NOT EXISTS {{prefix}}jobs_scope_head_idx
  ON {{prefix}}jobs (scope, priority DESC, due_at, id)
  WHERE exclusive = 1 AND scope IS NOT NULL AND state IN ('timer', 'async');
