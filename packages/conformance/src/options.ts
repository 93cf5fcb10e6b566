import type { FakeClock, Job, JobStore, StoreAbility, StoreCapabilities } from '@jobs/core';

/**
 * The invariant groups of the suite, one file each in `src/groups/`. Numbers refer to the
 * invariants listed in the README.
 */
export const GROUP_NAMES = [
  'lifecycle',
  'enqueue',
  'durability',
  'acquire',
  'timers',
  'ownership',
  'leases',
  'recovery',
  'start-marks',
  'failure',
  'deadletter',
  'suspension',
  'exclusive',
  'scope-limit',
  'blocked-set',
  'key-modes',
  'rate-limit',
  'release',
  'notifications',
  'clock',
  'transactions',
  'admin',
  'operator-views',
  'hostile-input',
  'handler-transaction',
  'history',
  'cancellation',
  'logs',
  'steps',
  'waits',
  'children',
  'flows',
  'batch-handlers',
  'schedules',
  'schedule-engine',
  'engine',
  'faults',
  'sql-enqueue',
] as const;

export type GroupName = (typeof GROUP_NAMES)[number];

/** What a child process needs to open the same database as `store`. */
export interface ProcessPeerSpec {
  /**
   * Absolute path (or file URL) of an ES module exporting `createStore(args)`, returning a store
   * on the same database. The child imports it with plain `node` (plus `nodeArgs`), so point it
   * at built JavaScript, or pass `nodeArgs: ['--import', 'tsx']` for TypeScript.
   */
  module: string;
  /** JSON-serialisable arguments for `createStore`. */
  args?: unknown;
  /** Extra arguments for `node`, e.g. `['--import', 'tsx']`. */
  nodeArgs?: string[];
}

/**
 * Hooks that let the suite open, commit and roll back a transaction in the store's own terms,
 * so it can check that `enqueue(jobs, { tx })` commits and rolls back with the caller's
 * transaction (invariant 13).
 *
 * @example
 * transaction: {
 *   begin: async (store) => { const client = await store.pool.connect(); await client.query('BEGIN'); return client; },
 *   commit: async (client) => { await client.query('COMMIT'); client.release(); },
 *   rollback: async (client) => { await client.query('ROLLBACK'); client.release(); },
 * }
 */
export interface TransactionHooks<S extends JobStore = JobStore, Tx = unknown> {
  /** Opens a transaction; the returned value is passed as `enqueue(jobs, { tx })`. */
  begin(store: S): Promise<Tx>;
  commit(tx: Tx): Promise<void>;
  rollback(tx: Tx): Promise<void>;
}

/**
 * Hooks for `ctx.transaction` (`JobStore.completeInTransaction`): the suite writes an "effect"
 * row through the handler's transaction handle and counts effects around the store, to prove
 * a job's effects apply exactly once.
 *
 * @example
 * handlerTransaction: {
 *   setup: (store) => store.pool.query('CREATE TABLE effects (job_id text)'),
 *   write: (client, jobId) => client.query('INSERT INTO effects VALUES ($1)', [jobId]),
 *   count: async (store, jobId) => (await store.pool.query('SELECT count(*)::int AS n FROM effects WHERE job_id = $1', [jobId])).rows[0].n,
 * }
 */
export interface HandlerTransactionHooks<S extends JobStore = JobStore> {
  /** Creates whatever `write` writes to (called once per test, on a fresh store). */
  setup(store: S): Promise<void>;
  /** Writes one effect for `jobId` through `tx`, the handle `ctx.transaction` gives handlers. */
  write(tx: unknown, jobId: string): Promise<void>;
  /** Committed effects for `jobId`, read around the store. */
  count(store: S, jobId: string): Promise<number>;
  /**
   * The database holds one write transaction at a time (SQLite): two owners' handler
   * transactions cannot be open at once, so the test that overlaps them is skipped.
   */
  singleWriter?: boolean;
}

/**
 * The optional members of `JobStore` (methods a store may leave out), derived from the
 * contract: `completeAndAcquire`, `queueStats`, `configureHistory`, …
 */
export type OptionalStoreMethod = {
  [K in keyof JobStore]-?: undefined extends JobStore[K]
    ? NonNullable<JobStore[K]> extends (...args: never[]) => unknown
      ? K
      : never
    : never;
}[keyof JobStore];

/**
 * What a store must run the suite with, pinned by its test file. Tests that need a capability,
 * an ability or an optional method the store lacks are skipped; with these pinned, a store that
 * loses one fails a test naming the difference instead.
 *
 * @example
 * requires: {
 *   capabilities: { progress: true, multiProcess: true },
 *   abilities: ['cancellation', 'history', 'views'],
 *   methods: ['completeAndAcquire'],
 * }
 */
export interface StoreRequirements {
  /** Each capability listed must have exactly this value (`false` pins an absence too). */
  capabilities: Partial<StoreCapabilities>;
  /** Optional abilities (`JobStore.cancellation`, …) the store must have, each whole. */
  abilities?: readonly StoreAbility[];
  /**
   * Optional fast paths and hooks (`completeAndAcquire`, …) the store must have, and the
   * optional member of an ability (`steps.saveInTransaction`).
   */
  methods?: readonly (OptionalStoreMethod | 'steps.saveInTransaction')[];
}

export interface ConformanceOptions<S extends JobStore = JobStore, Tx = unknown> {
  /** Shown in the suite's title, e.g. `sqlite`. */
  name: string;
  /**
   * A store on a fresh, EMPTY database (schema, file, table prefix). Called once per test. The
   * suite calls `migrate()` (twice, to prove it is idempotent) and `close()`.
   */
  createStore: () => Promise<S>;
  /** Called after the suite closed a store from `createStore`, e.g. to drop its schema. */
  destroyStore?: (store: S) => Promise<void>;
  /**
   * Another store instance on the SAME database with its own connection(s). The suite closes it.
   * Without it, races run on `store` itself, which only proves in-process atomicity, and the
   * durability group is skipped.
   */
  connectPeer?: (store: S) => Promise<JobStore>;
  /** How a child process opens the same database; adds multi-process races. */
  processPeer?: (store: S) => ProcessPeerSpec;
  /**
   * For a SQL store: the raw row of job `id`, read around the store (plain SQL), or null when
   * there is none. Column names as in `@jobs/core/sql` `rows.ts` (`state`, `lock_token`,
   * `lock_owner`, …); the suite maps it with `rowToJob`. Every state check then also checks the
   * stored row. Give this or `readRawJob`, not both.
   */
  readRaw?: (store: S, id: string) => Promise<Record<string, unknown> | null>;
  /**
   * For a store that does not keep SQL rows (a file, a key-value store, a document database):
   * job `id` as it is stored, read around the store (not through `getJob`: from the file on
   * disk, a second client, …) and decoded into a `Job` by the store's own decoder, or null when
   * there is none. Every state check then also checks the stored job, so a write that was
   * acknowledged before it was stored, or a `getJob` that says something the storage does not
   * hold, fails the test that made it. Give this or `readRaw`, not both.
   *
   * @example
   * readRawJob: async (store, id) => decodeJob(JSON.parse(await readFile(store.filename, 'utf8')), id),
   */
  readRawJob?: (store: S, id: string) => Promise<Job | null>;
  /** Open/commit/roll back a transaction for `enqueue(…, { tx })`; without it, `transactions` is skipped. */
  transaction?: TransactionHooks<S, Tx>;
  /** Effects through `ctx.transaction`; without it, `handler-transaction` is skipped. */
  handlerTransaction?: HandlerTransactionHooks<S>;
  /**
   * For a SQL store: calls the database's SQL enqueue entry point (PostgreSQL's function, MySQL's
   * procedure, SQLite's insertable view) with raw SQL on the store's database, with the JSON
   * texts given, and returns the id of the job written (or of its key's holder); a database
   * error is thrown as it is. With `tx` (from `transaction.begin`), inside that transaction.
   * Without it, `sql-enqueue` is skipped.
   */
  sqlEnqueue?: (
    store: S,
    call: { type: string; payload: string; options: string },
    tx?: Tx,
  ) => Promise<string>;
  /**
   * For a SQL store: calls the database's bulk SQL enqueue entry point (PostgreSQL's
   * `enqueue_many` function, MySQL's `<prefix>enqueue_many` procedure, SQLite's
   * `<prefix>enqueue_many` view) with raw SQL, `payloads` a JSON array's text; a database error
   * is thrown as it is. Without it, the bulk test of `sql-enqueue` is skipped.
   */
  sqlEnqueueMany?: (
    store: S,
    call: { type: string; payloads: string; options: string },
  ) => Promise<void>;
  /**
   * The capabilities and optional methods the store must declare. Without it the suite lists
   * the check as skipped, and a capability switched off silently skips the tests that need it.
   */
  requires?: StoreRequirements;
  /**
   * The same kind of store as `createStore` (fresh, empty), reading its time from `clock`, a
   * `FakeClock` the test moves. Tests that check a rule at the exact millisecond (a lease is not
   * recovered before it expires) use it; without it they are skipped, and real-time tests of
   * the same rule still run.
   */
  createStoreOnClock?: (clock: FakeClock) => Promise<S>;
  /** Groups not to run, each with the reason (shown in the test output). */
  skip?: Partial<Record<GroupName, string>>;
  /** Repetitions of each race. Default 10. */
  rounds?: number;
  /** Concurrent peers in races. Default 4. */
  peers?: number;
  /** Child processes in multi-process races (with `processPeer`). Default 2. */
  processes?: number;
  /**
   * Time limit, in ms, of one ordinary test and of the cleanup after each test. Default 30 000:
   * ample for a store that answers each call within 50 ms. The suite passes its time limits to
   * vitest itself, so the calling vitest config needs no `testTimeout` or `hookTimeout`. Tests
   * that repeat a race `rounds` times, run engines or wait out one-second schedules get a
   * multiple of it, and the waits inside a test (for engines to finish their jobs, for racing
   * peers to drain a pool) are sized from it: for a slower store, raise this one option.
   */
  timeoutMs?: number;
}
