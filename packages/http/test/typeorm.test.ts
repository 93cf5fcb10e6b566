/**
 * The external-worker group on the TypeORM store (`@jobs/typeorm`): over a PostgreSQL DataSource
 * (a schema of its own) and a MariaDB/MySQL one (a database of its own), each dropped afterwards.
 */
import 'reflect-metadata';
import { TypeormJobStore } from '@jobs/typeorm';
import { DataSource } from 'typeorm';
import { describe, it } from 'vitest';
import {
  MYSQL_URL,
  mysqlQuery,
  mysqlReachable,
  PG_URL,
  postgresQuery,
  postgresReachable,
  uniqueName,
} from './backends.js';
import { runExternalWorkerChecks } from './external-worker-checks.js';

async function migrated(dataSource: DataSource): Promise<TypeormJobStore> {
  await dataSource.initialize();
  const store = new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
  await store.migrate();
  return store;
}

if (await postgresReachable()) {
  runExternalWorkerChecks('typeorm-postgres', async () => {
    const schema = uniqueName('http_typeorm');
    await postgresQuery(`CREATE SCHEMA "${schema}"`);
    const dataSource = new DataSource({ type: 'postgres', url: PG_URL, schema, extra: { max: 6 } });
    return {
      store: await migrated(dataSource),
      drop: () => postgresQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`),
    };
  });
} else {
  describe.skip('external workers over HTTP (typeorm-postgres): server unreachable', () =>
    it('skipped'));
}

if (await mysqlReachable()) {
  runExternalWorkerChecks('typeorm-mysql', async () => {
    const database = uniqueName('jobs_http_typeorm');
    await mysqlQuery(`CREATE DATABASE \`${database}\``);
    const [version] = (await mysqlQuery('SELECT VERSION() AS v')) as { v: string }[];
    const url = new URL(MYSQL_URL);
    url.pathname = `/${database}`;
    const dataSource = new DataSource({
      // TypeORM reads MariaDB's catalog right only with type 'mariadb'.
      type: /mariadb/i.test(version?.v ?? '') ? 'mariadb' : 'mysql',
      url: url.toString(),
      timezone: 'Z',
      extra: { connectionLimit: 6 },
    });
    return {
      store: await migrated(dataSource),
      drop: async () => {
        await mysqlQuery(`DROP DATABASE IF EXISTS \`${database}\``);
      },
    };
  });
} else {
  describe.skip('external workers over HTTP (typeorm-mysql): server unreachable', () =>
    it('skipped'));
}
