-- SQLite schema, version 13: enqueue from SQL. `INSERT INTO {{prefix}}enqueue (type, payload,
-- options) VALUES (…)` writes a job as `engine.enqueue` does (DESIGN invariant 24), from any
-- SQLite client: `payload` and `options` are JSON text, `options` with enqueue's option names
-- (runAt as ISO 8601 text or epoch ms, delayMs, retries, priority, scope, exclusive, scopeLimit,
-- key, keyMode, tenantId, queue, meta, timeoutMs); a JSON null is an absent option. The view
-- reads nothing; its INSTEAD OF INSERT trigger checks every field (RAISE(ABORT) names it, and
-- the statement writes nothing), then inserts the job, or — for a held key — leaves it to its
-- holder, changed for keyMode replace/debounce as the store changes it (a running holder gets
-- a follow-up). The new job's id: `SELECT max(id) FROM {{prefix}}jobs` (or the key's holder's)
-- in the same transaction. Other connections see the commit through `PRAGMA data_version`.
-- Never edit after release: add a later file instead.
CREATE VIEW IF NOT EXISTS {{prefix}}enqueue (type, payload, options) AS
  SELECT NULL, NULL, NULL WHERE 0;

CREATE TRIGGER IF NOT EXISTS {{prefix}}enqueue_insert INSTEAD OF INSERT ON {{prefix}}enqueue
BEGIN
  -- Every check, in order, before any write: the first that holds aborts the statement.
  SELECT CASE
    WHEN NEW.type IS NULL OR typeof(NEW.type) <> 'text' OR trim(NEW.type) = ''
      THEN RAISE(ABORT, '@jobs enqueue: type must be a non-empty string')
    WHEN length(NEW.type) > 255
      THEN RAISE(ABORT, '@jobs enqueue: type must be at most 255 characters')
    WHEN NEW.type GLOB '*[' || char(1) || '-' || char(31) || char(127) || ']*'
      THEN RAISE(ABORT, '@jobs enqueue: type must not contain control characters (newline, tab, …)')
    WHEN NOT json_valid(coalesce(NEW.payload, 'null'))
      THEN RAISE(ABORT, '@jobs enqueue: payload must be JSON text')
    WHEN length(CAST(json(coalesce(NEW.payload, 'null')) AS BLOB)) > 1048576
      THEN RAISE(ABORT, '@jobs enqueue: payload is more than the limit of 1048576 bytes of JSON')
    WHEN CASE WHEN json_valid(coalesce(NEW.options, '{}')) THEN json_type(coalesce(NEW.options, '{}')) <> 'object' ELSE 1 END
      THEN RAISE(ABORT, '@jobs enqueue: options must be a JSON object')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.retry') IS NOT NULL
      THEN RAISE(ABORT, '@jobs enqueue: options.retry (a retry policy) is not supported from SQL; give options.retries')
    WHEN EXISTS (SELECT 1 FROM json_each(coalesce(NEW.options, '{}')) WHERE key NOT IN ('runAt', 'delayMs', 'retries', 'priority', 'scope', 'exclusive', 'scopeLimit', 'key', 'keyMode', 'tenantId', 'queue', 'meta', 'timeoutMs'))
      THEN RAISE(ABORT, '@jobs enqueue: options has an unknown option (expected one of runAt, delayMs, retries, priority, scope, exclusive, scopeLimit, key, keyMode, tenantId, queue, meta, timeoutMs)')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.runAt'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.runAt') NOT IN ('text', 'integer', 'real') OR (json_type(coalesce(NEW.options, '{}'), '$.runAt') = 'text' AND julianday(json_extract(coalesce(NEW.options, '{}'), '$.runAt')) IS NULL))
      THEN RAISE(ABORT, '@jobs enqueue: options.runAt must be an ISO 8601 time or epoch milliseconds')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.runAt'), 'null') <> 'null' AND (CASE json_type(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'text' THEN CAST(ROUND((julianday(json_extract(coalesce(NEW.options, '{}'), '$.runAt')) - 2440587.5) * 86400000) AS INTEGER) WHEN 'integer' THEN json_extract(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'real' THEN CAST(json_extract(coalesce(NEW.options, '{}'), '$.runAt') AS INTEGER) END < 0 OR CASE json_type(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'text' THEN CAST(ROUND((julianday(json_extract(coalesce(NEW.options, '{}'), '$.runAt')) - 2440587.5) * 86400000) AS INTEGER) WHEN 'integer' THEN json_extract(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'real' THEN CAST(json_extract(coalesce(NEW.options, '{}'), '$.runAt') AS INTEGER) END > 253402300799999)
      THEN RAISE(ABORT, '@jobs enqueue: options.runAt must be between 1970-01-01 and 9999-12-31')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.runAt'), 'null') <> 'null' AND coalesce(json_type(coalesce(NEW.options, '{}'), '$.delayMs'), 'null') <> 'null'
      THEN RAISE(ABORT, '@jobs enqueue: options.delayMs: give either runAt or delayMs, not both')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.delayMs'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.delayMs') NOT IN ('integer', 'real') OR json_extract(coalesce(NEW.options, '{}'), '$.delayMs') < 0 OR json_extract(coalesce(NEW.options, '{}'), '$.delayMs') > 3155760000000)
      THEN RAISE(ABORT, '@jobs enqueue: options.delayMs must be a number of ms from 0 to 3155760000000 (a century)')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.retries'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.retries') <> 'integer' OR json_extract(coalesce(NEW.options, '{}'), '$.retries') < 0 OR json_extract(coalesce(NEW.options, '{}'), '$.retries') > 1000)
      THEN RAISE(ABORT, '@jobs enqueue: options.retries must be a whole number from 0 to 1000')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.priority'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.priority') <> 'integer' OR json_extract(coalesce(NEW.options, '{}'), '$.priority') < -2147483647 OR json_extract(coalesce(NEW.options, '{}'), '$.priority') > 2147483647)
      THEN RAISE(ABORT, '@jobs enqueue: options.priority must be a whole number from -2147483647 to 2147483647')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.scope'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.scope') <> 'text' OR trim(json_extract(coalesce(NEW.options, '{}'), '$.scope')) = '')
      THEN RAISE(ABORT, '@jobs enqueue: options.scope must be a non-empty string')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.scope') = 'text' AND length(json_extract(coalesce(NEW.options, '{}'), '$.scope')) > 255
      THEN RAISE(ABORT, '@jobs enqueue: options.scope must be at most 255 characters')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.scope') = 'text' AND json_extract(coalesce(NEW.options, '{}'), '$.scope') GLOB '*[' || char(1) || '-' || char(31) || char(127) || ']*'
      THEN RAISE(ABORT, '@jobs enqueue: options.scope must not contain control characters (newline, tab, …)')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.exclusive'), 'null') <> 'null' AND json_type(coalesce(NEW.options, '{}'), '$.exclusive') NOT IN ('true', 'false')
      THEN RAISE(ABORT, '@jobs enqueue: options.exclusive must be a boolean')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.exclusive') = 'true' AND json_extract(coalesce(NEW.options, '{}'), '$.scope') IS NULL
      THEN RAISE(ABORT, '@jobs enqueue: options.exclusive: an exclusive job needs a scope (options.scope)')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.scopeLimit'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.scopeLimit') <> 'integer' OR json_extract(coalesce(NEW.options, '{}'), '$.scopeLimit') < 1 OR json_extract(coalesce(NEW.options, '{}'), '$.scopeLimit') > 1000)
      THEN RAISE(ABORT, '@jobs enqueue: options.scopeLimit must be a whole number from 1 to 1000')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.scopeLimit'), 'null') <> 'null' AND json_extract(coalesce(NEW.options, '{}'), '$.scope') IS NULL
      THEN RAISE(ABORT, '@jobs enqueue: options.scopeLimit: a scope limit needs a scope (options.scope)')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.exclusive') = 'true' AND coalesce(json_type(coalesce(NEW.options, '{}'), '$.scopeLimit'), 'null') <> 'null' AND json_extract(coalesce(NEW.options, '{}'), '$.scopeLimit') <> 1
      THEN RAISE(ABORT, '@jobs enqueue: options.scopeLimit: exclusive means a scope limit of 1')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.key'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.key') <> 'text' OR trim(json_extract(coalesce(NEW.options, '{}'), '$.key')) = '')
      THEN RAISE(ABORT, '@jobs enqueue: options.key must be a non-empty string')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.key') = 'text' AND length(json_extract(coalesce(NEW.options, '{}'), '$.key')) > 255
      THEN RAISE(ABORT, '@jobs enqueue: options.key must be at most 255 characters')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.key') = 'text' AND json_extract(coalesce(NEW.options, '{}'), '$.key') GLOB '*[' || char(1) || '-' || char(31) || char(127) || ']*'
      THEN RAISE(ABORT, '@jobs enqueue: options.key must not contain control characters (newline, tab, …)')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.keyMode'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.keyMode') <> 'text' OR json_extract(coalesce(NEW.options, '{}'), '$.keyMode') NOT IN ('keep', 'replace', 'debounce'))
      THEN RAISE(ABORT, '@jobs enqueue: options.keyMode must be ''keep'', ''replace'' or ''debounce''')
    WHEN coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') <> 'keep' AND json_extract(coalesce(NEW.options, '{}'), '$.key') IS NULL
      THEN RAISE(ABORT, '@jobs enqueue: options.keyMode needs a key (options.key)')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.tenantId'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.tenantId') <> 'text' OR trim(json_extract(coalesce(NEW.options, '{}'), '$.tenantId')) = '')
      THEN RAISE(ABORT, '@jobs enqueue: options.tenantId must be a non-empty string')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.tenantId') = 'text' AND length(json_extract(coalesce(NEW.options, '{}'), '$.tenantId')) > 255
      THEN RAISE(ABORT, '@jobs enqueue: options.tenantId must be at most 255 characters')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.tenantId') = 'text' AND json_extract(coalesce(NEW.options, '{}'), '$.tenantId') GLOB '*[' || char(1) || '-' || char(31) || char(127) || ']*'
      THEN RAISE(ABORT, '@jobs enqueue: options.tenantId must not contain control characters (newline, tab, …)')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.queue'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.queue') <> 'text' OR trim(json_extract(coalesce(NEW.options, '{}'), '$.queue')) = '')
      THEN RAISE(ABORT, '@jobs enqueue: options.queue must be a non-empty string')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.queue') = 'text' AND length(json_extract(coalesce(NEW.options, '{}'), '$.queue')) > 255
      THEN RAISE(ABORT, '@jobs enqueue: options.queue must be at most 255 characters')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.queue') = 'text' AND json_extract(coalesce(NEW.options, '{}'), '$.queue') GLOB '*[' || char(1) || '-' || char(31) || char(127) || ']*'
      THEN RAISE(ABORT, '@jobs enqueue: options.queue must not contain control characters (newline, tab, …)')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.meta'), 'null') <> 'null' AND json_type(coalesce(NEW.options, '{}'), '$.meta') <> 'object'
      THEN RAISE(ABORT, '@jobs enqueue: options.meta must be an object of string values')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.meta') = 'object' AND (SELECT count(*) FROM json_each(coalesce(NEW.options, '{}'), '$.meta')) > 16
      THEN RAISE(ABORT, '@jobs enqueue: options.meta must have at most 16 entries')
    WHEN json_type(coalesce(NEW.options, '{}'), '$.meta') = 'object' AND EXISTS (SELECT 1 FROM json_each(coalesce(NEW.options, '{}'), '$.meta') WHERE type <> 'text' OR length(value) > 1024 OR value GLOB '*[' || char(1) || '-' || char(31) || char(127) || ']*' OR trim(key) = '' OR length(key) > 255 OR key GLOB '*[' || char(1) || '-' || char(31) || char(127) || ']*')
      THEN RAISE(ABORT, '@jobs enqueue: options.meta values must be strings of at most 1024 characters without control characters, keys names')
    WHEN coalesce(json_type(coalesce(NEW.options, '{}'), '$.timeoutMs'), 'null') <> 'null' AND (json_type(coalesce(NEW.options, '{}'), '$.timeoutMs') <> 'integer' OR json_extract(coalesce(NEW.options, '{}'), '$.timeoutMs') < 1 OR json_extract(coalesce(NEW.options, '{}'), '$.timeoutMs') > 604800000)
      THEN RAISE(ABORT, '@jobs enqueue: options.timeoutMs must be a whole number from 1 to 604800000')
  END;
  -- A running holder of the key: the change waits as its follow-up (the latest wins; debounce
  -- keeps the later due time).
  INSERT OR REPLACE INTO {{prefix}}jobs_followups (job_key, holder_id, job, created_at)
    SELECT v.job_key, h.id, json_patch(json_object('type', v.type, 'payload', json(v.payload),
        'priority', v.priority, 'retries', v.retries, 'scope', v.scope,
        'exclusive', json(CASE WHEN v.scope_limit = 1 THEN 'true' ELSE 'false' END),
        'key', v.job_key, 'keyMode', v.key_mode, 'tenantId', v.tenant_id, 'queue', v.queue,
        'retryPolicy', NULL, 'schedule', NULL, 'occurrence', NULL, 'shard', NULL,
        'meta', json(v.meta),
        'dueAt', CASE WHEN v.key_mode = 'debounce' THEN max(v.due, coalesce((SELECT json_extract(f.job, '$.dueAt') FROM {{prefix}}jobs_followups f WHERE f.job_key = v.job_key), v.due)) ELSE v.due END),
        json_object('scopeLimit', v.scope_limit, 'timeoutMs', v.timeout_ms)), v.now
    FROM (SELECT NEW.type AS type, json(coalesce(NEW.payload, 'null')) AS payload, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER) AS now,
      coalesce(CASE json_type(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'text' THEN CAST(ROUND((julianday(json_extract(coalesce(NEW.options, '{}'), '$.runAt')) - 2440587.5) * 86400000) AS INTEGER) WHEN 'integer' THEN json_extract(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'real' THEN CAST(json_extract(coalesce(NEW.options, '{}'), '$.runAt') AS INTEGER) END, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)) + coalesce(CAST(ROUND(json_extract(coalesce(NEW.options, '{}'), '$.delayMs')) AS INTEGER), 0) AS due,
      coalesce(json_extract(coalesce(NEW.options, '{}'), '$.retries'), 3) AS retries, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.priority'), 0) AS priority,
      json_extract(coalesce(NEW.options, '{}'), '$.scope') AS scope, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.scopeLimit'), CASE WHEN json_extract(coalesce(NEW.options, '{}'), '$.exclusive') = 1 THEN 1 END) AS scope_limit, json_extract(coalesce(NEW.options, '{}'), '$.key') AS job_key, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') AS key_mode,
      json_extract(coalesce(NEW.options, '{}'), '$.tenantId') AS tenant_id, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.queue'), 'default') AS queue, CASE WHEN json_type(coalesce(NEW.options, '{}'), '$.meta') = 'object' AND json_extract(coalesce(NEW.options, '{}'), '$.meta') <> '{}' THEN json_extract(coalesce(NEW.options, '{}'), '$.meta') END AS meta,
      json_extract(coalesce(NEW.options, '{}'), '$.timeoutMs') AS timeout_ms) v
    JOIN {{prefix}}jobs h ON h.job_key = v.job_key AND h.state = 'running'
    WHERE coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') <> 'keep' AND v.key_mode <> 'keep';
  -- A waiting holder takes the change: a follow-up kept for it is moot.
  DELETE FROM {{prefix}}jobs_followups WHERE job_key = json_extract(coalesce(NEW.options, '{}'), '$.key') AND coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') <> 'keep'
    AND EXISTS (SELECT 1 FROM {{prefix}}jobs h WHERE h.job_key = json_extract(coalesce(NEW.options, '{}'), '$.key') AND h.state IN ('timer', 'async', 'blocked'));
  UPDATE {{prefix}}jobs SET (payload, state, due_at) = (SELECT v.payload, CASE WHEN v.due > v.now THEN 'timer' ELSE 'async' END, v.due FROM (SELECT NEW.type AS type, json(coalesce(NEW.payload, 'null')) AS payload, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER) AS now,
      coalesce(CASE json_type(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'text' THEN CAST(ROUND((julianday(json_extract(coalesce(NEW.options, '{}'), '$.runAt')) - 2440587.5) * 86400000) AS INTEGER) WHEN 'integer' THEN json_extract(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'real' THEN CAST(json_extract(coalesce(NEW.options, '{}'), '$.runAt') AS INTEGER) END, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)) + coalesce(CAST(ROUND(json_extract(coalesce(NEW.options, '{}'), '$.delayMs')) AS INTEGER), 0) AS due,
      coalesce(json_extract(coalesce(NEW.options, '{}'), '$.retries'), 3) AS retries, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.priority'), 0) AS priority,
      json_extract(coalesce(NEW.options, '{}'), '$.scope') AS scope, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.scopeLimit'), CASE WHEN json_extract(coalesce(NEW.options, '{}'), '$.exclusive') = 1 THEN 1 END) AS scope_limit, json_extract(coalesce(NEW.options, '{}'), '$.key') AS job_key, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') AS key_mode,
      json_extract(coalesce(NEW.options, '{}'), '$.tenantId') AS tenant_id, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.queue'), 'default') AS queue, CASE WHEN json_type(coalesce(NEW.options, '{}'), '$.meta') = 'object' AND json_extract(coalesce(NEW.options, '{}'), '$.meta') <> '{}' THEN json_extract(coalesce(NEW.options, '{}'), '$.meta') END AS meta,
      json_extract(coalesce(NEW.options, '{}'), '$.timeoutMs') AS timeout_ms) v)
    WHERE job_key = json_extract(coalesce(NEW.options, '{}'), '$.key') AND coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') = 'replace' AND state IN ('timer', 'async', 'blocked');
  UPDATE {{prefix}}jobs SET (payload, state, due_at) = (SELECT v.payload,
      CASE WHEN {{prefix}}jobs.due_at < v.due THEN CASE WHEN v.due > v.now THEN 'timer' ELSE 'async' END ELSE {{prefix}}jobs.state END,
      CASE WHEN {{prefix}}jobs.due_at < v.due THEN v.due ELSE {{prefix}}jobs.due_at END FROM (SELECT NEW.type AS type, json(coalesce(NEW.payload, 'null')) AS payload, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER) AS now,
      coalesce(CASE json_type(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'text' THEN CAST(ROUND((julianday(json_extract(coalesce(NEW.options, '{}'), '$.runAt')) - 2440587.5) * 86400000) AS INTEGER) WHEN 'integer' THEN json_extract(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'real' THEN CAST(json_extract(coalesce(NEW.options, '{}'), '$.runAt') AS INTEGER) END, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)) + coalesce(CAST(ROUND(json_extract(coalesce(NEW.options, '{}'), '$.delayMs')) AS INTEGER), 0) AS due,
      coalesce(json_extract(coalesce(NEW.options, '{}'), '$.retries'), 3) AS retries, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.priority'), 0) AS priority,
      json_extract(coalesce(NEW.options, '{}'), '$.scope') AS scope, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.scopeLimit'), CASE WHEN json_extract(coalesce(NEW.options, '{}'), '$.exclusive') = 1 THEN 1 END) AS scope_limit, json_extract(coalesce(NEW.options, '{}'), '$.key') AS job_key, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') AS key_mode,
      json_extract(coalesce(NEW.options, '{}'), '$.tenantId') AS tenant_id, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.queue'), 'default') AS queue, CASE WHEN json_type(coalesce(NEW.options, '{}'), '$.meta') = 'object' AND json_extract(coalesce(NEW.options, '{}'), '$.meta') <> '{}' THEN json_extract(coalesce(NEW.options, '{}'), '$.meta') END AS meta,
      json_extract(coalesce(NEW.options, '{}'), '$.timeoutMs') AS timeout_ms) v)
    WHERE job_key = json_extract(coalesce(NEW.options, '{}'), '$.key') AND coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') = 'debounce' AND state IN ('timer', 'async', 'blocked');
  -- A new job, unless its key is held (the holder is the answer).
  INSERT INTO {{prefix}}jobs (type, payload, state, priority, due_at, retries_left, attempts, scope,
      exclusive, job_key, tenant_id, queue, created_at, meta, scope_limit, timeout_ms)
    SELECT v.type, v.payload, CASE WHEN v.due > v.now THEN 'timer' ELSE 'async' END, v.priority, v.due, v.retries, 0, v.scope,
      v.scope_limit IS NOT NULL, v.job_key, v.tenant_id, v.queue, v.now, v.meta,
      CASE WHEN v.scope_limit > 1 THEN v.scope_limit END, v.timeout_ms
    FROM (SELECT NEW.type AS type, json(coalesce(NEW.payload, 'null')) AS payload, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER) AS now,
      coalesce(CASE json_type(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'text' THEN CAST(ROUND((julianday(json_extract(coalesce(NEW.options, '{}'), '$.runAt')) - 2440587.5) * 86400000) AS INTEGER) WHEN 'integer' THEN json_extract(coalesce(NEW.options, '{}'), '$.runAt') WHEN 'real' THEN CAST(json_extract(coalesce(NEW.options, '{}'), '$.runAt') AS INTEGER) END, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)) + coalesce(CAST(ROUND(json_extract(coalesce(NEW.options, '{}'), '$.delayMs')) AS INTEGER), 0) AS due,
      coalesce(json_extract(coalesce(NEW.options, '{}'), '$.retries'), 3) AS retries, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.priority'), 0) AS priority,
      json_extract(coalesce(NEW.options, '{}'), '$.scope') AS scope, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.scopeLimit'), CASE WHEN json_extract(coalesce(NEW.options, '{}'), '$.exclusive') = 1 THEN 1 END) AS scope_limit, json_extract(coalesce(NEW.options, '{}'), '$.key') AS job_key, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.keyMode'), 'keep') AS key_mode,
      json_extract(coalesce(NEW.options, '{}'), '$.tenantId') AS tenant_id, coalesce(json_extract(coalesce(NEW.options, '{}'), '$.queue'), 'default') AS queue, CASE WHEN json_type(coalesce(NEW.options, '{}'), '$.meta') = 'object' AND json_extract(coalesce(NEW.options, '{}'), '$.meta') <> '{}' THEN json_extract(coalesce(NEW.options, '{}'), '$.meta') END AS meta,
      json_extract(coalesce(NEW.options, '{}'), '$.timeoutMs') AS timeout_ms) v
    WHERE v.job_key IS NULL OR NOT EXISTS (SELECT 1 FROM {{prefix}}jobs h WHERE h.job_key = v.job_key);
END;
