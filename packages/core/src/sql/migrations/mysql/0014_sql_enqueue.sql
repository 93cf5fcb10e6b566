-- MySQL/MariaDB schema, version 13: enqueue from SQL. `CALL {{prefix}}enqueue(type, payload,
-- options)` writes a job as `engine.enqueue` does (DESIGN invariant 24) and answers one row,
-- `id`: the new job's, or its key's holder's. `payload` and `options` are JSON text, `options`
-- with enqueue's option names (runAt as ISO 8601 text or epoch ms, delayMs, retries, priority,
-- scope, exclusive, scopeLimit, key, keyMode, tenantId, queue, meta, timeoutMs); a JSON null is
-- an absent option. Every field is checked before anything is written: bad input is SIGNALled
-- (SQLSTATE 45000) with a message naming the field. A held key answers its holder, changed for
-- keyMode replace/debounce as the store changes it (a running holder gets a follow-up); call it
-- inside a transaction for those two to be one atomic change, as the store's own enqueue is.
-- New rows wait as `timer`/`async` (a full limited scope is blocked by the engines' sweep). The
-- wake-up is the store's: a few idle stores' server-side waits end, whose `{{wait_prefix}}` is
-- the one `@jobs/mysql`'s waiters share (the stores that poll instead see the newest id move).
-- One statement for the driver (no DELIMITER): the loader ends it at the unindented `END;`.
-- Never edit after release: add a later file instead.
DROP PROCEDURE IF EXISTS `{{prefix}}enqueue`;

CREATE PROCEDURE `{{prefix}}enqueue`(IN p_type LONGTEXT, IN p_payload LONGTEXT, IN p_options LONGTEXT)
MODIFIES SQL DATA
proc: BEGIN
  DECLARE v_options LONGTEXT;
  DECLARE v_payload LONGTEXT;
  DECLARE v_keys LONGTEXT;
  DECLARE v_k LONGTEXT;
  DECLARE v_text LONGTEXT;
  DECLARE v_zone VARCHAR(8);
  DECLARE v_msg VARCHAR(128);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_now DATETIME(3);
  DECLARE v_run_at DATETIME(3) DEFAULT NULL;
  DECLARE v_delay BIGINT DEFAULT 0;
  DECLARE v_due DATETIME(3);
  DECLARE v_state VARCHAR(16);
  DECLARE v_retries INT DEFAULT 3;
  DECLARE v_priority INT DEFAULT 0;
  DECLARE v_scope VARCHAR(255) DEFAULT NULL;
  DECLARE v_exclusive TINYINT DEFAULT 0;
  DECLARE v_limit INT DEFAULT NULL;
  DECLARE v_key VARCHAR(255) DEFAULT NULL;
  DECLARE v_mode VARCHAR(16) DEFAULT 'keep';
  DECLARE v_tenant VARCHAR(255) DEFAULT NULL;
  DECLARE v_queue VARCHAR(255) DEFAULT 'default';
  DECLARE v_meta LONGTEXT DEFAULT NULL;
  DECLARE v_timeout INT DEFAULT NULL;
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_holder_state VARCHAR(16) DEFAULT NULL;
  DECLARE v_follow_due BIGINT;
  DECLARE v_earlier LONGTEXT DEFAULT NULL;
  DECLARE v_attempt INT DEFAULT 0;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  SET v_now = UTC_TIMESTAMP(3);
  -- Every check before any write: a refused call writes nothing.
  IF p_type IS NULL OR TRIM(p_type) = '' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: type must be a non-empty string';
  END IF;
  IF CHAR_LENGTH(p_type) > 255 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: type must be at most 255 characters';
  END IF;
  IF p_type REGEXP '[[:cntrl:]]' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: type must not contain control characters (newline, tab, ...)';
  END IF;
  SET v_payload = IFNULL(p_payload, 'null');
  IF NOT JSON_VALID(v_payload) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: payload must be JSON text';
  END IF;
  IF LENGTH(v_payload) > 1048576 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: payload is more than the limit of 1048576 bytes of JSON';
  END IF;
  SET v_options = IFNULL(p_options, '{}');
  -- Two checks: JSON_TYPE of invalid JSON is an error of its own.
  IF NOT JSON_VALID(v_options) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options must be a JSON object';
  END IF;
  IF JSON_TYPE(v_options) <> 'OBJECT' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options must be a JSON object';
  END IF;
  SET v_keys = JSON_KEYS(v_options);
  WHILE v_i < JSON_LENGTH(v_keys) DO
    SET v_k = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
    IF CAST(v_k AS BINARY) = CAST('retry' AS BINARY) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.retry (a retry policy) is not supported from SQL; give options.retries';
    END IF;
    IF CAST(v_k AS BINARY) NOT IN (CAST('runAt' AS BINARY), CAST('delayMs' AS BINARY), CAST('retries' AS BINARY), CAST('priority' AS BINARY), CAST('scope' AS BINARY), CAST('exclusive' AS BINARY), CAST('scopeLimit' AS BINARY), CAST('key' AS BINARY), CAST('keyMode' AS BINARY), CAST('tenantId' AS BINARY), CAST('queue' AS BINARY), CAST('meta' AS BINARY), CAST('timeoutMs' AS BINARY)) THEN
      SET v_msg = CONCAT('@jobs enqueue: options.', LEFT(v_k, 40), ' is an unknown option');
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.runAt')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.runAt')) IN ('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL') THEN
      SET v_run_at = TIMESTAMPADD(MICROSECOND, FLOOR(CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.runAt')) AS DECIMAL(30, 3))) * 1000, '1970-01-01 00:00:00.000');
    ELSEIF JSON_TYPE(JSON_EXTRACT(v_options, '$.runAt')) = 'STRING' AND JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.runAt')) REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]{1,9})?)?)?(Z|[+-][0-9]{2}:[0-9]{2})?$' THEN
      SET v_text = REPLACE(REPLACE(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.runAt')), 'T', ' '), 'Z', '');
      -- An offset is applied by hand: CONVERT_TZ leaves times outside TIMESTAMP's range as they are.
      IF v_text REGEXP '[+-][0-9]{2}:[0-9]{2}$' THEN
        SET v_zone = RIGHT(v_text, 6), v_text = LEFT(v_text, CHAR_LENGTH(v_text) - 6);
        SET v_run_at = TIMESTAMPADD(MINUTE, IF(LEFT(v_zone, 1) = '-', 1, -1) * (CAST(SUBSTRING(v_zone, 2, 2) AS SIGNED) * 60 + CAST(RIGHT(v_zone, 2) AS SIGNED)), CAST(v_text AS DATETIME(3)));
      ELSE
        SET v_run_at = CAST(v_text AS DATETIME(3));
      END IF;
    END IF;
    IF v_run_at IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.runAt must be an ISO 8601 time or epoch milliseconds';
    END IF;
    IF v_run_at < '1970-01-01 00:00:00.000' OR v_run_at > '9999-12-31 23:59:59.999' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.runAt must be between 1970-01-01 and 9999-12-31';
    END IF;
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.delayMs')), 'NULL') <> 'NULL' THEN
    IF v_run_at IS NOT NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.delayMs: give either runAt or delayMs, not both';
    END IF;
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.delayMs')) NOT IN ('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL') OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.delayMs')) AS DOUBLE) < 0 OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.delayMs')) AS DOUBLE) > 3155760000000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.delayMs must be a number of ms from 0 to 3155760000000 (a century)';
    END IF;
    SET v_delay = ROUND(CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.delayMs')) AS DOUBLE));
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.retries')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.retries')) NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.retries')) AS DECIMAL(40, 0)) < 0 OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.retries')) AS DECIMAL(40, 0)) > 1000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.retries must be a whole number from 0 to 1000';
    END IF;
    SET v_retries = CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.retries')) AS SIGNED);
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.priority')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.priority')) NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.priority')) AS DECIMAL(40, 0)) < -2147483647 OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.priority')) AS DECIMAL(40, 0)) > 2147483647 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.priority must be a whole number from -2147483647 to 2147483647';
    END IF;
    SET v_priority = CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.priority')) AS SIGNED);
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.scope')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.scope')) <> 'STRING' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.scope must be a non-empty string';
    END IF;
    SET v_scope = JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.scope'));
    IF v_scope IS NULL OR TRIM(v_scope) = '' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.scope must be a non-empty string';
    END IF;
    IF CHAR_LENGTH(v_scope) > 255 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.scope must be at most 255 characters';
    END IF;
    IF v_scope REGEXP '[[:cntrl:]]' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.scope must not contain control characters (newline, tab, ...)';
    END IF;
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.exclusive')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.exclusive')) <> 'BOOLEAN' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.exclusive must be a boolean';
    END IF;
    SET v_exclusive = IF(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.exclusive')) = 'true', 1, 0);
    IF v_exclusive = 1 AND v_scope IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.exclusive: an exclusive job needs a scope (options.scope)';
    END IF;
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.scopeLimit')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.scopeLimit')) NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.scopeLimit')) AS DECIMAL(40, 0)) < 1 OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.scopeLimit')) AS DECIMAL(40, 0)) > 1000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.scopeLimit must be a whole number from 1 to 1000';
    END IF;
    SET v_limit = CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.scopeLimit')) AS SIGNED);
  END IF;
  IF v_limit IS NOT NULL AND v_scope IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.scopeLimit: a scope limit needs a scope (options.scope)';
  END IF;
  IF v_exclusive = 1 AND IFNULL(v_limit, 1) <> 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.scopeLimit: exclusive means a scope limit of 1';
  END IF;
  IF v_exclusive = 1 THEN SET v_limit = 1; END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.key')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.key')) <> 'STRING' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.key must be a non-empty string';
    END IF;
    SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.key'));
    IF v_key IS NULL OR TRIM(v_key) = '' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.key must be a non-empty string';
    END IF;
    IF CHAR_LENGTH(v_key) > 255 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.key must be at most 255 characters';
    END IF;
    IF v_key REGEXP '[[:cntrl:]]' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.key must not contain control characters (newline, tab, ...)';
    END IF;
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.keyMode')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.keyMode')) <> 'STRING' OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.keyMode')) AS BINARY) NOT IN (CAST('keep' AS BINARY), CAST('replace' AS BINARY), CAST('debounce' AS BINARY)) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.keyMode must be ''keep'', ''replace'' or ''debounce''';
    END IF;
    SET v_mode = JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.keyMode'));
    IF v_key IS NULL AND v_mode <> 'keep' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.keyMode needs a key (options.key)';
    END IF;
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.tenantId')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.tenantId')) <> 'STRING' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.tenantId must be a non-empty string';
    END IF;
    SET v_tenant = JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.tenantId'));
    IF v_tenant IS NULL OR TRIM(v_tenant) = '' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.tenantId must be a non-empty string';
    END IF;
    IF CHAR_LENGTH(v_tenant) > 255 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.tenantId must be at most 255 characters';
    END IF;
    IF v_tenant REGEXP '[[:cntrl:]]' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.tenantId must not contain control characters (newline, tab, ...)';
    END IF;
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.queue')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.queue')) <> 'STRING' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.queue must be a non-empty string';
    END IF;
    SET v_queue = JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.queue'));
    IF v_queue IS NULL OR TRIM(v_queue) = '' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.queue must be a non-empty string';
    END IF;
    IF CHAR_LENGTH(v_queue) > 255 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.queue must be at most 255 characters';
    END IF;
    IF v_queue REGEXP '[[:cntrl:]]' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.queue must not contain control characters (newline, tab, ...)';
    END IF;
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.meta')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.meta')) <> 'OBJECT' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.meta must be an object of string values';
    END IF;
    IF JSON_LENGTH(JSON_EXTRACT(v_options, '$.meta')) > 16 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.meta must have at most 16 entries';
    END IF;
    SET v_keys = JSON_KEYS(JSON_EXTRACT(v_options, '$.meta'));
    SET v_i = 0;
    WHILE v_i < JSON_LENGTH(v_keys) DO
      SET v_k = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
      IF v_k IS NULL OR TRIM(v_k) = '' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.meta key must be a non-empty string';
      END IF;
      IF CHAR_LENGTH(v_k) > 255 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.meta key must be at most 255 characters';
      END IF;
      IF v_k REGEXP '[[:cntrl:]]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.meta key must not contain control characters (newline, tab, ...)';
      END IF;
      SET v_text = JSON_EXTRACT(JSON_EXTRACT(v_options, '$.meta'), CONCAT('$.', JSON_QUOTE(v_k)));
      IF JSON_TYPE(v_text) <> 'STRING' OR CHAR_LENGTH(JSON_UNQUOTE(v_text)) > 1024 OR JSON_UNQUOTE(v_text) REGEXP '[[:cntrl:]]' THEN
        SET v_msg = CONCAT('@jobs enqueue: options.meta.', LEFT(v_k, 40), ' must be a string of at most 1024 characters');
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
    IF JSON_LENGTH(JSON_EXTRACT(v_options, '$.meta')) > 0 THEN SET v_meta = JSON_EXTRACT(v_options, '$.meta'); END IF;
  END IF;
  IF IFNULL(JSON_TYPE(JSON_EXTRACT(v_options, '$.timeoutMs')), 'NULL') <> 'NULL' THEN
    IF JSON_TYPE(JSON_EXTRACT(v_options, '$.timeoutMs')) NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.timeoutMs')) AS DECIMAL(40, 0)) < 1 OR CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.timeoutMs')) AS DECIMAL(40, 0)) > 604800000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.timeoutMs must be a whole number from 1 to 604800000';
    END IF;
    SET v_timeout = CAST(JSON_UNQUOTE(JSON_EXTRACT(v_options, '$.timeoutMs')) AS SIGNED);
  END IF;
  -- Due time and state as the store writes them (rules.ts).
  SET v_due = TIMESTAMPADD(MICROSECOND, v_delay * 1000, IFNULL(v_run_at, v_now));
  SET v_state = IF(v_due > v_now, 'timer', 'async');
  IF v_key IS NOT NULL AND v_mode <> 'keep' THEN
    -- The holder, locked by primary key (no gap locks), as the store locks it.
    SELECT id INTO v_id FROM {{jobs}} WHERE job_key = v_key;
    IF v_id IS NOT NULL THEN
      SET v_holder_state = NULL;
      SELECT state INTO v_holder_state FROM {{jobs}} WHERE id = v_id FOR UPDATE;
      IF v_holder_state = 'running' THEN
        -- Its handler has the payload already: the change runs after it (a follow-up).
        SET v_follow_due = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000', v_due) DIV 1000;
        IF v_mode = 'debounce' THEN
          SELECT job INTO v_earlier FROM {{followups}} WHERE job_key = v_key;
          IF v_earlier IS NOT NULL AND JSON_TYPE(JSON_EXTRACT(v_earlier, '$.dueAt')) IN ('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE') THEN
            SET v_follow_due = GREATEST(v_follow_due, CAST(JSON_UNQUOTE(JSON_EXTRACT(v_earlier, '$.dueAt')) AS SIGNED));
          END IF;
        END IF;
        DELETE FROM {{followups}} WHERE job_key = v_key;
        INSERT INTO {{followups}} (job_key, holder_id, job, created_at) VALUES (v_key, v_id, CONCAT(
            '{"type":', JSON_QUOTE(p_type), ',"payload":', v_payload, ',"priority":', v_priority,
            ',"retries":', v_retries, ',"scope":', IFNULL(JSON_QUOTE(v_scope), 'null'),
            ',"exclusive":', IF(v_limit = 1, 'true', 'false'),
            IF(v_limit IS NULL, '', CONCAT(',"scopeLimit":', v_limit)),
            ',"key":', JSON_QUOTE(v_key), ',"keyMode":', JSON_QUOTE(v_mode),
            ',"tenantId":', IFNULL(JSON_QUOTE(v_tenant), 'null'), ',"queue":', JSON_QUOTE(v_queue),
            ',"retryPolicy":null,"schedule":null,"occurrence":null,"shard":null',
            ',"meta":', IFNULL(v_meta, 'null'),
            IF(v_timeout IS NULL, '', CONCAT(',"timeoutMs":', v_timeout)),
            ',"dueAt":', v_follow_due, '}'), v_now);
        SELECT v_id AS id;
      ELSEIF v_holder_state IN ('timer', 'async', 'blocked') THEN
        -- The waiting holder carries the latest change now: a follow-up is moot.
        DELETE FROM {{followups}} WHERE job_key = v_key;
        IF v_mode = 'replace' THEN
          UPDATE {{jobs}} SET payload = v_payload, state = v_state, due_at = v_due WHERE id = v_id;
        ELSE
          -- `state` before `due_at`: MySQL reads columns assigned earlier in the same SET.
          UPDATE {{jobs}} SET payload = v_payload,
              state = IF(due_at < v_due, v_state, state),
              due_at = IF(due_at < v_due, v_due, due_at)
            WHERE id = v_id;
        END IF;
        -- Idle stores waiting on the server (SELECT SLEEP … AS `<wait_prefix>…`) wake at once, as
        -- after the store's own enqueue: a few of their waits end (KILL QUERY); in a caller's
        -- transaction they read before its commit and wait again, as for the store's.
        -- Not inside a caller's transaction, as the store rings only after its own commits: a
        -- waiter would read before the commit. (MariaDB says so in @@in_transaction, read by a
        -- prepared statement: a server without it fails that statement alone, and rings.)
        SET @jobs_enqueue_in_tx = 0;
        BEGIN
          DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET @jobs_enqueue_in_tx = 0;
          PREPARE jobs_enqueue_in_tx FROM 'SELECT @@in_transaction INTO @jobs_enqueue_in_tx';
          EXECUTE jobs_enqueue_in_tx;
          DEALLOCATE PREPARE jobs_enqueue_in_tx;
        END;
        IF IFNULL(@jobs_enqueue_in_tx, 0) = 0 THEN
          BEGIN
            DECLARE v_waiter BIGINT;
            DECLARE v_none TINYINT DEFAULT 0;
            DECLARE waiters CURSOR FOR SELECT ID FROM information_schema.PROCESSLIST
                WHERE COMMAND = 'Query' AND INFO LIKE 'SELECT SLEEP(% AS `{{wait_prefix}}%'{{wait_same_db}}
                ORDER BY RAND() LIMIT 2;
            DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_none = 1;
            -- Gone meanwhile, or another user's: its wait ends on its own.
            DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
            OPEN waiters;
            ringing: LOOP
              FETCH waiters INTO v_waiter;
              IF v_none = 1 THEN LEAVE ringing; END IF;
              KILL QUERY v_waiter;
            END LOOP;
            CLOSE waiters;
          END;
        END IF;
        SELECT v_id AS id;
      ELSEIF v_holder_state IS NOT NULL THEN
        SELECT v_id AS id;
      END IF;
      IF v_holder_state IS NOT NULL THEN
        LEAVE proc;
      END IF;
    END IF;
  END IF;
  -- A new job, unless its key is held: then its holder, inserted again if it finished meanwhile.
  WHILE v_attempt < 5 DO
    SET v_attempt = v_attempt + 1, v_id = NULL, v_duplicate = 0;
    IF v_key IS NOT NULL THEN
      SELECT id INTO v_id FROM {{jobs}} WHERE job_key = v_key;
    END IF;
    IF v_id IS NULL THEN
      INSERT INTO {{jobs}} (type, payload, state, priority, due_at, retries_left, attempts, scope,
          exclusive, job_key, tenant_id, queue, created_at, meta, scope_limit, timeout_ms)
        VALUES (p_type, v_payload, v_state, v_priority, v_due, v_retries, 0, v_scope,
          v_limit IS NOT NULL, v_key, v_tenant, v_queue, v_now, v_meta, IF(v_limit > 1, v_limit, NULL), v_timeout);
      IF v_duplicate = 0 THEN
        SET v_id = LAST_INSERT_ID();
        -- Idle stores waiting on the server (SELECT SLEEP … AS `<wait_prefix>…`) wake at once, as
        -- after the store's own enqueue: a few of their waits end (KILL QUERY); in a caller's
        -- transaction they read before its commit and wait again, as for the store's.
        -- Not inside a caller's transaction, as the store rings only after its own commits: a
        -- waiter would read before the commit. (MariaDB says so in @@in_transaction, read by a
        -- prepared statement: a server without it fails that statement alone, and rings.)
        SET @jobs_enqueue_in_tx = 0;
        BEGIN
          DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET @jobs_enqueue_in_tx = 0;
          PREPARE jobs_enqueue_in_tx FROM 'SELECT @@in_transaction INTO @jobs_enqueue_in_tx';
          EXECUTE jobs_enqueue_in_tx;
          DEALLOCATE PREPARE jobs_enqueue_in_tx;
        END;
        IF IFNULL(@jobs_enqueue_in_tx, 0) = 0 THEN
          BEGIN
            DECLARE v_waiter BIGINT;
            DECLARE v_none TINYINT DEFAULT 0;
            DECLARE waiters CURSOR FOR SELECT ID FROM information_schema.PROCESSLIST
                WHERE COMMAND = 'Query' AND INFO LIKE 'SELECT SLEEP(% AS `{{wait_prefix}}%'{{wait_same_db}}
                ORDER BY RAND() LIMIT 2;
            DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_none = 1;
            -- Gone meanwhile, or another user's: its wait ends on its own.
            DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
            OPEN waiters;
            ringing: LOOP
              FETCH waiters INTO v_waiter;
              IF v_none = 1 THEN LEAVE ringing; END IF;
              KILL QUERY v_waiter;
            END LOOP;
            CLOSE waiters;
          END;
        END IF;
        SELECT v_id AS id;
        LEAVE proc;
      END IF;
      SELECT id INTO v_id FROM {{jobs}} WHERE job_key = v_key LOCK IN SHARE MODE;
    END IF;
    IF v_id IS NOT NULL THEN
      SELECT v_id AS id;
      LEAVE proc;
    END IF;
  END WHILE;
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '@jobs enqueue: options.key kept changing hands';
END;
