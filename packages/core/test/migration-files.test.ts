import { describe, expect, it } from 'vitest';
import { mysqlDialect, parseMigration, postgresDialect, sqliteDialect } from '../src/sql/index.js';

describe('the migration loader', () => {
  it('ends a CREATE TRIGGER or CREATE PROCEDURE at an unindented END; only', () => {
    const text = [
      'CREATE VIEW v (a) AS SELECT 1;',
      '',
      'CREATE TRIGGER t INSTEAD OF INSERT ON v',
      'BEGIN',
      '  -- a comment; inside',
      "  SELECT RAISE(ABORT, 'x') WHERE NEW.a IS NULL;",
      '  INSERT INTO w VALUES (NEW.a);',
      'END;',
      'CREATE PROCEDURE p()',
      'proc: BEGIN',
      '  IF 1 THEN',
      '    SELECT 1;',
      '  END IF;',
      '  BEGIN',
      '    SELECT 2;',
      '  END;',
      'END;',
      'DROP TABLE x;',
    ].join('\n');
    expect(parseMigration('0001_test', text, {}).statements).toEqual([
      'CREATE VIEW v (a) AS SELECT 1',
      "CREATE TRIGGER t INSTEAD OF INSERT ON v\nBEGIN\n  SELECT RAISE(ABORT, 'x') WHERE NEW.a IS NULL;\n  INSERT INTO w VALUES (NEW.a);\nEND",
      'CREATE PROCEDURE p()\nproc: BEGIN\n  IF 1 THEN\n    SELECT 1;\n  END IF;\n  BEGIN\n    SELECT 2;\n  END;\nEND',
      'DROP TABLE x',
    ]);
  });

  it('reads the SQL enqueue migration of each database as whole routines', () => {
    const statements = (migrations: readonly { name: string; statements: readonly string[] }[]) =>
      migrations.find((m) => m.name === '0014_sql_enqueue')?.statements ?? [];
    const pg = statements(postgresDialect({ tablePrefix: '', schema: 'jobs' }).migrations);
    expect(pg.map((s) => s.split('\n')[0])).toEqual([
      'CREATE OR REPLACE FUNCTION "jobs"."enqueue_text"(value text, field text)',
      'CREATE OR REPLACE FUNCTION "jobs"."enqueue_int"(value jsonb, field text, low numeric, high numeric)',
      'CREATE OR REPLACE FUNCTION "jobs"."enqueue"(type text, payload jsonb DEFAULT \'null\'::jsonb, options jsonb DEFAULT \'{}\'::jsonb)',
    ]);
    // The store's channel: `<schema>_jobs` unless given.
    expect(pg[2]).toContain("pg_notify('jobs_jobs', '')");
    const named = statements(
      postgresDialect({ tablePrefix: '', schema: 'jobs', notifyChannel: 'wake' }).migrations,
    );
    expect(named[2]).toContain("pg_notify('wake', '')");
    const lite = statements(sqliteDialect({ tablePrefix: 'jobs_' }).migrations);
    expect(lite.map((s) => s.split('\n')[0])).toEqual([
      'CREATE VIEW IF NOT EXISTS jobs_enqueue (type, payload, options) AS',
      'CREATE TRIGGER IF NOT EXISTS jobs_enqueue_insert INSTEAD OF INSERT ON jobs_enqueue',
    ]);
    const my = statements(mysqlDialect({ tablePrefix: 'jobs_' }).migrations);
    expect(my.map((s) => s.split('\n')[0])).toEqual([
      'DROP PROCEDURE IF EXISTS `jobs_enqueue`',
      'CREATE PROCEDURE `jobs_enqueue`(IN p_type LONGTEXT, IN p_payload LONGTEXT, IN p_options LONGTEXT)',
    ]);
    expect(my[1]?.endsWith('\nEND')).toBe(true);
  });
});
