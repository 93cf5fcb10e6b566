/**
 * What the end of a lapsed lease does to a job (`JobStore.recoverExpiredLeases`, invariants 4
 * and 20): the one rule every store applies, whatever it stores.
 */

/** Error message stored when a lease expires (crash, OOM, blocked event loop). */
export const LEASE_EXPIRED_MESSAGE =
  'lease expired: the owner stopped renewing it (crash or stall)';

/** How a lapsed lease ends for a job (see `afterLeaseExpiry`). */
export type LeaseExpiry = 'cancelled' | 'released' | 'requeued' | 'deadletter';

/**
 * A cancel-requested job ends `cancelled`; one whose handler never started (`startedAt` null on
 * a store that records starts) is `released` — waiting again, its attempt given back, nothing
 * charged; any other is charged: `requeued` with a retry fewer while it has retries left, else
 * `deadletter`.
 */
export function afterLeaseExpiry(job: {
  cancelRequested?: boolean;
  startedAt?: Date | null;
  retriesLeft: number;
}): LeaseExpiry {
  if (job.cancelRequested) return 'cancelled';
  if (job.startedAt === null) return 'released';
  return job.retriesLeft > 0 ? 'requeued' : 'deadletter';
}

/**
 * Which jobs of a lease it records as started (`AcquireRequest.start`, `startAhead`), by rank
 * in acquisition order from 0: those ranked below `always`, and those ranked below
 * `withRetriesLeft` that have retries left. With `start` given (an engine that starts only what
 * its free slots take) a job without retries left is never recorded by the lease: its start is
 * recorded by a renewal just before its handler starts, so an answer that came back after the
 * lease lapsed, or an owner that died before starting it, can never dead-letter it unrun.
 * Without `start` (the caller starts every job at once) all `count` are recorded.
 */
export function leaseStarts(
  request: { start?: number; startAhead?: number },
  count: number,
): LeaseStartRule {
  const always = request.start === undefined ? count : 0;
  const withRetriesLeft =
    request.start === undefined ? count : request.start + (request.startAhead ?? 0);
  return {
    always,
    withRetriesLeft,
    records: (rank, retriesLeft) => rank < always || (rank < withRetriesLeft && retriesLeft > 0),
  };
}

/** `leaseStarts`'s answer: the two bounds, and the rule they make for one job. */
export interface LeaseStartRule {
  always: number;
  withRetriesLeft: number;
  /** Whether the job ranked `rank` (from 0) with `retriesLeft` retries is recorded as started. */
  records(rank: number, retriesLeft: number): boolean;
}
