-- MySQL/MariaDB schema, version 13: durable steps. `steps` is the step list of a job's handlers
-- (`ctx.step`, JSON text `[{ name, result, at, durationMs }]`), written under the lease's token
-- by a fenced UPDATE and kept in history. Never edit after release: add a later file instead.
-- `{{jobs}}` and `{{history}}` are the quoted table names, `{{prefix}}` the table prefix,
-- `{{database}}` the database holding them as an SQL expression.
--
-- DDL is not transactional here and MySQL 8 has no `ADD COLUMN IF NOT EXISTS`: each column is
-- added only when information_schema does not list it, so an interrupted migration can run
-- again.

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND COLUMN_NAME = 'steps'),
  'DO 0', 'ALTER TABLE {{jobs}} ADD COLUMN `steps` LONGTEXT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND COLUMN_NAME = 'steps'),
  'DO 0', 'ALTER TABLE {{history}} ADD COLUMN `steps` LONGTEXT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
