-- MySQL/MariaDB schema, version 17: signals nobody took expire (`StoreWaits.pruneSignals`, the
-- engine's `signalRetention`). The pruning statement reads the oldest signals (`waiter_id` null)
-- by `created_at`; this index keeps that a short range scan on any number of rows. Added only
-- when absent (MySQL has no `CREATE INDEX IF NOT EXISTS`). Never edit after release: add a later
-- file instead. `{{signals}}` is the quoted table name.
SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_signals'
      AND INDEX_NAME = 'ix_jobs_signals_prune'),
  'DO 0',
  'ALTER TABLE {{signals}} ADD KEY `ix_jobs_signals_prune` (`waiter_id`, `created_at`, `id`)');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
