/**
 * What a scope limit and a rate limit cost: no-op jobs drained by one engine (concurrency 50,
 * default adaptive prefetch) on SQLite and PostgreSQL, as
 * - plain jobs;
 * - jobs of 1,000 scopes with `scopeLimit: 5` (5,000 slots: the limit never holds the engine
 *   back, so the difference is the rule's own cost in the acquisition);
 * - jobs of 100 scopes with `scopeLimit: 5`, and of 500 exclusive scopes: 500 slots each, which
 *   the engine's prefetch fills, so every acquisition walks the waiting rows of full scopes
 *   before it finds a free slot — the two cost the same, a limit of N costs what N exclusive
 *   scopes cost;
 * - a type with a rate limit that never binds (`max` 1M per second: the cost of taking starts
 *   from the store's window for every batch);
 * - plain jobs enqueued after 1,000 or 10,000 jobs of one scope whose 2 slots stay taken: every
 *   acquisition walks that scope's waiting rows first, so this cost grows with their number
 *   (issue 15's open item; a blocked set would keep them out of the walk).
 * Modes alternate within a round so drift on a shared machine hits all of them. Prints jobs/s
 * per run and each mode's median ÷ the plain median.
 *
 * `pnpm bench flow [--quick] [sqlite] [postgres] [mysql]` (default: SQLite and PostgreSQL at
 * `JOBS_PG_URL`; MySQL/MariaDB at `JOBS_MYSQL_URL` when named).
 */
import type { EnqueueJobOptions, JobEngine, RateLimit } from '@jobs/core';
import { drainRate, drainTargets, median } from './drain-targets.js';

const MODES: Record<
  string,
  { options: (i: number) => EnqueueJobOptions; rateLimit?: RateLimit; backlog?: number }
> = {
  plain: { options: () => ({}) },
  'scopeLimit 5 × 1000 scopes': {
    options: (i) => ({ scope: `s${i % 1000}`, scopeLimit: 5 }),
  },
  'scopeLimit 5 × 100 scopes': {
    options: (i) => ({ scope: `s${i % 100}`, scopeLimit: 5 }),
  },
  'exclusive × 500 scopes': { options: (i) => ({ scope: `x${i % 500}`, exclusive: true }) },
  'rateLimit (never binds)': {
    options: () => ({}),
    rateLimit: { max: 1_000_000, perMs: 1_000 },
  },
  'plain behind 1k full-scope': { options: () => ({}), backlog: 1_000 },
  'plain behind 10k full-scope': { options: () => ({}), backlog: 10_000 },
};

/**
 * `backlog` jobs of one scope with `scopeLimit: 2`, enqueued before the measured (plain) jobs:
 * the first two start and hold their slots until the engine stops, the rest wait — a full
 * scope's backlog ahead of the plain jobs in acquisition order.
 */
async function fullScopeBacklog(client: JobEngine, backlog: number): Promise<void> {
  for (let i = 0; i < backlog; i += 1000) {
    await client.enqueueMany(
      Array.from({ length: Math.min(1000, backlog - i) }, () => ({
        type: 'held',
        payload: {},
        options: { scope: 'tenant-a', scopeLimit: 2 },
      })),
    );
  }
}
const holdUntilStopped = (_job: unknown, ctx: { signal: AbortSignal }): Promise<void> =>
  new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
type Mode = string;

export async function runFlowLimits(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const JOBS = quick ? 5_000 : 20_000;
  const ROUNDS = quick ? 2 : 3;
  const named = argv.filter((arg) => !arg.startsWith('-'));
  const targets = drainTargets('flow', named.includes('mysql')).filter(
    (target) => named.length === 0 || named.includes(target.name),
  );
  const modes = Object.keys(MODES) as Mode[];
  for (const target of targets) {
    const rates = new Map<Mode, number[]>(modes.map((m) => [m, []]));
    try {
      for (let round = 0; round < ROUNDS; round++) {
        // Rotate the order each round.
        for (let k = 0; k < modes.length; k++) {
          const mode = modes[(k + round) % modes.length] as Mode;
          rates.get(mode)?.push(
            await drainRate(target, JOBS, {
              options: MODES[mode]?.options,
              before: async (client) => fullScopeBacklog(client, MODES[mode]?.backlog ?? 0),
              engine: {
                handlers: {
                  noop: { handler: async () => {}, rateLimit: MODES[mode]?.rateLimit },
                  held: holdUntilStopped,
                },
              },
              stopTimeoutMs: 100,
            }),
          );
        }
      }
    } catch (error) {
      console.log(`${target.name}: skipped (${(error as Error).message})`);
      continue;
    }
    const plain = median(rates.get('plain') ?? []);
    console.log(`${target.name}: ${JOBS} no-op jobs, concurrency 50, jobs/s (median; runs)`);
    for (const mode of modes) {
      const runs = rates.get(mode) ?? [];
      const m = median(runs);
      console.log(
        `  ${mode.padEnd(26)} ${String(Math.round(m)).padStart(7)}  ÷ plain ${(m / plain).toFixed(2)}  (${runs.map(Math.round).join(', ')})`,
      );
    }
  }
}
