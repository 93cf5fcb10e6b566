-- MySQL/MariaDB schema, version 9: start marks. `started_at` is when the handler of a running
-- job's current lease started (the store's clock, UTC), null while the job is leased but not
-- started (prefetched by its owner). Recovery gives a job whose lease lapsed before its handler
-- started back without counting an attempt; history keeps when the last run started. Written by
-- acquisitions and lease renewals; meaningful only while the job is running. Never edit after
-- release: add a later file instead. `{{jobs}}` and `{{history}}` are the quoted table names,
-- `{{prefix}}` the table prefix, `{{database}}` the database holding them as an SQL expression.
--
-- DDL is not transactional here and MySQL 8 has no `ADD COLUMN IF NOT EXISTS`: each column is
-- added only when information_schema does not list it, so an interrupted migration can run
-- again. Nullable columns: InnoDB adds them in place.
SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND COLUMN_NAME = 'started_at'),
  'DO 0', 'ALTER TABLE {{jobs}} ADD COLUMN `started_at` DATETIME(3) NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND COLUMN_NAME = 'started_at'),
  'DO 0', 'ALTER TABLE {{history}} ADD COLUMN `started_at` DATETIME(3) NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
