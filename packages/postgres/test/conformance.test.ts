import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runJobStoreConformance } from '@jobs/conformance';
import type pg from 'pg';
import { describe, it } from 'vitest';
import { PostgresJobStore } from '../src/index.js';
import { dropSchema, PG_URL, randomSchema, reachable, sql } from './helpers.js';

const PEER = fileURLToPath(new URL('./fixtures/peer-store.mjs', import.meta.url));
// Child processes import the built package; without a build the process races are left out.
const built = existsSync(fileURLToPath(new URL('../dist/index.js', import.meta.url)));

if (reachable) {
  // Effects of ctx.transaction go to a table in the current test's schema (tests run one at a time).
  let effectsTable = '';
  runJobStoreConformance<PostgresJobStore, pg.PoolClient>({
    name: 'postgres',
    createStore: async () =>
      new PostgresJobStore({ connectionString: PG_URL, schema: randomSchema('conf'), max: 4 }),
    destroyStore: async (store) => dropSchema(store.schema),
    connectPeer: async (store) =>
      new PostgresJobStore({ connectionString: PG_URL, schema: store.schema, max: 4 }),
    ...(built
      ? {
          processPeer: (store: PostgresJobStore) => ({
            module: PEER,
            args: { url: PG_URL, schema: store.schema },
          }),
        }
      : {}),
    readRaw: async (store, id) => {
      if (!/^[0-9]+$/.test(id)) return null;
      const rows = await sql(`SELECT * FROM "${store.schema}".jobs WHERE id = $1`, [id]);
      return rows[0] ?? null;
    },
    // ctx.transaction effects: a table in the store's schema, written with the handler's client.
    handlerTransaction: {
      setup: async (store) => {
        effectsTable = `"${store.schema}".effects`;
        await sql(`CREATE TABLE ${effectsTable} (job_id text)`);
      },
      write: async (tx, jobId) => {
        const client = tx as { query(text: string, values: unknown[]): Promise<unknown> };
        await client.query(`INSERT INTO ${effectsTable} (job_id) VALUES ($1)`, [jobId]);
      },
      count: async (store, jobId) => {
        const rows = await sql(
          `SELECT count(*)::int AS n FROM "${store.schema}".effects WHERE job_id = $1`,
          [jobId],
        );
        return Number(rows[0]?.n ?? 0);
      },
    },
    transaction: {
      begin: async (store) => {
        const client = await store.pool.connect();
        await client.query('BEGIN');
        return client;
      },
      commit: async (client) => {
        await client.query('COMMIT');
        client.release();
      },
      rollback: async (client) => {
        await client.query('ROLLBACK');
        client.release();
      },
    },
  });
} else {
  describe.skip('JobStore conformance: postgres (no server)', () => {
    it('needs PostgreSQL', () => {});
  });
}
