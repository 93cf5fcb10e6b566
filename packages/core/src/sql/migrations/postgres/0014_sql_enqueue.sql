-- PostgreSQL schema, version 13: enqueue from SQL. `{{qualifier}}"{{prefix}}enqueue"(type,
-- payload, options)` writes a job as `engine.enqueue` does (DESIGN invariant 24) and returns
-- its id: from triggers, migrations, psql or any language's client, inside the caller's
-- transaction (a rollback undoes it, the wake-up included). `options` is a JSON object with
-- enqueue's option names (runAt, delayMs, retries, priority, scope, exclusive, scopeLimit, key,
-- keyMode, tenantId, queue, meta, timeoutMs); a JSON null is an absent option. Bad input raises
-- an error (SQLSTATE 22023) naming the field, and nothing is written. A held key returns its
-- holder's id; `replace`/`debounce` change a waiting holder, or keep the change as the running
-- holder's follow-up, as the store does. New rows wait as `timer`/`async`: a limited job whose
-- scope is full is blocked by the engines' sweep, as a job enqueued in a caller's transaction
-- is. The wake-up is a NOTIFY on `{{channel}}`, the channel the store listens to. Never edit
-- after release: add a later file instead.
CREATE OR REPLACE FUNCTION {{qualifier}}"{{prefix}}enqueue_text"(value text, field text)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF value IS NULL OR value ~ '^\s*$' THEN
    RAISE EXCEPTION '@jobs enqueue: % must be a non-empty string, got %', field,
      coalesce(to_jsonb(value)::text, 'null') USING ERRCODE = '22023';
  END IF;
  IF length(value) > 255 THEN
    RAISE EXCEPTION '@jobs enqueue: % must be at most 255 characters, got %', field,
      length(value) USING ERRCODE = '22023';
  END IF;
  IF value ~ '[\x01-\x1f\x7f]' THEN
    RAISE EXCEPTION '@jobs enqueue: % must not contain control characters (newline, tab, …)', field
      USING ERRCODE = '22023';
  END IF;
  RETURN value;
END $$;

CREATE OR REPLACE FUNCTION {{qualifier}}"{{prefix}}enqueue_int"(value jsonb, field text, low numeric, high numeric)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF jsonb_typeof(value) <> 'number' OR (value::text)::numeric <> trunc((value::text)::numeric)
     OR (value::text)::numeric < low OR (value::text)::numeric > high THEN
    RAISE EXCEPTION '@jobs enqueue: % must be a whole number from % to %, got %', field, low,
      high, value::text USING ERRCODE = '22023';
  END IF;
  RETURN (value::text)::bigint;
END $$;

CREATE OR REPLACE FUNCTION {{qualifier}}"{{prefix}}enqueue"(type text, payload jsonb DEFAULT 'null'::jsonb, options jsonb DEFAULT '{}'::jsonb)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  o jsonb := coalesce($3, '{}'::jsonb);
  v_payload jsonb := coalesce($2, 'null'::jsonb);
  v_type text;
  k text;
  v jsonb;
  v_now timestamptz := statement_timestamp();
  v_run_at timestamptz;
  v_delay bigint := 0;
  v_due timestamptz;
  v_state text;
  v_retries integer := 3;
  v_priority integer := 0;
  v_scope text;
  v_exclusive boolean := false;
  v_limit integer;
  v_key text;
  v_mode text := 'keep';
  v_tenant text;
  v_queue text := 'default';
  v_meta jsonb;
  v_timeout integer;
  v_id bigint;
  h record;
  v_earlier jsonb;
  v_follow_due bigint;
BEGIN
  v_type := {{qualifier}}"{{prefix}}enqueue_text"($1, 'type');
  IF octet_length(v_payload::text) > 1048576 THEN
    RAISE EXCEPTION '@jobs enqueue: payload is % bytes of JSON, more than the limit of 1048576',
      octet_length(v_payload::text) USING ERRCODE = '22023';
  END IF;
  IF jsonb_typeof(o) <> 'object' THEN
    RAISE EXCEPTION '@jobs enqueue: options must be a JSON object, got %', o::text
      USING ERRCODE = '22023';
  END IF;
  -- No options (the common case): none of their checks.
  IF o <> '{}'::jsonb THEN
    FOR k IN SELECT jsonb_object_keys(o) LOOP
      IF k = 'retry' THEN
        RAISE EXCEPTION '@jobs enqueue: options.retry (a retry policy) is not supported from SQL; give options.retries'
          USING ERRCODE = '22023';
      END IF;
      IF NOT k = ANY (ARRAY['runAt', 'delayMs', 'retries', 'priority', 'scope', 'exclusive',
          'scopeLimit', 'key', 'keyMode', 'tenantId', 'queue', 'meta', 'timeoutMs']) THEN
        RAISE EXCEPTION '@jobs enqueue: options.% is an unknown option (expected one of runAt, delayMs, retries, priority, scope, exclusive, scopeLimit, key, keyMode, tenantId, queue, meta, timeoutMs)',
          k USING ERRCODE = '22023';
      END IF;
    END LOOP;
    -- A JSON null is an absent option.
    o := jsonb_strip_nulls(o);

    v := o -> 'runAt';
    IF v IS NOT NULL THEN
      BEGIN
        IF jsonb_typeof(v) = 'number' THEN
          v_run_at := to_timestamp((v::text)::numeric / 1000);
        ELSIF jsonb_typeof(v) = 'string' THEN
          v_run_at := (v #>> '{}')::timestamptz;
        ELSE
          RAISE EXCEPTION 'bad runAt' USING ERRCODE = '22007';
        END IF;
      EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION '@jobs enqueue: options.runAt must be an ISO 8601 time or epoch milliseconds, got %',
          v::text USING ERRCODE = '22023';
      END;
      IF v_run_at < '1970-01-01T00:00:00Z'::timestamptz
         OR v_run_at > '9999-12-31T23:59:59.999Z'::timestamptz THEN
        RAISE EXCEPTION '@jobs enqueue: options.runAt must be between 1970-01-01 and 9999-12-31, got %',
          v::text USING ERRCODE = '22023';
      END IF;
      v_run_at := date_trunc('milliseconds', v_run_at);
    END IF;
    v := o -> 'delayMs';
    IF v IS NOT NULL THEN
      IF v_run_at IS NOT NULL THEN
        RAISE EXCEPTION '@jobs enqueue: options.delayMs: give either runAt or delayMs, not both'
          USING ERRCODE = '22023';
      END IF;
      IF jsonb_typeof(v) <> 'number' OR (v::text)::numeric < 0
         OR (v::text)::numeric > 3155760000000 THEN
        RAISE EXCEPTION '@jobs enqueue: options.delayMs must be a number of ms from 0 to 3155760000000 (a century), got %',
          v::text USING ERRCODE = '22023';
      END IF;
      v_delay := round((v::text)::numeric);
    END IF;
    IF (o -> 'retries') IS NOT NULL THEN
      v_retries := {{qualifier}}"{{prefix}}enqueue_int"(o -> 'retries', 'options.retries', 0, 1000);
    END IF;
    IF (o -> 'priority') IS NOT NULL THEN
      v_priority := {{qualifier}}"{{prefix}}enqueue_int"(o -> 'priority', 'options.priority', -2147483647, 2147483647);
    END IF;
    IF (o -> 'scope') IS NOT NULL THEN
      IF jsonb_typeof(o -> 'scope') <> 'string' THEN
        RAISE EXCEPTION '@jobs enqueue: options.scope must be a non-empty string, got %',
          (o -> 'scope')::text USING ERRCODE = '22023';
      END IF;
      v_scope := {{qualifier}}"{{prefix}}enqueue_text"(o ->> 'scope', 'options.scope');
    END IF;
    v := o -> 'exclusive';
    IF v IS NOT NULL THEN
      IF jsonb_typeof(v) <> 'boolean' THEN
        RAISE EXCEPTION '@jobs enqueue: options.exclusive must be a boolean, got %', v::text
          USING ERRCODE = '22023';
      END IF;
      v_exclusive := (v::text)::boolean;
      IF v_exclusive AND v_scope IS NULL THEN
        RAISE EXCEPTION '@jobs enqueue: options.exclusive: an exclusive job needs a scope (options.scope)'
          USING ERRCODE = '22023';
      END IF;
    END IF;
    IF (o -> 'scopeLimit') IS NOT NULL THEN
      v_limit := {{qualifier}}"{{prefix}}enqueue_int"(o -> 'scopeLimit', 'options.scopeLimit', 1, 1000);
      IF v_scope IS NULL THEN
        RAISE EXCEPTION '@jobs enqueue: options.scopeLimit: a scope limit needs a scope (options.scope)'
          USING ERRCODE = '22023';
      END IF;
      IF v_exclusive AND v_limit <> 1 THEN
        RAISE EXCEPTION '@jobs enqueue: options.scopeLimit: exclusive means a scope limit of 1, got exclusive: true with scopeLimit %',
          v_limit USING ERRCODE = '22023';
      END IF;
    ELSIF v_exclusive THEN
      v_limit := 1;
    END IF;
    IF (o -> 'key') IS NOT NULL THEN
      IF jsonb_typeof(o -> 'key') <> 'string' THEN
        RAISE EXCEPTION '@jobs enqueue: options.key must be a non-empty string, got %',
          (o -> 'key')::text USING ERRCODE = '22023';
      END IF;
      v_key := {{qualifier}}"{{prefix}}enqueue_text"(o ->> 'key', 'options.key');
    END IF;
    v := o -> 'keyMode';
    IF v IS NOT NULL THEN
      IF jsonb_typeof(v) <> 'string' OR NOT (v #>> '{}') IN ('keep', 'replace', 'debounce') THEN
        RAISE EXCEPTION '@jobs enqueue: options.keyMode must be ''keep'', ''replace'' or ''debounce'', got %',
          v::text USING ERRCODE = '22023';
      END IF;
      v_mode := v #>> '{}';
      IF v_key IS NULL AND v_mode <> 'keep' THEN
        RAISE EXCEPTION '@jobs enqueue: options.keyMode ''%'' needs a key (options.key)', v_mode
          USING ERRCODE = '22023';
      END IF;
    END IF;
    IF (o -> 'tenantId') IS NOT NULL THEN
      IF jsonb_typeof(o -> 'tenantId') <> 'string' THEN
        RAISE EXCEPTION '@jobs enqueue: options.tenantId must be a non-empty string, got %',
          (o -> 'tenantId')::text USING ERRCODE = '22023';
      END IF;
      v_tenant := {{qualifier}}"{{prefix}}enqueue_text"(o ->> 'tenantId', 'options.tenantId');
    END IF;
    IF (o -> 'queue') IS NOT NULL THEN
      IF jsonb_typeof(o -> 'queue') <> 'string' THEN
        RAISE EXCEPTION '@jobs enqueue: options.queue must be a non-empty string, got %',
          (o -> 'queue')::text USING ERRCODE = '22023';
      END IF;
      v_queue := {{qualifier}}"{{prefix}}enqueue_text"(o ->> 'queue', 'options.queue');
    END IF;
    v := o -> 'meta';
    IF v IS NOT NULL THEN
      IF jsonb_typeof(v) <> 'object' THEN
        RAISE EXCEPTION '@jobs enqueue: options.meta must be an object of string values, got %',
          v::text USING ERRCODE = '22023';
      END IF;
      IF (SELECT count(*) FROM jsonb_object_keys(v)) > 16 THEN
        RAISE EXCEPTION '@jobs enqueue: options.meta must have at most 16 entries' USING ERRCODE = '22023';
      END IF;
      FOR k IN SELECT jsonb_object_keys(v) LOOP
        PERFORM {{qualifier}}"{{prefix}}enqueue_text"(k, 'options.meta key');
        IF jsonb_typeof(v -> k) <> 'string' OR length(v ->> k) > 1024
           OR (v ->> k) ~ '[\x01-\x1f\x7f]' THEN
          RAISE EXCEPTION '@jobs enqueue: options.meta.% must be a string of at most 1024 characters without control characters',
            k USING ERRCODE = '22023';
        END IF;
      END LOOP;
      IF v <> '{}'::jsonb THEN v_meta := v; END IF;
    END IF;
    IF (o -> 'timeoutMs') IS NOT NULL THEN
      v_timeout := {{qualifier}}"{{prefix}}enqueue_int"(o -> 'timeoutMs', 'options.timeoutMs', 1, 604800000);
    END IF;
  END IF;

  -- Due time and state as the store writes them (rules.ts).
  v_due := coalesce(v_run_at, date_trunc('milliseconds', v_now)) + v_delay * interval '1 millisecond';
  v_state := CASE WHEN v_due > v_now THEN 'timer' ELSE 'async' END;

  IF v_key IS NOT NULL AND v_mode <> 'keep' THEN
    -- The holder, locked first: concurrent changes of one key queue on its row.
    SELECT id, state INTO h FROM {{jobs}} WHERE job_key = v_key FOR UPDATE;
    IF FOUND THEN
      IF h.state = 'running' THEN
        -- Its handler has the payload already: the change runs after it (a follow-up).
        v_follow_due := (extract(epoch FROM v_due) * 1000)::bigint;
        IF v_mode = 'debounce' THEN
          SELECT job INTO v_earlier FROM {{followups}} WHERE job_key = v_key;
          IF v_earlier IS NOT NULL AND (v_earlier ->> 'dueAt') IS NOT NULL THEN
            v_follow_due := greatest(v_follow_due, (v_earlier ->> 'dueAt')::numeric::bigint);
          END IF;
        END IF;
        DELETE FROM {{followups}} WHERE job_key = v_key;
        INSERT INTO {{followups}} (job_key, holder_id, job, created_at)
        VALUES (v_key, h.id, jsonb_strip_nulls(jsonb_build_object(
            'scopeLimit', CASE WHEN v_limit IS NULL THEN NULL ELSE to_jsonb(v_limit) END,
            'timeoutMs', CASE WHEN v_timeout IS NULL THEN NULL ELSE to_jsonb(v_timeout) END))
          || jsonb_build_object(
            'type', v_type, 'payload', v_payload, 'priority', v_priority, 'retries', v_retries,
            'scope', v_scope, 'exclusive', coalesce(v_limit = 1, false), 'key', v_key,
            'keyMode', v_mode, 'tenantId', v_tenant, 'queue', v_queue, 'retryPolicy', NULL,
            'schedule', NULL, 'occurrence', NULL, 'shard', NULL, 'meta', v_meta,
            'dueAt', v_follow_due),
          v_now);
        RETURN h.id;
      END IF;
      IF h.state IN ('timer', 'async', 'blocked') THEN
        -- The waiting holder carries the latest change now: a follow-up is moot.
        DELETE FROM {{followups}} WHERE job_key = v_key;
        IF v_mode = 'replace' THEN
          UPDATE {{jobs}} SET payload = v_payload, state = v_state, due_at = v_due
          WHERE id = h.id;
        ELSE
          UPDATE {{jobs}} SET payload = v_payload,
            state = CASE WHEN due_at < v_due THEN v_state ELSE state END,
            due_at = CASE WHEN due_at < v_due THEN v_due ELSE due_at END
          WHERE id = h.id;
        END IF;
        PERFORM pg_notify('{{channel}}', '');
      END IF;
      RETURN h.id;
    END IF;
  END IF;

  FOR attempt IN 1..5 LOOP
    INSERT INTO {{jobs}} (type, payload, state, priority, due_at, retries_left, attempts, scope,
      exclusive, job_key, tenant_id, queue, created_at, meta, scope_limit, timeout_ms)
    VALUES (v_type, v_payload, v_state, v_priority, v_due, v_retries, 0, v_scope,
      v_limit IS NOT NULL, v_key, v_tenant, v_queue, v_now, v_meta,
      CASE WHEN v_limit > 1 THEN v_limit END, v_timeout)
    ON CONFLICT (job_key) WHERE job_key IS NOT NULL DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NOT NULL THEN
      PERFORM pg_notify('{{channel}}', '');
      RETURN v_id;
    END IF;
    -- A held key: its holder, unless it finished meanwhile (then insert again).
    SELECT id INTO v_id FROM {{jobs}} WHERE job_key = v_key;
    IF v_id IS NOT NULL THEN RETURN v_id; END IF;
  END LOOP;
  RAISE EXCEPTION '@jobs enqueue: options.key % kept changing hands', to_jsonb(v_key)::text;
END $$;
