/**
 * Deadlines on every store call (invariant 16), checked for a network store on real sockets
 * through a `ChaosProxy`: a statement on a silent network fails at `queryTimeoutMs` and its
 * connection is not used again; a connect fails at `connectTimeoutMs`; lease renewals have a
 * connection of their own, so they return while handlers hold the whole pool; `close()`
 * returns when the server never answers; and `migrate()`, which may rightly take long, is not
 * bounded. Each check is bounded by its own timeout: "it returns" is the assertion.
 */
import { type Job, type JobStore, StoreError } from '@jobs/core';
import { afterEach, expect, it } from 'vitest';
import { acquire, enqueueJobs, refOf, waitFor } from '../harness.js';
import { describeIfAvailable } from '../prerequisites.js';
import { ChaosProxy } from './proxy.js';

/** What the store under check is opened with: the options every network store here takes. */
export interface DeadlineStoreRequest {
  connectTimeoutMs?: number;
  queryTimeoutMs?: number;
  /** Open the store on a pool the test can also take connections from (`exhaustPool`). */
  sharedPool?: boolean;
}

/** A fresh, empty schema or database for one check. */
export interface DeadlineSetup<S extends JobStore> {
  /** A store on it through `url`, with a pool of two connections and these options. */
  open(url: string, request: DeadlineStoreRequest): S;
  /**
   * Takes every connection of the pool of `store` (opened with `sharedPool`), as busy
   * handlers would; resolves with the function that gives them back.
   */
  exhaustPool(store: S): Promise<() => Promise<void>>;
  /** Closes what `open` made and drops the schema or database. */
  teardown(): Promise<void>;
}

export interface DeadlineCheckOptions<S extends JobStore> {
  /** Names the suite, e.g. `postgres`. */
  name: string;
  /** The database's URL; stores under check connect through `proxy.url(databaseUrl)`. */
  databaseUrl: string;
  /** A fresh schema or database per check (not migrated). */
  setup(): Promise<DeadlineSetup<S>>;
  /**
   * What is missing to run the checks here and how to get it (no database), or null. Locally
   * they are then skipped with one loud line; under `CI=true` that is a failing test.
   */
  skip?: string | null;
}

const TIMEOUT = 20_000;
/** A deadline short enough to wait for, long enough for a healthy localhost round trip. */
const SHORT_MS = 300;
const TIMED_OUT = /no answer within|timeout|timed out|ETIMEDOUT/i;
/** A call that could not get a connection in time: nothing of it reached the server. */
const NOT_CONNECTED = /\(connectTimeoutMs\)|connect ETIMEDOUT/;

/**
 * A setup call under the short connect deadline, tried again (up to 5 times) while it only
 * failed to connect — a loaded machine's server may take longer than that to accept one. What
 * the check proves comes after its setup.
 */
async function connected<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (attempt >= 5 || !NOT_CONNECTED.test(String((error as Error)?.message))) throw error;
    }
  }
}

/**
 * Defines the deadline checks for a network store in the calling vitest file.
 *
 * @example
 * runDeadlineChecks({
 *   name: 'postgres',
 *   databaseUrl: PG_URL,
 *   setup: async () => { const schema = randomSchema(); … return { open, exhaustPool, teardown }; },
 * });
 */
export function runDeadlineChecks<S extends JobStore>(options: DeadlineCheckOptions<S>): void {
  let setup: DeadlineSetup<S> | null = null;
  let proxy: ChaosProxy | null = null;

  const prepare = async (): Promise<{ setup: DeadlineSetup<S>; proxy: ChaosProxy }> => {
    setup = await options.setup();
    proxy = await ChaosProxy.start({ target: options.databaseUrl });
    return { setup, proxy };
  };
  /** A store straight to the database, with the tables made. */
  const migrated = async (made: DeadlineSetup<S>, request: DeadlineStoreRequest = {}) => {
    const store = made.open(options.databaseUrl, request);
    await store.migrate();
    return store;
  };

  describeIfAvailable(
    options.skip ?? null,
    `deadlines: ${options.name}`,
    { timeout: TIMEOUT },
    () => {
      afterEach(async () => {
        await proxy?.pass();
        await setup?.teardown();
        await proxy?.close();
        setup = null;
        proxy = null;
      }, TIMEOUT);

      it('a statement on a silent network fails at queryTimeoutMs, and its connection is not used again', async () => {
        const { setup, proxy } = await prepare();
        await migrated(setup);
        const store = setup.open(proxy.url(options.databaseUrl), { queryTimeoutMs: SHORT_MS });
        await store.now();
        const accepted = proxy.accepted;
        proxy.blackHole();
        const error = await store.now().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StoreError);
        expect((error as Error).message).toMatch(/now: /);
        expect((error as Error).message).toMatch(TIMED_OUT);
        await proxy.pass();
        expect(await store.now()).toBeInstanceOf(Date);
        // The timed-out connection was destroyed, not pooled: the next call opened a new one.
        expect(proxy.accepted).toBe(accepted + 1);
      });

      it('opening a connection on a silent network fails at connectTimeoutMs', async () => {
        const { setup, proxy } = await prepare();
        const store = setup.open(proxy.url(options.databaseUrl), { connectTimeoutMs: SHORT_MS });
        proxy.blackHole();
        await expect(store.now()).rejects.toThrow(TIMED_OUT);
      });

      it('lease renewals have a connection of their own: they return while every pooled connection is held', async () => {
        const { setup } = await prepare();
        const store = await migrated(setup, { sharedPool: true, connectTimeoutMs: SHORT_MS });
        const [job] = await connected(() => enqueueJobs(store, [{}]));
        const [acquired] = (await connected(() =>
          acquire(store, { owner: 'holder', leaseMs: 5_000 }),
        )) as [Job];
        expect(acquired.id).toBe(job?.id);
        // The renewal connection is opened by a first renewal, before the pool is taken: what
        // is proven is that renewals do not queue behind the pool, not how fast a busy server
        // accepts a new connection (under load that took longer than the short connect timeout).
        const first = await connected(() => store.renewLeases('holder', 5_000, [refOf(acquired)]));
        expect(first.lost).toEqual([]);
        const giveBack = await setup.exhaustPool(store);
        try {
          // The pool really is exhausted: an ordinary call gives up waiting for it.
          await expect(store.now()).rejects.toThrow(TIMED_OUT);
          const renewed = await store.renewLeases('holder', 5_000, [refOf(acquired)]);
          expect(renewed.lost).toEqual([]);
        } finally {
          await giveBack();
        }
      });

      it('close() returns on a silent network, its extra connections (heartbeat, listener) included, open or opening', async () => {
        const { setup, proxy } = await prepare();
        await migrated(setup);
        const url = proxy.url(options.databaseUrl);
        const [settled, opening] = [setup.open(url, {}), setup.open(url, {})];
        settled.subscribe?.(() => {});
        await settled.renewLeases('nobody', 1_000, [{ id: '1', token: 'x' }]);
        await settled.now();
        await opening.now();
        proxy.blackHole();
        // Its wake-up connection (or reads) start on the silent network.
        opening.subscribe?.(() => {});
        await Promise.all([settled.close(), opening.close()]);
      });

      it('migrate() is not bounded by queryTimeoutMs: a schema change may rightly take long', async () => {
        const { setup, proxy } = await prepare();
        // A schema change takes ~130 round trips: 20 ms each (not 50) keeps this test to ~3 s.
        const store = setup.open(proxy.url(options.databaseUrl), { queryTimeoutMs: 15 });
        // First contact (a store may read the server's version once), before the network slows.
        await waitFor(
          'a first answer',
          () =>
            store.now().then(
              () => true,
              () => false,
            ),
          TIMEOUT,
        );
        proxy.delay(10); // 20 ms a round trip
        await expect(store.now()).rejects.toThrow(TIMED_OUT);
        await store.migrate();
        proxy.delay(0);
      });
    },
  );
}
