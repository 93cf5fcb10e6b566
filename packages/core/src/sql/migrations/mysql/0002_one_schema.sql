-- @jobs/mysql migration 0002: ONE schema for @jobs/mysql and @jobs/typeorm on MySQL/MariaDB.
-- Never edit after release: add 0003_*.sql instead.
--
-- A database at version 1 was made either by 0001_init.sql (@jobs/mysql) or by the TypeORM
-- store's former DDL: other index names (`<prefix>jobs_key_uq`, `…_due_idx`, `…_scope_idx`,
-- `…_schedule_idx`), no generated columns `waiting`/`neg_priority` and so no acquisition index,
-- a signed id, `queue` with a default, `last_error_stack` TEXT, `lock_token` VARCHAR(64), and
-- no `ix_schedules_due`. This brings the second to exactly the first. On a database made by
-- 0001_init.sql it finds nothing to do and changes nothing.
--
-- MySQL 8 has no `ADD COLUMN IF NOT EXISTS` / `DROP INDEX IF EXISTS` (MariaDB has), so each
-- table's changes are worked out from information_schema into ONE `ALTER TABLE` (one rebuild,
-- atomic) and run as a prepared statement, or `DO 0` when there is nothing to change. Placeholders:
-- `{{jobs}}`/`{{schedules}}` the quoted table names, `{{prefix}}` the table prefix,
-- `{{database}}` the database holding them as an SQL expression (`'app'`, or `DATABASE()`).

SET @jobs_indexes = (SELECT GROUP_CONCAT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS
  WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs');

SET @jobs_columns = (SELECT GROUP_CONCAT(COLUMN_NAME) FROM information_schema.COLUMNS
  WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs');

-- Columns whose type or default differs from 0001's.
SET @jobs_modify = (SELECT GROUP_CONCAT(CASE
    WHEN COLUMN_NAME = 'id' AND COLUMN_TYPE NOT LIKE '%unsigned%'
      THEN 'MODIFY `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT'
    WHEN COLUMN_NAME = 'queue' AND COLUMN_DEFAULT IS NOT NULL
      THEN 'MODIFY `queue` VARCHAR(255) NOT NULL'
    WHEN COLUMN_NAME = 'last_error_stack' AND DATA_TYPE <> 'mediumtext'
      THEN 'MODIFY `last_error_stack` MEDIUMTEXT NULL'
    WHEN COLUMN_NAME = 'lock_token' AND (DATA_TYPE <> 'char' OR CHARACTER_MAXIMUM_LENGTH <> 36)
      THEN 'MODIFY `lock_token` CHAR(36) NULL'
  END SEPARATOR ', ') FROM information_schema.COLUMNS
  WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs');

-- The former indexes go, 0001's generated columns and indexes come (see 0001_init.sql for why).
SET @jobs_ddl = CONCAT_WS(', ',
  IF(FIND_IN_SET('{{prefix}}jobs_key_uq', @jobs_indexes), 'DROP INDEX `{{prefix}}jobs_key_uq`', NULL),
  IF(FIND_IN_SET('{{prefix}}jobs_due_idx', @jobs_indexes), 'DROP INDEX `{{prefix}}jobs_due_idx`', NULL),
  IF(FIND_IN_SET('{{prefix}}jobs_scope_idx', @jobs_indexes), 'DROP INDEX `{{prefix}}jobs_scope_idx`', NULL),
  IF(FIND_IN_SET('{{prefix}}jobs_schedule_idx', @jobs_indexes), 'DROP INDEX `{{prefix}}jobs_schedule_idx`', NULL),
  @jobs_modify,
  IF(FIND_IN_SET('waiting', @jobs_columns), NULL,
    'ADD COLUMN `waiting` TINYINT AS (IF(`state` IN (''timer'', ''async''), 1, NULL)) STORED'),
  IF(FIND_IN_SET('neg_priority', @jobs_columns), NULL,
    'ADD COLUMN `neg_priority` INT AS (-`priority`) STORED'),
  IF(FIND_IN_SET('uq_jobs_key', @jobs_indexes), NULL, 'ADD UNIQUE KEY `uq_jobs_key` (`job_key`)'),
  IF(FIND_IN_SET('ix_jobs_acquire', @jobs_indexes), NULL,
    'ADD KEY `ix_jobs_acquire` (`waiting`, `neg_priority`, `due_at`, `id`)'),
  IF(FIND_IN_SET('ix_jobs_due', @jobs_indexes), NULL, 'ADD KEY `ix_jobs_due` (`waiting`, `due_at`)'),
  IF(FIND_IN_SET('ix_jobs_scope', @jobs_indexes), NULL, 'ADD KEY `ix_jobs_scope` (`scope`)'),
  IF(FIND_IN_SET('ix_jobs_lease', @jobs_indexes), NULL,
    'ADD KEY `ix_jobs_lease` (`state`, `lock_expires_at`)'),
  IF(FIND_IN_SET('ix_jobs_schedule', @jobs_indexes), NULL,
    'ADD KEY `ix_jobs_schedule` (`schedule_name`)'));

SET @jobs_ddl = IF(@jobs_ddl = '', 'DO 0', CONCAT('ALTER TABLE {{jobs}} ', @jobs_ddl));

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}schedules'
      AND INDEX_NAME = 'ix_schedules_due'),
  'DO 0', 'ALTER TABLE {{schedules}} ADD KEY `ix_schedules_due` (`paused`, `next_at`)');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
