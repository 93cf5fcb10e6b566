-- MySQL/MariaDB schema, version 7: scope limits and rate-limit windows. `scope_limit` is a limited job's limit N (at
-- most N limited jobs of a scope run at once); `exclusive` marks every limited job, so the
-- scope indexes serve limits of any size, and null means 1 (exclusive, as rows written before
-- this version). History keeps the limit with the job. `rate_limits` holds one fixed window per
-- rate-limit key (see rate-window.ts), times as epoch ms on the store's clock. Never edit after
-- release: add 0008_*.sql instead. `{{jobs}}`, `{{history}}` and `{{rate_limits}}` are the
-- quoted table names, `{{prefix}}` the table prefix, `{{database}}` the database holding them
-- as an SQL expression.
--
-- DDL is not transactional here and MySQL 8 has no `ADD COLUMN IF NOT EXISTS`: each column is
-- added only when information_schema does not list it, so an interrupted migration can run
-- again.
SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND COLUMN_NAME = 'scope_limit'),
  'DO 0', 'ALTER TABLE {{jobs}} ADD COLUMN `scope_limit` INT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND COLUMN_NAME = 'scope_limit'),
  'DO 0', 'ALTER TABLE {{history}} ADD COLUMN `scope_limit` INT NULL');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

CREATE TABLE IF NOT EXISTS {{rate_limits}} (
  `rate_key` VARCHAR(255) NOT NULL PRIMARY KEY,
  `start_ms` BIGINT NOT NULL,
  `per_ms` BIGINT NOT NULL,
  `used` INT NOT NULL,
  `blocked_until_ms` BIGINT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
