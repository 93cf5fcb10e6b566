/**
 * Chaos scenarios on PostgreSQL (`@jobs/conformance`'s `runChaosScenarios`): worker processes
 * on the built packages, some behind a TCP proxy that black-holes, refuses and cuts, one
 * killed with SIGKILL. Needs `dist` of core, conformance and postgres (CI builds first).
 */
import { fileURLToPath } from 'node:url';
import { type HeldSnapshot, missingBuild, runChaosScenarios } from '@jobs/conformance';
import pg from 'pg';
import { dropSchema, openStore, PG_URL, randomSchema, reachable } from './helpers.js';

const fixture = fileURLToPath(new URL('./fixtures/chaos-store.mjs', import.meta.url));
const unbuilt = missingBuild(
  ['../dist/index.js', '../../core/dist/index.js', '../../conformance/dist/index.js'].map(
    (path) => new URL(path, import.meta.url),
  ),
);

runChaosScenarios({
  name: 'postgres',
  databaseUrl: PG_URL,
  skip: reachable ? unbuilt : `no PostgreSQL at ${PG_URL}`,
  setup: async () => {
    const schema = randomSchema('chaos');
    const store = openStore(schema);
    await store.migrate();
    return {
      store,
      worker: (request) => ({ module: fixture, args: { ...request, schema } }),
      teardown: async () => {
        await store.close();
        await dropSchema(schema);
      },
      holdSnapshot: () => holdSnapshot(schema),
    };
  },
});

/**
 * A session of its own in a REPEATABLE READ transaction that read the jobs and history tables:
 * its snapshot holds back the server's xmin horizon, and it holds ACCESS SHARE locks on both.
 */
async function holdSnapshot(schema: string): Promise<HeldSnapshot> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  const rows = async (): Promise<number> => {
    const { rows } = await client.query<{ n: string }>(
      `SELECT (SELECT count(*) FROM "${schema}".jobs) + (SELECT count(*) FROM "${schema}".jobs_history) AS n`,
    );
    return Number(rows[0]?.n);
  };
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await rows();
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
  return {
    rows,
    // Asked on another connection: the server's view, not the client's.
    open: async () => {
      const seen = new pg.Client({ connectionString: PG_URL });
      await seen.connect();
      try {
        const { rows } = await seen.query<{ state: string; xmin: string | null }>(
          'SELECT state, backend_xmin AS xmin FROM pg_stat_activity WHERE pid = $1',
          [pid],
        );
        return rows[0]?.state === 'idle in transaction' && rows[0].xmin !== null;
      } finally {
        await seen.end();
      }
    },
    release: async () => {
      await client.query('ROLLBACK');
      await client.end();
    },
  };
}
