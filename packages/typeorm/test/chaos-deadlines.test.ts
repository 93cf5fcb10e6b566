/**
 * Deadlines on every store call over a TypeORM DataSource, on PostgreSQL and MariaDB/MySQL
 * (`@jobs/conformance`'s `runDeadlineChecks`, through a TCP proxy that black-holes and delays),
 * and an engine whose network goes silent under running jobs: its handlers are aborted and its
 * `stop()` returns. "It returns" is the assertion: each test is bounded by its own timeout.
 */
import {
  ChaosProxy,
  type DeadlineStoreRequest,
  makeNewJob,
  runDeadlineChecks,
  waitFor,
} from '@jobs/conformance';
import { JobEngine } from '@jobs/core';
import { DataSource, type DataSourceOptions, type QueryRunner } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import {
  createTestDatabase,
  type Driver,
  MYSQL_URL,
  PG_URL,
  serverAvailable,
  type TestDatabase,
} from './databases.js';

type Network = Exclude<Driver, 'better-sqlite3'>;

/** Options of a DataSource on `db` through `url` (the proxy's), with a pool of `poolSize`. */
function throughUrl(db: TestDatabase, url: string, poolSize: number, connectMs = 10_000) {
  const own = db.options as DataSourceOptions & { url: string };
  const target = new URL(url);
  target.pathname = new URL(own.url).pathname; // the test's database on MySQL
  const extra = db.driver === 'postgres' ? { max: poolSize } : { connectionLimit: poolSize };
  // The driver's own connect timeout too, so a connect the store gave up on ends.
  const connect =
    db.driver === 'postgres' ? { connectTimeoutMS: connectMs } : { connectTimeout: connectMs };
  return { ...own, ...connect, url: target.toString(), extra } as DataSourceOptions;
}

/** Destroys a DataSource; on a network that stays silent it is left after a few seconds. */
async function destroy(dataSource: DataSource): Promise<void> {
  if (!dataSource.isInitialized) return;
  const late = new Promise((resolve) => setTimeout(resolve, 3_000).unref());
  await Promise.race([dataSource.destroy().catch(() => {}), late]);
}

for (const driver of ['postgres', 'mysql'] as const satisfies readonly Network[]) {
  const available = await serverAvailable(driver);
  const databaseUrl = driver === 'postgres' ? PG_URL : MYSQL_URL;

  runDeadlineChecks<TypeormJobStore>({
    name: `typeorm-${driver}`,
    databaseUrl,
    skip: available ? null : `no ${driver} server`,
    setup: async () => {
      const db = await createTestDatabase(driver);
      const stores: TypeormJobStore[] = [];
      return {
        open: (url, { sharedPool: _, ...timeouts }: DeadlineStoreRequest) => {
          const connectMs = timeouts.connectTimeoutMs;
          const dataSource = new DataSource(throughUrl(db, url, 2, connectMs));
          const store = new TypeormJobStore({ dataSource, ...timeouts });
          stores.push(store);
          return store;
        },
        // The DataSource's pool is the app's, shared with the store: take all it gives.
        exhaustPool: async (store) => {
          const held: QueryRunner[] = [];
          for (;;) {
            const runner = store.dataSource.createQueryRunner();
            const timer = new Promise<'full'>((resolve) => setTimeout(resolve, 300, 'full'));
            if ((await Promise.race([runner.connect(), timer])) === 'full') break;
            held.push(runner);
          }
          return async () => {
            for (const runner of held) await runner.release();
          };
        },
        teardown: async () => {
          await Promise.all(stores.map((store) => store.close()));
          await Promise.all(stores.map((store) => destroy(store.dataSource)));
          await db.drop();
        },
      };
    },
  });

  describe.skipIf(!available)(`an engine on typeorm-${driver} whose network goes silent`, () => {
    it('aborts its running handlers and returns from stop() while the network stays silent', {
      timeout: 30_000,
    }, async () => {
      const db = await createTestDatabase(driver);
      const proxy = await ChaosProxy.start({ target: databaseUrl });
      const dataSource = new DataSource(throughUrl(db, proxy.url(databaseUrl), 4, 1_000));
      const store = new TypeormJobStore({
        dataSource,
        connectTimeoutMs: 1_000,
        queryTimeoutMs: 1_000,
      });
      const aborted: string[] = [];
      const started: string[] = [];
      const engine = new JobEngine({
        store,
        leaseMs: 3_000,
        concurrency: 2,
        handlers: {
          // A long job that honours its signal.
          long: (job, ctx) =>
            new Promise<void>((_resolve, reject) => {
              started.push(job.id);
              ctx.signal.addEventListener('abort', () => {
                aborted.push(job.id);
                reject(new Error('aborted'));
              });
            }),
        },
      });
      try {
        await store.migrate();
        await engine.start();
        const jobs = await store.enqueue([
          makeNewJob({ type: 'long' }),
          makeNewJob({ type: 'long' }),
        ]);
        // Both handlers started: the jobs' rows saying `running` is not enough, since the
        // silence could swallow the answer to the acquisition that leased them.
        await waitFor('both handlers started', async () => started.length === 2, 10_000);
        proxy.blackHole();
        // Renewals stop getting answers: the local lease deadline aborts both handlers.
        await waitFor('both handlers aborted', async () => aborted.length === 2, 10_000);
        expect(aborted.sort()).toEqual(jobs.map((r) => r.job.id).sort());
        await engine.stop({ timeoutMs: 500 });
        await store.close();
      } finally {
        await proxy.pass();
        await engine.stop({ timeoutMs: 500 }).catch(() => {});
        await store.close();
        await destroy(dataSource);
        await proxy.close();
        await db.drop();
      }
    });
  });
}
