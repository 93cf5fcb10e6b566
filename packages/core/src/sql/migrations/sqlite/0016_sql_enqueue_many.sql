-- SQLite schema, version 16: enqueue many jobs from SQL in one statement.
-- `INSERT INTO {{prefix}}enqueue_many (type, payloads, options) VALUES (…)` writes one job per
-- element of the JSON array `payloads`, all of `type` with the same `options` (JSON text), as
-- `engine.enqueueMany` does, in the array's order. The rules are `{{prefix}}enqueue`'s, because
-- the first job goes through it (every check of type and options, its due time and state); the
-- others copy that row's columns with their own payload in one INSERT … SELECT — one trigger
-- run for the batch, not one per job. (An object or array element is its own JSON text in
-- `json_each`; only a scalar is read back as JSON with `->`, which parses the array again.) Every payload's size is checked before anything is
-- written; bad input aborts the statement (RAISE(ABORT) names the field) and nothing is
-- written. A key names one job, so `options.key` and `options.keyMode` are refused here. Their
-- ids: the last `json_array_length(payloads)` ids of `{{prefix}}jobs`, in the same transaction.
-- Never edit after release: add a later file instead.
CREATE VIEW IF NOT EXISTS {{prefix}}enqueue_many (type, payloads, options) AS
  SELECT NULL, NULL, NULL WHERE 0;

CREATE TRIGGER IF NOT EXISTS {{prefix}}enqueue_many_insert INSTEAD OF INSERT ON {{prefix}}enqueue_many
BEGIN
  SELECT CASE
    WHEN NEW.payloads IS NULL OR NOT json_valid(NEW.payloads) OR json_type(NEW.payloads) <> 'array'
      THEN RAISE(ABORT, '@jobs enqueue_many: payloads must be a JSON array')
    WHEN json_valid(coalesce(NEW.options, '{}')) AND json_type(coalesce(NEW.options, '{}')) = 'object'
        AND (coalesce(json_type(NEW.options, '$.key'), 'null') <> 'null'
          OR coalesce(json_type(NEW.options, '$.keyMode'), 'null') <> 'null')
      THEN RAISE(ABORT, '@jobs enqueue_many: options.key: a key names one job; enqueue keyed jobs one at a time')
    WHEN EXISTS (SELECT 1 FROM json_each(NEW.payloads) e
        WHERE length(CAST(CASE WHEN e.type IN ('object', 'array') THEN e.value
          ELSE NEW.payloads -> e.fullkey END AS BLOB)) > 1048576)
      THEN RAISE(ABORT, '@jobs enqueue_many: a payload (payloads[i]) is more than the limit of 1048576 bytes of JSON')
  END;
  INSERT INTO {{prefix}}enqueue (type, payload, options)
    SELECT NEW.type, NEW.payloads -> 0, NEW.options WHERE json_array_length(NEW.payloads) > 0;
  INSERT INTO {{prefix}}jobs (type, payload, state, priority, due_at, retries_left, attempts, scope,
      exclusive, job_key, tenant_id, queue, created_at, meta, scope_limit, timeout_ms)
    SELECT f.type, CASE WHEN e.type IN ('object', 'array') THEN e.value
        ELSE NEW.payloads -> e.fullkey END, f.state, f.priority, f.due_at, f.retries_left, 0,
      f.scope, f.exclusive, NULL, f.tenant_id, f.queue, f.created_at, f.meta, f.scope_limit,
      f.timeout_ms
    FROM {{prefix}}jobs f, json_each(NEW.payloads) e
    WHERE json_array_length(NEW.payloads) > 1
      AND f.id = (SELECT max(id) FROM {{prefix}}jobs) AND e.key > 0
    ORDER BY e.key;
END;
