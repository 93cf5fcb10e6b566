-- PostgreSQL schema, version 8: the state `blocked`, a limited job that is due but waits for a
-- free slot of its full scope. It stays out of the acquisition indexes (partial on
-- `state IN ('timer', 'async')`), so a full scope's backlog costs the acquisition walk nothing;
-- a suspended blocked job remembers it in `suspended_from`. Never edit after release: add a
-- later file instead. `{{jobs}}` is the quoted, schema-qualified jobs table, `{{prefix}}` the
-- validated table prefix.
--
-- The CHECKs on `state` and `suspended_from` are replaced. Every path to version 7 named them
-- `<prefix>jobs_state_check` and `<prefix>jobs_suspended_from_check` (0001's inline CHECKs,
-- named by PostgreSQL after the table; 0002 adds them under those names to a table of the
-- TypeORM store's former DDL; `jobsEntities` declares them so), but a table renamed by hand
-- keeps its old names: every CHECK on exactly one of these columns goes, whatever its name.
DO $$
DECLARE
  old_check text;
BEGIN
  FOR old_check IN
    SELECT c.conname FROM pg_constraint c
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
    WHERE c.conrelid = '{{jobs}}'::regclass AND c.contype = 'c' AND cardinality(c.conkey) = 1
      AND a.attname IN ('state', 'suspended_from')
  LOOP
    EXECUTE format('ALTER TABLE {{jobs}} DROP CONSTRAINT %I', old_check);
  END LOOP;
END $$;

-- One ALTER: both CHECKs validated in one pass over the table.
ALTER TABLE {{jobs}}
  ADD CONSTRAINT "{{prefix}}jobs_state_check"
    CHECK (state IN ('timer', 'async', 'running', 'deadletter', 'suspended', 'blocked')),
  ADD CONSTRAINT "{{prefix}}jobs_suspended_from_check"
    CHECK (suspended_from IN ('timer', 'async', 'blocked'));

-- A limited job's scope gets a free slot: its blocked jobs in acquisition order, read from the
-- first entry.
CREATE INDEX IF NOT EXISTS "{{prefix}}jobs_scope_blocked"
  ON {{jobs}} (scope, priority DESC, due_at, id) WHERE state = 'blocked';
