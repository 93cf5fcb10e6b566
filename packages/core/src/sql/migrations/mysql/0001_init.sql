-- @jobs/mysql migration 0001: the jobs and schedules tables.
--
-- `{{jobs}}` and `{{schedules}}` are the quoted table names (the store's validated prefix, and
-- its database when it has one). Statements end with `;` at the end of a line; lines starting
-- with `--` are comments. MySQL DDL is not transactional, so every statement here is idempotent
-- on its own (`IF NOT EXISTS`, indexes declared inside CREATE TABLE) and the migration is
-- recorded only after all of them ran: a crash half way leaves a state the next `migrate()`
-- completes.
--
-- Times are DATETIME(3) holding UTC, written from UTC_TIMESTAMP(3) (the database's clock) or
-- from UTC strings the store formats itself, so neither the session nor the server time zone
-- matters. utf8mb4_bin makes job keys, types and scopes compare exactly (case-sensitive), as in
-- the other stores.
--
-- Why these indexes (acquisition runs in READ COMMITTED, where InnoDB takes no gap locks for
-- searches, so a locking read only locks the rows it returns and enqueue INSERTs never wait on
-- an acquirer's scan):
-- * `waiting` (1 for timer/async, NULL otherwise) and `neg_priority` (= -priority) are generated
--   columns so that the acquisition order `priority DESC, due_at ASC, id ASC` becomes the all-
--   ascending index `ix_jobs_acquire (waiting, neg_priority, due_at, id)`. MariaDB before 10.8
--   ignores DESC in index definitions, so a mixed-direction index would not be used there. With
--   it, `SELECT … WHERE waiting = 1 AND due_at <= now ORDER BY neg_priority, due_at, id LIMIT n
--   FOR UPDATE SKIP LOCKED` walks the index in order and stops after n rows: no filesort of all
--   waiting jobs, and no locks on rows it does not return. Running, dead-letter and suspended
--   rows have `waiting` NULL and are not in that part of the index; finished jobs are deleted.
--   The columns are STORED: purging old entries of an index on a VIRTUAL column makes InnoDB
--   recompute the column from the row, and this table is updated on every acquisition.
-- * Every acquisition, renewal and completion rewrites the entries of each index whose columns
--   it changes, so indexes on hot columns are kept to what a query needs:
--   `ix_jobs_due (waiting, due_at)` for `nextDueAt` (earliest due time read from the index),
--   `ix_jobs_lease (state, lock_expires_at)` for recovering expired leases (reads only running
--   rows whose lease ended). `ix_jobs_scope (scope)` and `ix_jobs_schedule (schedule_name)`
--   leave the state out on purpose: they are not touched when a job changes state, and the rows
--   of one scope or one schedule are few enough to filter after the lookup.
-- * `uq_jobs_key (job_key)`: unique keys (NULLs do not collide).
CREATE TABLE IF NOT EXISTS {{jobs}} (
  `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `type` VARCHAR(255) NOT NULL,
  `payload` LONGTEXT NOT NULL,
  `state` VARCHAR(16) NOT NULL,
  `priority` INT NOT NULL DEFAULT 0,
  `due_at` DATETIME(3) NOT NULL,
  `retries_left` INT NOT NULL,
  `attempts` INT NOT NULL DEFAULT 0,
  `scope` VARCHAR(255) NULL,
  `exclusive` TINYINT(1) NOT NULL DEFAULT 0,
  `job_key` VARCHAR(255) NULL,
  `tenant_id` VARCHAR(255) NULL,
  `queue` VARCHAR(255) NOT NULL,
  `last_error_message` TEXT NULL,
  `last_error_stack` MEDIUMTEXT NULL,
  `created_at` DATETIME(3) NOT NULL,
  `lock_owner` VARCHAR(255) NULL,
  `lock_expires_at` DATETIME(3) NULL,
  `lock_token` CHAR(36) NULL,
  `retry_policy` TEXT NULL,
  `suspended_from` VARCHAR(16) NULL,
  `schedule_name` VARCHAR(255) NULL,
  `occurrence` DATETIME(3) NULL,
  `shard_index` INT NULL,
  `shard_count` INT NULL,
  `waiting` TINYINT AS (IF(`state` IN ('timer', 'async'), 1, NULL)) STORED,
  `neg_priority` INT AS (-`priority`) STORED,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_jobs_key` (`job_key`),
  KEY `ix_jobs_acquire` (`waiting`, `neg_priority`, `due_at`, `id`),
  KEY `ix_jobs_due` (`waiting`, `due_at`),
  KEY `ix_jobs_scope` (`scope`),
  KEY `ix_jobs_lease` (`state`, `lock_expires_at`),
  KEY `ix_jobs_schedule` (`schedule_name`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {{schedules}} (
  `name` VARCHAR(255) NOT NULL,
  `spec` LONGTEXT NOT NULL,
  `next_at` DATETIME(3) NULL,
  `paused` TINYINT(1) NOT NULL DEFAULT 0,
  `pending_misfire` TINYINT(1) NOT NULL DEFAULT 0,
  `skipped` INT NOT NULL DEFAULT 0,
  `fired` INT NOT NULL DEFAULT 0,
  `version` INT NOT NULL DEFAULT 1,
  `created_at` DATETIME(3) NOT NULL,
  `updated_at` DATETIME(3) NOT NULL,
  PRIMARY KEY (`name`),
  KEY `ix_schedules_due` (`paused`, `next_at`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
