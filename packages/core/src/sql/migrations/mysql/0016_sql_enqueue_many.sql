-- MySQL/MariaDB schema, version 16: enqueue many jobs from SQL in one call.
-- `CALL {{prefix}}enqueue_many(type, payloads, options)` writes one job per element of the JSON
-- array `payloads`, all of `type` with the same `options` (JSON text), as `engine.enqueueMany`
-- does, in the array's order, and answers one row, `id`: the first job's (the others follow it,
-- in order, with higher ids). The rules are `{{prefix}}enqueue`'s, because the first job goes
-- through it (every check of type and options, its due time and state, the wake-up); the
-- others copy that row's columns with their own payload in one INSERT … SELECT — one call for
-- the batch, not one per job. Every payload is checked before anything is written: bad input
-- is SIGNALled (SQLSTATE 45000) naming the field, and nothing is written. A key names one job,
-- so `options.key` and `options.keyMode` are refused here. Outside a transaction the first job
-- and the others are two commits; call it in one to have them all or none should the server
-- fail between. One statement for the driver (no DELIMITER): the loader ends it at the
-- unindented `END;`. Never edit after release: add a later file instead.
DROP PROCEDURE IF EXISTS `{{prefix}}enqueue_many`;

CREATE PROCEDURE `{{prefix}}enqueue_many`(IN p_type LONGTEXT, IN p_payloads LONGTEXT, IN p_options LONGTEXT)
MODIFIES SQL DATA
proc: BEGIN
  DECLARE v_first BIGINT;
  DECLARE v_bad BIGINT DEFAULT NULL;
  DECLARE v_msg VARCHAR(128);
  IF p_payloads IS NULL OR NOT JSON_VALID(p_payloads) OR JSON_TYPE(p_payloads) <> 'ARRAY' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue_many: payloads must be a JSON array';
  END IF;
  IF p_options IS NOT NULL AND JSON_VALID(p_options) AND JSON_TYPE(p_options) = 'OBJECT'
      AND (IFNULL(JSON_TYPE(JSON_EXTRACT(p_options, '$.key')), 'NULL') <> 'NULL'
        OR IFNULL(JSON_TYPE(JSON_EXTRACT(p_options, '$.keyMode')), 'NULL') <> 'NULL') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue_many: options.key: a key names one job; enqueue keyed jobs one at a time';
  END IF;
  IF JSON_LENGTH(p_payloads) = 0 THEN
    LEAVE proc;
  END IF;
  SELECT MIN(t.n) - 1 INTO v_bad
    FROM JSON_TABLE(p_payloads, '$[*]' COLUMNS (n FOR ORDINALITY, p JSON PATH '$')) t
    WHERE LENGTH(t.p) > 1048576;
  IF v_bad IS NOT NULL THEN
    SET v_msg = CONCAT('@jobs enqueue_many: payloads[', v_bad, '] is more than the limit of 1048576 bytes of JSON');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
  END IF;
  CALL `{{prefix}}enqueue`(p_type, JSON_EXTRACT(p_payloads, '$[0]'), p_options);
  SET v_first = LAST_INSERT_ID();
  INSERT INTO {{jobs}} (type, payload, state, priority, due_at, retries_left, attempts, scope,
      exclusive, job_key, tenant_id, queue, created_at, meta, scope_limit, timeout_ms)
    SELECT f.type, t.p, f.state, f.priority, f.due_at, f.retries_left, 0, f.scope,
      f.exclusive, NULL, f.tenant_id, f.queue, f.created_at, f.meta, f.scope_limit, f.timeout_ms
    FROM {{jobs}} f
    JOIN JSON_TABLE(p_payloads, '$[*]' COLUMNS (n FOR ORDINALITY, p JSON PATH '$')) t ON t.n > 1
    WHERE f.id = v_first
    ORDER BY t.n;
END;
