-- MySQL/MariaDB schema, version 8: the state `blocked`, a limited job that is due but waits for
-- a free slot of its full scope. Never edit after release: add a later file instead. `{{jobs}}`
-- is the quoted table name, `{{prefix}}` the table prefix, `{{database}}` the database holding
-- it as an SQL expression.
--
-- `state` and `suspended_from` are VARCHAR(16) without a CHECK, so the new value needs no
-- change; the generated `waiting` is NULL for it, which keeps blocked rows out of
-- `ix_jobs_acquire` and `ix_jobs_due`. `ix_jobs_scope_blocked` gives a scope's blocked jobs in
-- acquisition order, read from the first entry (`neg_priority` for the priority, see
-- 0001_init.sql: MariaDB before 10.8 ignores DESC in an index).
--
-- DDL is not transactional here and MySQL 8 has no `CREATE INDEX IF NOT EXISTS`: the index is
-- added only when information_schema does not list it, so an interrupted migration can run
-- again.
SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND INDEX_NAME = 'ix_jobs_scope_blocked'),
  'DO 0',
  'ALTER TABLE {{jobs}} ADD KEY `ix_jobs_scope_blocked`
    (`scope`, `state`, `neg_priority`, `due_at`, `id`)');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
