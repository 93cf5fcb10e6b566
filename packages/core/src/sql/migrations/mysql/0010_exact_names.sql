-- MySQL/MariaDB schema, version 10: names compare exactly. Never edit after release: add a later
-- file instead. `{{jobs}}`, `{{schedules}}`, `{{history}}` and `{{rate_limits}}` are the quoted
-- table names, `{{prefix}}` the table prefix, `{{database}}` the database holding them as an SQL
-- expression.
--
-- Until now every text column was `utf8mb4_bin`, a PAD SPACE collation: trailing spaces do not
-- count when it compares, so the key `invoice-7 ` found the job of `invoice-7`, an engine with
-- a handler for `w` acquired jobs of type `w `, the schedule `nightly ` overwrote `nightly`,
-- and the scopes `acct` and `acct ` shared a limit (and a unique index refused the second
-- name). The other stores compare names exactly. This converts the four tables to the binary
-- NO PAD collation of the server, so every name column (type, queue, tenant, key, scope,
-- schedule, lock owner and token, the history's names, rate-limit keys) and every later column
-- compares byte for byte:
-- * MariaDB (10.2+) has `utf8mb4_nopad_bin`; MySQL (8.0.17+) has `utf8mb4_0900_bin`, which is
--   NO PAD. The server's is chosen here, when the migration runs, so one file (and
--   `migrationSql()` for DBAs) serves both. A server with neither stops at the ALTER with
--   "Unknown collation" (`@jobs/mysql` refuses such servers before it migrates).
-- * Safe on a table with rows: the character set stays utf8mb4, so no value changes; names
--   that were equal under PAD SPACE are still different under NO PAD, never the other way, so
--   no unique key (`uq_jobs_key`, the schedules' and rate limits' primary keys) can find a
--   duplicate. The ALTER rebuilds each table and its indexes (ALGORITHM=COPY where the server
--   needs it; the table is locked for writes meanwhile, as for any such ALTER).
-- * DDL is not transactional here: each table is converted only while information_schema still
--   lists a column or a table default of another collation, so a migration interrupted half
--   way, or run again with its record lost, finishes the rest and changes nothing twice. Names
--   of collations are compared as bytes: information_schema's text and this variable's may be
--   in collations MySQL refuses to compare with each other.
SET @jobs_names = COALESCE(
  (SELECT MAX(COLLATION_NAME) FROM information_schema.COLLATIONS
    WHERE COLLATION_NAME = 'utf8mb4_nopad_bin'),
  'utf8mb4_0900_bin');

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND CAST(COLLATION_NAME AS BINARY) <> CAST(@jobs_names AS BINARY))
  OR EXISTS (SELECT 1 FROM information_schema.TABLES
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs'
      AND CAST(TABLE_COLLATION AS BINARY) <> CAST(@jobs_names AS BINARY)),
  CONCAT('ALTER TABLE {{jobs}} CONVERT TO CHARACTER SET utf8mb4 COLLATE ', @jobs_names),
  'DO 0');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}schedules'
      AND CAST(COLLATION_NAME AS BINARY) <> CAST(@jobs_names AS BINARY))
  OR EXISTS (SELECT 1 FROM information_schema.TABLES
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}schedules'
      AND CAST(TABLE_COLLATION AS BINARY) <> CAST(@jobs_names AS BINARY)),
  CONCAT('ALTER TABLE {{schedules}} CONVERT TO CHARACTER SET utf8mb4 COLLATE ', @jobs_names),
  'DO 0');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND CAST(COLLATION_NAME AS BINARY) <> CAST(@jobs_names AS BINARY))
  OR EXISTS (SELECT 1 FROM information_schema.TABLES
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND CAST(TABLE_COLLATION AS BINARY) <> CAST(@jobs_names AS BINARY)),
  CONCAT('ALTER TABLE {{history}} CONVERT TO CHARACTER SET utf8mb4 COLLATE ', @jobs_names),
  'DO 0');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;

SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_rate_limits'
      AND CAST(COLLATION_NAME AS BINARY) <> CAST(@jobs_names AS BINARY))
  OR EXISTS (SELECT 1 FROM information_schema.TABLES
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_rate_limits'
      AND CAST(TABLE_COLLATION AS BINARY) <> CAST(@jobs_names AS BINARY)),
  CONCAT('ALTER TABLE {{rate_limits}} CONVERT TO CHARACTER SET utf8mb4 COLLATE ', @jobs_names),
  'DO 0');

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
