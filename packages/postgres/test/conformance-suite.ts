/**
 * The JobStore conformance suite on PostgreSQL, for a URL: straight to the server
 * (`conformance.test.ts`), or through a PgBouncer in transaction mode
 * (`conformance-pgbouncer.test.ts`: `pooler: 'transaction'`, LISTEN on the direct URL).
 */
import { fileURLToPath } from 'node:url';
import {
  type GroupName,
  missingBuild,
  prerequisite,
  runJobStoreConformance,
} from '@jobs/conformance';
import type pg from 'pg';
import { afterAll, expect } from 'vitest';
import { PostgresJobStore, type PostgresJobStoreOptions } from '../src/index.js';
import { dropSchema, emptySchema, randomSchema, sql } from './helpers.js';

const PEER = fileURLToPath(new URL('./fixtures/peer-store.mjs', import.meta.url));
// Child processes import the built packages; without a build the process races are left out
// (locally, with one loud line; under CI=true a failing test says so).
const unbuilt = missingBuild([
  new URL('../dist/index.js', import.meta.url),
  new URL('../../core/dist/index.js', import.meta.url),
]);

export interface PostgresConformance {
  name: string;
  url: string;
  pooler?: PostgresJobStoreOptions['pooler'];
  listenUrl?: string;
  wakeUps?: PostgresJobStoreOptions['wakeUps'];
  /** Groups this run leaves to another, each with its reason (see `ConformanceOptions.skip`). */
  skip?: Partial<Record<GroupName, string>>;
}

export function runPostgresConformance({
  name,
  url,
  pooler,
  listenUrl,
  wakeUps,
  skip,
}: PostgresConformance): void {
  const through = {
    ...(pooler ? { pooler } : {}),
    ...(listenUrl ? { listenConnectionString: listenUrl } : {}),
    ...(wakeUps ? { wakeUps } : {}),
  };
  prerequisite(unbuilt, `JobStore conformance: ${name} — the multi-process races`);
  // Effects of ctx.transaction go to a table in the current test's schema (tests run one at a time).
  let effectsTable = '';
  // Schemas of finished tests, emptied (`emptySchema`): a new schema's migrate took ~0.1 s of
  // every test. A test about migrate gets a new schema, so it migrates an empty one for real.
  const reusable: string[] = [];
  const schemaForTest = (): string =>
    (/migrat/i.test(expect.getState().currentTestName ?? '') ? undefined : reusable.pop()) ??
    randomSchema('conf');
  afterAll(async () => {
    for (const schema of reusable.splice(0)) await dropSchema(schema);
  });
  runJobStoreConformance<PostgresJobStore, pg.PoolClient>({
    name,
    ...(skip ? { skip } : {}),
    createStore: async () =>
      new PostgresJobStore({
        connectionString: url,
        schema: schemaForTest(),
        max: 4,
        ...through,
      }),
    destroyStore: async (store) => {
      if (await emptySchema(store)) reusable.push(store.schema);
      else await dropSchema(store.schema);
    },
    // Pinned: a capability or method lost here fails a test instead of skipping the ones it backs.
    requires: {
      capabilities: {
        notifications: true,
        transactionalEnqueue: true,
        multiProcess: true,
        scopeLimits: true,
        keyModes: true,
        blockedSet: true,
        progress: true,
        startMarks: true,
        logs: true,
        timeLimits: true,
      },
      abilities: ['cancellation', 'rateLimits', 'history', 'bulk', 'views', 'steps', 'waits'],
      methods: ['completeAndAcquire', 'completeInTransaction', 'steps.saveInTransaction'],
    },
    connectPeer: async (store) =>
      new PostgresJobStore({ connectionString: url, schema: store.schema, max: 4, ...through }),
    ...(unbuilt === null
      ? {
          processPeer: (store: PostgresJobStore) => ({
            module: PEER,
            args: { url, schema: store.schema, pooler, listenUrl, wakeUps },
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
    // Bulk enqueue from SQL: the schema's enqueue_many function.
    sqlEnqueueMany: async (store, { type, payloads, options }) => {
      await sql(`SELECT "${store.schema}".enqueue_many($1, $2::jsonb, $3::jsonb)`, [
        type,
        payloads,
        options,
      ]);
    },
    // Enqueue from SQL: the schema's enqueue function, on a connection of its own or the caller's.
    sqlEnqueue: async (store, { type, payload, options }, tx) => {
      const text = `SELECT "${store.schema}".enqueue($1, $2::jsonb, $3::jsonb) AS id`;
      const params = [type, payload, options];
      const rows = tx ? (await tx.query(text, params)).rows : await sql(text, params);
      return String(rows[0]?.id);
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
}
