/**
 * An ES module that imports every published entry point, uses their types the way an app
 * does, and checks at run time that each loaded and that a class exists once across them.
 */
import 'reflect-metadata';
import { FlakyJobStore, runJobStoreConformance } from '@jobs/conformance';
import {
  type EngineHealth,
  JobEngine,
  type JobStore,
  MemoryJobStore,
  StoreError,
  silentLogger,
} from '@jobs/core';
import { SqlJobStore, sqliteDialect } from '@jobs/core/sql';
import { createDashboard, type Dashboard, type DashboardOptions } from '@jobs/dashboard';
import { MysqlJobStore, type MysqlJobStoreOptions } from '@jobs/mysql';
import { PostgresJobStore, type PostgresJobStoreOptions } from '@jobs/postgres';
import { SqliteJobStore } from '@jobs/sqlite';
import { jobsEntities, TypeormJobStore, type TypeormJobStoreOptions } from '@jobs/typeorm';
import { DataSource } from 'typeorm';

const postgres: PostgresJobStoreOptions = { connectionString: 'postgres://app@db/app' };
const mysql: MysqlJobStoreOptions = { uri: 'mysql://app@db/app' };
const typeorm: TypeormJobStoreOptions = {
  dataSource: new DataSource({
    type: 'better-sqlite3',
    database: ':memory:',
    entities: jobsEntities('better-sqlite3'),
  }),
};
const stores: Record<string, new (...args: never[]) => JobStore> = {
  MemoryJobStore,
  SqlJobStore,
  PostgresJobStore,
  MysqlJobStore,
  SqliteJobStore,
  TypeormJobStore,
  FlakyJobStore,
};
if (
  typeof runJobStoreConformance !== 'function' ||
  typeof sqliteDialect !== 'function' ||
  typeof createDashboard !== 'function'
) {
  throw new Error('@jobs/conformance, @jobs/core/sql or @jobs/dashboard did not load');
}
for (const [name, store] of Object.entries(stores)) {
  if (typeof store !== 'function') throw new Error(`${name} did not load`);
}

// One class across entry points: @jobs/sqlite's store is @jobs/core/sql's SqlJobStore, and
// the errors it throws are @jobs/core's.
const sqlite = new SqliteJobStore({ filename: ':memory:' });
const engine = new JobEngine({ store: sqlite, logger: silentLogger });
await engine.start();
const health: EngineHealth = await engine.health();
// The dashboard over that store, as an app mounts it (fetch-style here: no server needed).
await sqlite.migrate();
const dashboardOptions: DashboardOptions = {
  store: sqlite,
  basePath: '/jobs',
  allowedHosts: ['app.test'],
  authorize: () => false,
  logger: silentLogger,
  countLimit: 1_000,
};
const dashboard: Dashboard = createDashboard(dashboardOptions);
const overview = await dashboard.fetch(new Request('http://app.test/jobs/'));
const overviewHtml = await overview.text();
await engine.stop();
await sqlite.close();
if (overview.status !== 200 || !overviewHtml.includes('<h1>Overview</h1>')) {
  throw new Error(`the dashboard answered ${overview.status}`);
}
const closed = await sqlite.now().catch((error: unknown) => error);
if (!(sqlite instanceof SqlJobStore) || !(closed instanceof StoreError) || !health.ok) {
  throw new Error('a class of @jobs/core exists twice, or the engine was not healthy');
}
console.log(
  `every package (esm): ${Object.keys(stores).length} stores loaded; ${postgres.connectionString}, ${mysql.uri} and ${typeorm.dataSource.options.type} options typed; dashboard overview ${overview.status}`,
);
