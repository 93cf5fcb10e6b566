-- PostgreSQL schema, version 7: scope limits and rate-limit windows. `scope_limit` is a limited job's limit N (at most N
-- limited jobs of a scope run at once); `exclusive` marks every limited job, so the scope
-- indexes of 0003 serve limits of any size, and null means 1 (exclusive, as rows written
-- before this version). History keeps the limit with the job. `rate_limits` holds one fixed
-- window per rate-limit key (see rate-window.ts), times as epoch ms on the store's clock. Never
-- edit after release: add 0008_*.sql instead. `{{jobs}}` is the quoted, schema-qualified jobs
-- table, `{{history}}` the history table, `{{rate_limits}}` the windows table.
--
-- Nullable columns without a default: added without rewriting the tables.
ALTER TABLE {{jobs}} ADD COLUMN IF NOT EXISTS scope_limit integer;

ALTER TABLE {{history}} ADD COLUMN IF NOT EXISTS scope_limit integer;

CREATE TABLE IF NOT EXISTS {{rate_limits}} (
  rate_key text PRIMARY KEY,
  start_ms bigint NOT NULL,
  per_ms bigint NOT NULL,
  used integer NOT NULL,
  blocked_until_ms bigint
);
