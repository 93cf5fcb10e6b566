-- MySQL/MariaDB schema, version 6: cancellation and progress. `progress` is the latest value a
-- running job's handler reported (`ctx.progress`, JSON text of at most 8 KiB), written with the
-- lease renewal and copied to history; `cancel_requested` marks a running job an operator
-- cancelled: its owner learns it from its next renewal. Never edit after release: add a later
-- file instead. `{{jobs}}` and `{{history}}` are the quoted table names, `{{prefix}}` the table
-- prefix, `{{database}}` the database holding them as an SQL expression.
--
-- DDL is not transactional here and MySQL 8 has no `ADD COLUMN IF NOT EXISTS`: each column is
-- added only when information_schema does not list it, so an interrupted migration can run
-- again.
SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND COLUMN_NAME = 'progress'),
  'DO 0', 'ALTER TABLE {{jobs}} ADD COLUMN `progress` LONGTEXT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND COLUMN_NAME = 'cancel_requested'),
  'DO 0', 'ALTER TABLE {{jobs}} ADD COLUMN `cancel_requested` BOOLEAN NOT NULL DEFAULT FALSE');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND COLUMN_NAME = 'progress'),
  'DO 0', 'ALTER TABLE {{history}} ADD COLUMN `progress` LONGTEXT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
