-- @jobs/mysql migration 0004: the history table. Never edit after release: add 0005_*.sql.
-- `{{history}}` is the quoted history table (prefix and database as for the jobs table). Every
-- statement is idempotent on its own (MySQL DDL is not transactional).
--
-- A finished job (completed; deleted from the dead-letter area; cancelled) is copied here by the
-- transaction that finishes it, when the engine's history keeps it, and pruned after the
-- retention period. The job's own columns keep their names and types (`owner` is its last lock
-- owner); `id` is the job's id. Indexes: listHistory pages newest first by (finished_at, id),
-- filtered by type or outcome; pruning reads oldest first.
CREATE TABLE IF NOT EXISTS {{history}} (
  `id` BIGINT UNSIGNED NOT NULL,
  `type` VARCHAR(255) NOT NULL,
  `payload` LONGTEXT NOT NULL,
  `priority` INT NOT NULL,
  `due_at` DATETIME(3) NOT NULL,
  `retries_left` INT NOT NULL,
  `attempts` INT NOT NULL,
  `scope` VARCHAR(255) NULL,
  `exclusive` TINYINT(1) NOT NULL,
  `job_key` VARCHAR(255) NULL,
  `tenant_id` VARCHAR(255) NULL,
  `queue` VARCHAR(255) NOT NULL,
  `last_error_message` TEXT NULL,
  `last_error_stack` MEDIUMTEXT NULL,
  `created_at` DATETIME(3) NOT NULL,
  `owner` VARCHAR(255) NULL,
  `retry_policy` TEXT NULL,
  `schedule_name` VARCHAR(255) NULL,
  `occurrence` DATETIME(3) NULL,
  `shard_index` INT NULL,
  `shard_count` INT NULL,
  `meta` LONGTEXT NULL,
  `outcome` VARCHAR(16) NOT NULL,
  `result` LONGTEXT NULL,
  `duration_ms` BIGINT NULL,
  `finished_at` DATETIME(3) NOT NULL,
  PRIMARY KEY (`id`),
  KEY `ix_jobs_history_finished` (`finished_at`, `id`),
  KEY `ix_jobs_history_type` (`type`, `finished_at`),
  KEY `ix_jobs_history_outcome` (`outcome`, `finished_at`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
