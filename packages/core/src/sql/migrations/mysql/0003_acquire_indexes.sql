-- @jobs/mysql migration 0003: nothing to change. Never edit after release.
--
-- Version 3 gave PostgreSQL and SQLite the indexes that keep acquisition O(batch) on any
-- backlog, with or without statistics. MySQL/MariaDB already had what they need in 0001
-- (`ix_jobs_acquire`, `ix_jobs_due`); their statements name those indexes (FORCE INDEX) instead
-- of trusting InnoDB's sampled statistics. The version is recorded so every database counts
-- its schema versions alike.
DO 0;
