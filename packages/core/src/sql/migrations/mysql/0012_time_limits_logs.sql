-- MySQL/MariaDB schema, version 12: per-job time limits and job logs. `timeout_ms` is a job's own
-- time limit (null: its type's), `logs` the lines its handlers wrote with `ctx.log` (JSON text
-- `[{ at, message }]`, at most 100 lines), written with lease renewals and kept in history.
-- Never edit after release: add a later file instead. `{{jobs}}` and `{{history}}` are the
-- quoted table names, `{{prefix}}` the table prefix, `{{database}}` the database holding them
-- as an SQL expression.
--
-- DDL is not transactional here and MySQL 8 has no `ADD COLUMN IF NOT EXISTS`: each column is
-- added only when information_schema does not list it, so an interrupted migration can run
-- again. (The tables' NO PAD collation, 0010, is their default: new text columns take it.)

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND COLUMN_NAME = 'timeout_ms'),
  'DO 0', 'ALTER TABLE {{jobs}} ADD COLUMN `timeout_ms` INT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND COLUMN_NAME = 'logs'),
  'DO 0', 'ALTER TABLE {{jobs}} ADD COLUMN `logs` LONGTEXT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND COLUMN_NAME = 'timeout_ms'),
  'DO 0', 'ALTER TABLE {{history}} ADD COLUMN `timeout_ms` INT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND COLUMN_NAME = 'logs'),
  'DO 0', 'ALTER TABLE {{history}} ADD COLUMN `logs` LONGTEXT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
