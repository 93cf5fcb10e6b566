import type { JobStore } from '@jobs/core';

/**
 * The invariant groups of the suite, one file each in `src/groups/`. Numbers refer to the
 * invariants in DESIGN.md.
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
  'failure',
  'deadletter',
  'suspension',
  'exclusive',
  'release',
  'notifications',
  'clock',
  'transactions',
  'admin',
  'schedules',
  'schedule-engine',
  'engine',
  'faults',
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
   * The raw row of job `id`, read around the store (plain SQL), or null when there is none.
   * Column names as in `@jobs/core` `sql/rows.ts` (`state`, `lock_token`, `lock_owner`, …).
   */
  readRaw?: (store: S, id: string) => Promise<Record<string, unknown> | null>;
  /** Open/commit/roll back a transaction for `enqueue(…, { tx })`; without it, `transactions` is skipped. */
  transaction?: TransactionHooks<S, Tx>;
  /** Groups not to run, each with the reason (shown in the test output). */
  skip?: Partial<Record<GroupName, string>>;
  /** Repetitions of each race. Default 10. */
  rounds?: number;
  /** Concurrent peers in races. Default 4. */
  peers?: number;
  /** Child processes in multi-process races (with `processPeer`). Default 2. */
  processes?: number;
}
