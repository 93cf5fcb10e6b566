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
