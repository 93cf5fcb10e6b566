-- MySQL/MariaDB schema, version 5: `meta`, the small string headers the enqueuing code stores
-- with a job in the same INSERT (e.g. the W3C trace context `@jobs/otel` writes: `traceparent`,
-- `tracestate`), as JSON text; null for a job without any. Never edit after release: add
-- 0006_*.sql instead. `{{jobs}}` is the quoted table name, `{{prefix}}` the table prefix,
-- `{{database}}` the database holding it as an SQL expression.
--
-- DDL is not transactional here and MySQL 8 has no `ADD COLUMN IF NOT EXISTS`: the column is
-- added only when information_schema does not list it, so a migration interrupted after the
-- ALTER can run again.
SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs' AND COLUMN_NAME = 'meta'),
  'DO 0', 'ALTER TABLE {{jobs}} ADD COLUMN `meta` LONGTEXT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
