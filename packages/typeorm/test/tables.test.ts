/**
 * `describeTables` (`@jobs/core/sql`) against what the migrations really make: a fresh schema
 * migrated, then the database's catalog read back (information_schema, pg_catalog, SQLite's
 * pragmas) and compared table by table — columns in order with type, size, nullability,
 * default and generation, the key's generation, the indexes with their columns, the named
 * CHECKs. The native stores run the same migration files; `entities.test.ts` proves TypeORM's
 * entities built from the description agree too.
 */
import { describeTables, type TableDatabase, type TableDescription } from '@jobs/core/sql';
import type { DataSource } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, openDataSource, serverAvailable } from './databases.js';

type Row = Record<string, unknown>;

/** What a table looks like in a description and in a catalog: only what both can say. */
function shape(table: TableDescription) {
  return {
    columns: table.columns.map((c) => ({
      name: c.name,
      type: c.unsigned ? `${c.type} unsigned` : c.type,
      size: c.length ?? c.precision ?? null,
      nullable: c.nullable,
      default: c.default ?? null,
      generated: c.generated ? squeeze(c.generated) : null,
    })),
    keyGeneration: table.keyGeneration,
    primaryKey: table.primaryKey,
    indexes: table.indexes.map((i) => ({ name: i.name, columns: i.columns, unique: i.unique })),
    checks: table.checks.map((c) => c.name),
  };
}

/** An expression as servers reword it: lower case, no blanks. */
const squeeze = (sql: string): string => sql.toLowerCase().replace(/\s+/g, '');
const byName = <T extends { name: string }>(items: T[]): T[] =>
  [...items].sort((a, b) => a.name.localeCompare(b.name));

/** Reads one table of the catalog in the shape of `shape`. */
const catalogs: Record<TableDatabase, (ds: DataSource, table: string) => Promise<object>> = {
  async postgres(ds, table) {
    const schema = (ds.options as { schema: string }).schema;
    const columns = (await ds.query(
      `SELECT column_name AS name, udt_name AS type,
         coalesce(character_maximum_length, datetime_precision) AS size,
         is_nullable = 'YES' AS nullable, column_default AS "default", is_identity = 'YES' AS identity
       FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2
       ORDER BY ordinal_position`,
      [schema, table],
    )) as Row[];
    const indexes = (await ds.query(
      `SELECT i.relname AS name, x.indisunique AS "unique",
         array_agg(a.attname::text ORDER BY k.n) AS columns
       FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
       JOIN pg_namespace s ON s.oid = t.relnamespace
       CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
       JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
       WHERE s.nspname = $1 AND t.relname = $2 AND NOT x.indisprimary
       GROUP BY i.relname, x.indisunique`,
      [schema, table],
    )) as { name: string; unique: boolean; columns: string[] }[];
    const checks = (await ds.query(
      `SELECT conname AS name FROM pg_constraint
       WHERE contype = 'c' AND conrelid = (quote_ident($1) || '.' || quote_ident($2))::regclass`,
      [schema, table],
    )) as { name: string }[];
    const [key] = (await ds.query(
      `SELECT array_agg(a.attname::text ORDER BY k.n) AS columns
       FROM pg_constraint c CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
       JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
       WHERE c.contype = 'p' AND c.conrelid = (quote_ident($1) || '.' || quote_ident($2))::regclass`,
      [schema, table],
    )) as { columns: string[] }[];
    const types: Record<string, string> = { int4: 'integer', int8: 'bigint', bool: 'boolean' };
    return {
      columns: columns.map((c) => ({
        name: c.name,
        type: types[c.type as string] ?? c.type,
        size: c.size,
        nullable: c.nullable,
        default: (c.default as string | null)?.replace(/::\w+$/, '') ?? null,
        generated: null,
      })),
      keyGeneration: columns[0]?.identity ? 'identity' : null,
      primaryKey: key?.columns ?? [],
      indexes: byName(indexes),
      checks: checks.map((c) => c.name).sort(),
    };
  },
  async mysql(ds, table) {
    const columns = (await ds.query(
      `SELECT COLUMN_NAME AS name, DATA_TYPE AS type, COLUMN_TYPE AS fullType,
         COALESCE(CHARACTER_MAXIMUM_LENGTH, DATETIME_PRECISION) AS size,
         IS_NULLABLE = 'YES' AS nullable, COLUMN_DEFAULT AS dflt,
         GENERATION_EXPRESSION AS expression, EXTRA AS extra
       FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?
       ORDER BY ORDINAL_POSITION`,
      [table],
    )) as Row[];
    const indexes = (await ds.query(
      `SELECT INDEX_NAME AS name, NON_UNIQUE = 0 AS isUnique,
         GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS list
       FROM information_schema.STATISTICS
       WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME <> 'PRIMARY'
       GROUP BY INDEX_NAME, NON_UNIQUE`,
      [table],
    )) as Row[];
    const key = (await ds.query(
      `SELECT COLUMN_NAME AS name FROM information_schema.KEY_COLUMN_USAGE
       WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY'
       ORDER BY ORDINAL_POSITION`,
      [table],
    )) as Row[];
    return {
      columns: columns.map((c) => ({
        name: c.name,
        type: /unsigned/.test(String(c.fullType)) ? `${c.type} unsigned` : c.type,
        size: c.type === 'datetime' || /char/.test(String(c.type)) ? Number(c.size) : null,
        nullable: Number(c.nullable) === 1,
        // MariaDB says `NULL` for a nullable column without a default.
        default: c.dflt === 'NULL' ? null : c.dflt,
        generated: c.expression ? squeeze(String(c.expression)) : null,
      })),
      keyGeneration: /auto_increment/.test(String(columns[0]?.extra)) ? 'increment' : null,
      primaryKey: key.map((k) => String(k.name)),
      indexes: byName(
        indexes.map((i) => ({
          name: String(i.name),
          columns: String(i.list).split(','),
          unique: Number(i.isUnique) === 1,
        })),
      ),
      checks: [],
    };
  },
  async sqlite(ds, table) {
    const columns = (await ds.query(`PRAGMA table_info("${table}")`)) as Row[];
    const list = (await ds.query(`PRAGMA index_list("${table}")`)) as Row[];
    const [{ sql }] = (await ds.query('SELECT sql FROM sqlite_master WHERE name = ?', [table])) as [
      { sql: string },
    ];
    const indexes = [];
    for (const index of list.filter((i) => i.origin === 'c')) {
      const info = (await ds.query(`PRAGMA index_info("${index.name}")`)) as Row[];
      const columns = info.sort((a, b) => Number(a.seqno) - Number(b.seqno)).map((i) => i.name);
      indexes.push({ name: String(index.name), columns, unique: Number(index.unique) === 1 });
    }
    return {
      columns: columns.map((c) => ({
        name: c.name,
        type: String(c.type).toLowerCase(),
        size: null,
        nullable: Number(c.notnull) === 0,
        default: c.dflt_value,
        generated: null,
      })),
      keyGeneration: /AUTOINCREMENT/.test(sql) ? 'increment' : null,
      primaryKey: columns
        .filter((c) => Number(c.pk) > 0)
        .sort((a, b) => Number(a.pk) - Number(b.pk))
        .map((c) => String(c.name)),
      indexes: byName(indexes),
      checks: [],
    };
  },
};

const drivers: Driver[] = [];
for (const d of ['better-sqlite3', 'postgres', 'mysql'] as const)
  if (await serverAvailable(d)) drivers.push(d);

describe.each(drivers)('describeTables on %s', (driver) => {
  it('says what migrate() makes: columns, defaults, keys, indexes and named CHECKs', async () => {
    const db = await createTestDatabase(driver);
    const dataSource = await openDataSource(db);
    const store = new TypeormJobStore({ dataSource, tablePrefix: 'd_' });
    try {
      await store.migrate();
      const database = store.dialect.name as TableDatabase;
      const tables = describeTables(database, 'd_');
      expect(tables.map((t) => t.name)).toEqual([
        'd_jobs',
        'd_schedules',
        'd_jobs_history',
        'd_jobs_rate_limits',
        'd_jobs_followups',
        'd_jobs_signals',
      ]);
      for (const table of tables) {
        const described = shape(table);
        const expected = { ...described, indexes: byName(described.indexes) };
        expected.checks.sort();
        const found = await catalogs[database](dataSource, table.name);
        expect({ table: table.name, ...found }).toEqual({ table: table.name, ...expected });
      }
    } finally {
      await store.close();
      await dataSource.destroy();
      await db.drop();
    }
  });
});
