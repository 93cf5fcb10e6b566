-- PostgreSQL schema, version 16: enqueue many jobs from SQL in one call.
-- `{{qualifier}}"{{prefix}}enqueue_many"(type, payloads, options)` writes one job per element of
-- the JSON array `payloads`, all of `type` with the same `options`, as `engine.enqueueMany` does,
-- and returns their ids in the array's order. The rules are `enqueue`'s, because the first job
-- goes through it (every check of type and options, its due time, state, wake-up); the others
-- copy that row's columns with their own payload in one INSERT … SELECT — no function call per
-- job. Every payload's size is checked before anything is written; bad input raises an error
-- (SQLSTATE 22023) naming the field (`payloads[3]`), and nothing is written. A key names one
-- job, so `options.key` and `options.keyMode` are refused here: enqueue keyed jobs with
-- `enqueue`. Never edit after release: add a later file instead.
CREATE OR REPLACE FUNCTION {{qualifier}}"{{prefix}}enqueue_many"(type text, payloads jsonb, options jsonb DEFAULT '{}'::jsonb)
RETURNS SETOF bigint LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  v_first bigint;
  v_bad bigint;
BEGIN
  IF $2 IS NULL OR jsonb_typeof($2) <> 'array' THEN
    RAISE EXCEPTION '@jobs enqueue_many: payloads must be a JSON array, got %',
      coalesce(left($2::text, 100), 'null') USING ERRCODE = '22023';
  END IF;
  IF jsonb_typeof($3) = 'object' AND (coalesce(jsonb_typeof($3 -> 'key'), 'null') <> 'null'
      OR coalesce(jsonb_typeof($3 -> 'keyMode'), 'null') <> 'null') THEN
    RAISE EXCEPTION '@jobs enqueue_many: options.key: a key names one job; enqueue keyed jobs one at a time with enqueue'
      USING ERRCODE = '22023';
  END IF;
  IF jsonb_array_length($2) = 0 THEN
    RETURN;
  END IF;
  SELECT e.n - 1 INTO v_bad FROM jsonb_array_elements($2) WITH ORDINALITY AS e(p, n)
    WHERE octet_length(e.p::text) > 1048576 ORDER BY e.n LIMIT 1;
  IF v_bad IS NOT NULL THEN
    RAISE EXCEPTION '@jobs enqueue_many: payloads[%] is more than the limit of 1048576 bytes of JSON',
      v_bad USING ERRCODE = '22023';
  END IF;
  v_first := {{qualifier}}"{{prefix}}enqueue"($1, $2 -> 0, $3);
  RETURN NEXT v_first;
  RETURN QUERY
    INSERT INTO {{jobs}} (type, payload, state, priority, due_at, retries_left, attempts, scope,
      exclusive, job_key, tenant_id, queue, created_at, meta, scope_limit, timeout_ms)
    SELECT f.type, e.p, f.state, f.priority, f.due_at, f.retries_left, 0, f.scope,
      f.exclusive, NULL, f.tenant_id, f.queue, f.created_at, f.meta, f.scope_limit, f.timeout_ms
    FROM {{jobs}} f, jsonb_array_elements($2) WITH ORDINALITY AS e(p, n)
    WHERE f.id = v_first AND e.n > 1
    ORDER BY e.n
    RETURNING id;
END $$;
