-- MySQL/MariaDB schema, version 15: signals for durable waits (`ctx.waitFor`, `engine.signal`).
-- One table, two kinds of rows for a (name, signal_key): a *signal* (`waiter_id` null, `payload`
-- its JSON text), kept until one waiting job consumes it — deleted in the same transaction as
-- that job's fenced checkpoint, so each signal is delivered once — and a *waiter* (`waiter_id`
-- the job that waits for it, `payload` null), which lets a signal make its job due at once.
-- Never edit after release: add a later file instead. `{{signals}}` is the quoted table name.
--
-- Names and keys compare exactly: the server's binary NO PAD collation (`utf8mb4_nopad_bin` on
-- MariaDB, `utf8mb4_0900_bin` on MySQL), chosen when this runs.
SET @jobs_names = COALESCE(
  (SELECT MAX(COLLATION_NAME) FROM information_schema.COLLATIONS
    WHERE COLLATION_NAME = 'utf8mb4_nopad_bin'),
  'utf8mb4_0900_bin');

SET @jobs_ddl = CONCAT('CREATE TABLE IF NOT EXISTS {{signals}} (
  `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `name` VARCHAR(255) NOT NULL,
  `signal_key` VARCHAR(255) NOT NULL,
  `payload` LONGTEXT NULL,
  `waiter_id` BIGINT NULL,
  `created_at` DATETIME(3) NOT NULL,
  KEY `ix_jobs_signals_key` (`name`, `signal_key`, `id`),
  KEY `ix_jobs_signals_waiter` (`waiter_id`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ', @jobs_names);

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
