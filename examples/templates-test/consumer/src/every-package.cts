/**
 * A CommonJS module (`require`, types from the `.d.cts` files) that loads every entry point
 * published for CommonJS. @jobs/conformance is ESM only, as vitest is.
 */
import core = require('@jobs/core');
import sql = require('@jobs/core/sql');
import dashboard = require('@jobs/dashboard');
import mysql = require('@jobs/mysql');
import postgres = require('@jobs/postgres');
import sqlite = require('@jobs/sqlite');
import typeorm = require('@jobs/typeorm');

async function main(): Promise<void> {
  const entryPoints = { core, sql, dashboard, mysql, postgres, sqlite, typeorm };
  for (const [name, exports] of Object.entries(entryPoints)) {
    if (Object.keys(exports).length === 0) throw new Error(`@jobs/${name} exports nothing`);
  }
  const store: core.JobStore = new sqlite.SqliteJobStore({ filename: ':memory:' });
  const engine = new core.JobEngine({ store, logger: core.silentLogger });
  await engine.start();
  const { ok } = await engine.health();
  await store.migrate();
  const page = await dashboard
    .createDashboard({ store, logger: core.silentLogger, allowedHosts: ['app.test'] })
    .fetch(new Request('http://app.test/jobs'));
  if (page.status !== 200) throw new Error(`the dashboard answered ${page.status}`);
  await engine.stop();
  await store.close();
  const closed = await store.now().catch((error: unknown) => error);
  if (!(store instanceof sql.SqlJobStore) || !(closed instanceof core.StoreError) || !ok) {
    throw new Error('a class of @jobs/core exists twice, or the engine was not healthy');
  }
  const stores = [postgres.PostgresJobStore, mysql.MysqlJobStore, typeorm.TypeormJobStore];
  console.log(
    `every package (cjs): ${Object.keys(entryPoints).length} entry points loaded, ${stores.length + 1} stores`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
