-- SQLite schema, version 7: scope limits and rate-limit windows. `scope_limit` is a limited job's limit N (at most N
-- limited jobs of a scope run at once); `exclusive` marks every limited job, so the scope
-- index of 0003 serves limits of any size, and null means 1 (exclusive, as rows written before
-- this version). History keeps the limit with the job. `jobs_rate_limits` holds one fixed
-- window per rate-limit key (see rate-window.ts), times as epoch ms on the store's clock. Never
-- edit after release: add 0008_*.sql instead. `{{prefix}}` is the validated table prefix.
--
-- Nullable columns without a default: a schema change only, no rewrite; the migration's
-- transaction makes it all or nothing.
ALTER TABLE {{prefix}}jobs ADD COLUMN scope_limit INTEGER;

ALTER TABLE {{prefix}}jobs_history ADD COLUMN scope_limit INTEGER;

CREATE TABLE IF NOT EXISTS {{prefix}}jobs_rate_limits (
  rate_key TEXT PRIMARY KEY,
  start_ms INTEGER NOT NULL,
  per_ms INTEGER NOT NULL,
  used INTEGER NOT NULL,
  blocked_until_ms INTEGER
);
