/**
 * The JobStore conformance suite through a private PgBouncer in transaction mode: the store with
 * `pooler: 'transaction'`, LISTEN on the direct URL. Skips (loudly) only without the pgbouncer
 * binary outside CI.
 */
import type { GroupName } from '@jobs/conformance';
import { afterAll, describe, it } from 'vitest';
import { runPostgresConformance } from './conformance-suite.js';
import { PG_URL, reachable } from './helpers.js';
import { pgbouncerOrSkip, startPgbouncer } from './pgbouncer.js';

const binary = reachable ? pgbouncerOrSkip() : null;

/**
 * Through the pooler every call takes the same path (no named statements, each call in a
 * transaction with SET LOCAL timeouts, LISTEN on the direct URL), so the groups that write in
 * every way, hold locks, use caller transactions and wake-ups run here; these repeat the
 * direct run's statements and run there (conformance.test.ts).
 */
const DIRECT = 'the same statements as the direct run (conformance.test.ts), which runs it';
const LEFT_TO_THE_DIRECT_RUN: Partial<Record<GroupName, string>> = {
  durability: DIRECT,
  timers: DIRECT,
  ownership: DIRECT,
  deadletter: DIRECT,
  suspension: DIRECT,
  'scope-limit': DIRECT,
  'blocked-set': DIRECT,
  'rate-limit': DIRECT,
  release: DIRECT,
  clock: DIRECT,
  admin: DIRECT,
  'operator-views': DIRECT,
  'hostile-input': DIRECT,
  logs: DIRECT,
  schedules: DIRECT,
  'schedule-engine': DIRECT,
  faults: DIRECT,
  // Engines over the steps, children and waits calls, which run here in their own groups.
  flows: DIRECT,
  'batch-handlers': DIRECT,
};

if (binary) {
  const bouncer = await startPgbouncer(binary, PG_URL);
  afterAll(() => bouncer.stop());
  runPostgresConformance({
    name: 'postgres through PgBouncer (transaction mode)',
    url: bouncer.transactionUrl,
    pooler: 'transaction',
    listenUrl: PG_URL,
    // The direct run covers the default (`broadcast`); this one the targeted wake-ups.
    wakeUps: 'targeted',
    skip: LEFT_TO_THE_DIRECT_RUN,
  });
} else {
  describe.skip('JobStore conformance: postgres through PgBouncer (no server or no pgbouncer)', () => {
    it('needs PostgreSQL and pgbouncer', () => {});
  });
}
