/**
 * Chaos scenarios on MySQL/MariaDB (`@jobs/conformance`'s `runChaosScenarios`): worker
 * processes on the built packages, some behind a TCP proxy that black-holes, refuses and cuts,
 * one killed with SIGKILL. Needs `dist` of core, conformance and mysql (CI builds first).
 */
import { fileURLToPath } from 'node:url';
import { type HeldSnapshot, missingBuild, runChaosScenarios } from '@jobs/conformance';
import mysql from 'mysql2/promise';
import { createDatabase, dropDatabase, MYSQL_URL, openStore, reachable, sql } from './helpers.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const unbuilt = missingBuild(
  ['../dist/index.js', '../../core/dist/index.js', '../../conformance/dist/index.js'].map(
    (path) => new URL(path, import.meta.url),
  ),
);

runChaosScenarios({
  name: 'mysql',
  databaseUrl: MYSQL_URL,
  skip: reachable ? unbuilt : `no MySQL/MariaDB at ${MYSQL_URL}`,
  setup: async () => {
    const database = await createDatabase();
    const store = openStore(database);
    await store.migrate();
    return {
      store,
      worker: (request) => ({ module: fixture, args: { ...request, database } }),
      teardown: async () => {
        await store.close();
        await dropDatabase(database);
      },
      holdSnapshot: () => holdSnapshot(database),
    };
  },
});

/**
 * A session of its own in a REPEATABLE READ transaction with a consistent snapshot that read the
 * jobs and history tables: InnoDB keeps every row version newer than it for its sake (purge
 * waits), and it holds metadata locks on both tables.
 */
async function holdSnapshot(database: string): Promise<HeldSnapshot> {
  const connection = await mysql.createConnection({ uri: MYSQL_URL });
  const rows = async (): Promise<number> => {
    const [found] = await connection.query(
      `SELECT (SELECT count(*) FROM \`${database}\`.jobs_jobs) + (SELECT count(*) FROM \`${database}\`.jobs_jobs_history) AS n`,
    );
    return Number((found as { n: number | string }[])[0]?.n);
  };
  await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
  await connection.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
  await rows();
  const [ids] = await connection.query('SELECT CONNECTION_ID() AS id');
  const id = Number((ids as { id: number }[])[0]?.id);
  return {
    rows,
    // Asked on another connection: the server's view, not the client's.
    open: async () =>
      (
        await sql(
          'SELECT count(*) AS n FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ?',
          [id],
        )
      ).map((row) => Number(row.n))[0] === 1,
    release: async () => {
      await connection.query('ROLLBACK');
      await connection.end();
    },
  };
}
