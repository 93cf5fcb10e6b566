-- PostgreSQL schema, version 18: history in partitions by day of `finished_at` (UTC), so retention
-- drops a whole day (one statement, no dead rows) instead of deleting it row by row. Never edit
-- after release: add a later file instead. `{{history}}` is the quoted, schema-qualified history
-- table, `{{qualifier}}` its schema (`"jobs".`, or empty for the search path), `{{prefix}}` the
-- validated table prefix.
--
-- The table becomes the parent of its partitions; the records it holds stay where they are, as
-- its DEFAULT partition (no copy), which also takes any record of a day that has no partition
-- yet. Its primary key becomes (id, finished_at): a partitioned table's keys include the
-- partition key. `jobs_history_maintain(cutoff, today)` creates the partitions of today and the
-- next two days when absent and drops every day partition that ended at or before `cutoff`,
-- returning how many records went with them; the store calls it when it prunes (under the
-- pruning lock), and once here. A day whose records already sit in the DEFAULT partition gets no
-- partition (those records are deleted row by row, as before). A lock it cannot take within
-- 500 ms (a long transaction reading history), or a role that may not create or drop tables
-- (an application role beside the one that migrates), leaves the work for the next call, and
-- pruning deletes row by row meanwhile.

ALTER TABLE {{history}} RENAME TO "{{prefix}}jobs_history_default";

ALTER INDEX {{qualifier}}"{{prefix}}jobs_history_finished" RENAME TO "{{prefix}}jobs_history_default_finished";

ALTER INDEX {{qualifier}}"{{prefix}}jobs_history_type" RENAME TO "{{prefix}}jobs_history_default_type";

ALTER INDEX {{qualifier}}"{{prefix}}jobs_history_outcome" RENAME TO "{{prefix}}jobs_history_default_outcome";

DO $$
DECLARE
  pk name;
BEGIN
  SELECT conname INTO pk FROM pg_constraint
   WHERE conrelid = to_regclass('{{qualifier}}"{{prefix}}jobs_history_default"') AND contype = 'p';
  IF pk IS NOT NULL THEN
    EXECUTE format('ALTER TABLE {{qualifier}}"{{prefix}}jobs_history_default" DROP CONSTRAINT %I', pk);
  END IF;
END $$;

CREATE TABLE {{history}} (
  LIKE {{qualifier}}"{{prefix}}jobs_history_default" INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
  CONSTRAINT "{{prefix}}jobs_history_pk" PRIMARY KEY (id, finished_at)
) PARTITION BY RANGE (finished_at);

CREATE INDEX "{{prefix}}jobs_history_finished" ON {{history}} (finished_at, id);

CREATE INDEX "{{prefix}}jobs_history_type" ON {{history}} (type, finished_at);

CREATE INDEX "{{prefix}}jobs_history_outcome" ON {{history}} (outcome, finished_at);

ALTER TABLE {{history}} ATTACH PARTITION {{qualifier}}"{{prefix}}jobs_history_default" DEFAULT;

CREATE FUNCTION {{qualifier}}"{{prefix}}jobs_history_maintain"(
  cutoff timestamptz,
  today date DEFAULT (now() AT TIME ZONE 'UTC')::date
) RETURNS bigint LANGUAGE plpgsql SET lock_timeout = '500ms' AS $$
DECLARE
  parent regclass := to_regclass('{{history}}');
  space name;
  base text := left('{{prefix}}jobs_history', 50);
  day date;
  part record;
  n bigint;
  dropped bigint := 0;
BEGIN
  SELECT nspname INTO space FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
   WHERE c.oid = parent;
  FOR i IN 0..2 LOOP
    day := today + i;
    IF to_regclass(format('%I.%I', space, base || '_' || to_char(day, 'YYYYMMDD'))) IS NULL THEN
      BEGIN
        EXECUTE format('CREATE TABLE %I.%I (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
          space, base || '_' || to_char(day, 'YYYYMMDD'), parent);
        EXECUTE format('ALTER TABLE %s ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
          parent, space, base || '_' || to_char(day, 'YYYYMMDD'),
          day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
      EXCEPTION WHEN check_violation OR lock_not_available OR duplicate_table
                  OR insufficient_privilege THEN
        -- Records of that day in the DEFAULT partition, a lock not granted in time, another
        -- process made it, or a role that may not create tables: the subtransaction undid the
        -- CREATE; the next call tries again (the day's records go to DEFAULT meanwhile).
        NULL;
      END;
    END IF;
  END LOOP;
  FOR part IN
    SELECT c.oid::regclass AS rel, right(c.relname, 8) AS ymd
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = parent AND c.relname ~ '_[0-9]{8}$'
       AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
     ORDER BY 2
  LOOP
    EXIT WHEN (to_date(part.ymd, 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' > cutoff;
    BEGIN
      EXECUTE format('SELECT count(*) FROM %s', part.rel) INTO n;
      EXECUTE format('DROP TABLE %s', part.rel);
      dropped := dropped + n;
    EXCEPTION WHEN lock_not_available OR insufficient_privilege THEN
      -- Held by a long transaction, or a role that does not own the table: its records past
      -- the retention are deleted row by row after this call; the next call tries again.
      EXIT;
    END;
  END LOOP;
  RETURN dropped;
END $$;

SELECT {{qualifier}}"{{prefix}}jobs_history_maintain"('-infinity');
