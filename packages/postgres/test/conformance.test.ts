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
