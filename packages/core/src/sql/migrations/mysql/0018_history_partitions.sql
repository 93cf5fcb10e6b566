-- MySQL/MariaDB schema, version 18: history in partitions by UTC day of `finished_at`
-- (RANGE COLUMNS), so retention drops a whole day (`ALTER TABLE … DROP PARTITION`, no row
-- deletes) instead of deleting it row by row. Never edit after release: add a later file
-- instead. `{{history}}` is the quoted history table, `{{database}}` its database.
--
-- A partition `pYYYYMMDD` holds the records that finished before that UTC day and on or after
-- the bound of the partition before it; `pmax` takes whatever lies past the last day. Here the
-- records kept so far go to one partition (those before today), and today and the next two days
-- get one each, as the store keeps it when it prunes: it adds the coming days (splitting the
-- empty `pmax`) and drops past ones. The primary key
-- becomes (id, finished_at): a partitioned table's unique keys include its partitioning column.
-- One ALTER rebuilds the table (a copy: it takes as long as the history is large), only when it
-- is not partitioned yet, so the statement may run again after a failure.
SET @jobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.PARTITIONS
    WHERE TABLE_SCHEMA = {{database}} AND TABLE_NAME = '{{prefix}}jobs_history'
      AND PARTITION_NAME IS NOT NULL),
  'DO 0',
  CONCAT('ALTER TABLE {{history}} DROP PRIMARY KEY, ADD PRIMARY KEY (`id`, `finished_at`) ',
    'PARTITION BY RANGE COLUMNS (`finished_at`) (',
    'PARTITION `p', DATE_FORMAT(UTC_DATE(), '%Y%m%d'), '` VALUES LESS THAN (''', UTC_DATE(), '''), ',
    'PARTITION `p', DATE_FORMAT(UTC_DATE() + INTERVAL 1 DAY, '%Y%m%d'), '` VALUES LESS THAN (''',
    UTC_DATE() + INTERVAL 1 DAY, '''), ',
    'PARTITION `p', DATE_FORMAT(UTC_DATE() + INTERVAL 2 DAY, '%Y%m%d'), '` VALUES LESS THAN (''',
    UTC_DATE() + INTERVAL 2 DAY, '''), ',
    'PARTITION `p', DATE_FORMAT(UTC_DATE() + INTERVAL 3 DAY, '%Y%m%d'), '` VALUES LESS THAN (''',
    UTC_DATE() + INTERVAL 3 DAY, '''), ',
    'PARTITION `pmax` VALUES LESS THAN (MAXVALUE))'));

PREPARE jobs_ddl FROM @jobs_ddl;

EXECUTE jobs_ddl;

DEALLOCATE PREPARE jobs_ddl;
