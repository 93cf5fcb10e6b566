-- MySQL/MariaDB schema, version 11: follow-ups of keyed jobs. A `replace` or `debounce` enqueue
-- whose key is held by a *running* job cannot change it (its handler already has the payload):
-- the change is kept here, one row per key — the latest change wins — and becomes a job of its
-- own when that holder finishes, so it runs after the holder with the latest payload, never
-- beside it and never lost. `holder_id` is the running job; `job` the change as JSON text
-- (`NewJob` fields, the due time absolute). Never edit after release: add a later file instead.
-- `{{followups}}` is the quoted table name.
--
-- Keys compare exactly, as in the other tables since 0010: the server's binary NO PAD collation
-- (`utf8mb4_nopad_bin` on MariaDB, `utf8mb4_0900_bin` on MySQL), chosen when this runs.
SET @jobs_names = COALESCE(
  (SELECT MAX(COLLATION_NAME) FROM information_schema.COLLATIONS
    WHERE COLLATION_NAME = 'utf8mb4_nopad_bin'),
  'utf8mb4_0900_bin');

SET @jobs_ddl = CONCAT('CREATE TABLE IF NOT EXISTS {{followups}} (
  `job_key` VARCHAR(255) NOT NULL PRIMARY KEY,
  `holder_id` BIGINT NOT NULL,
  `job` LONGTEXT NOT NULL,
  `created_at` DATETIME(3) NOT NULL,
  KEY `ix_jobs_followups_holder` (`holder_id`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ', @jobs_names);

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
