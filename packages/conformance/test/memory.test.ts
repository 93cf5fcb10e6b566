import { type Job, MemoryJobStore } from '@jobs/core';
import { runJobStoreConformance } from '../src/index.js';

/** The raw "row" of a memory job, in the SQL column names the suite's raw checks read. */
function jobToRow(job: Job): Record<string, unknown> {
  return {
    id: job.id,
    type: job.type,
    payload: JSON.stringify(job.payload),
    state: job.state,
    priority: job.priority,
    due_at: job.dueAt,
    retries_left: job.retriesLeft,
    attempts: job.attempts,
    scope: job.scope,
    exclusive: job.exclusive,
    job_key: job.key,
    tenant_id: job.tenantId,
    queue: job.queue,
    last_error_message: job.lastError?.message ?? null,
    last_error_stack: job.lastError?.stack ?? null,
    created_at: job.createdAt,
    lock_owner: job.lockOwner,
    lock_expires_at: job.lockExpiresAt,
    lock_token: job.lockToken,
    retry_policy: job.retryPolicy ? JSON.stringify(job.retryPolicy) : null,
    suspended_from: job.suspendedFrom,
    schedule_name: job.schedule,
    occurrence: job.occurrence,
    shard_index: job.shard?.index ?? null,
    shard_count: job.shard?.count ?? null,
    meta: job.meta ? JSON.stringify(job.meta) : null,
    progress: job.progress == null ? null : JSON.stringify(job.progress),
    cancel_requested: job.cancelRequested ?? false,
    steps:
      job.steps === undefined
        ? null
        : JSON.stringify(job.steps.map((step) => ({ ...step, at: step.at.getTime() }))),
  };
}

/**
 * The store's clock, kept apart from this process's `Date` as a database server's is: the
 * schedule group steps `Date` under a real engine, which must not step the store's time too.
 */
const serverClock = { now: () => performance.timeOrigin + performance.now() };

runJobStoreConformance({
  name: 'memory',
  createStore: async () => new MemoryJobStore({ clock: serverClock }),
  createStoreOnClock: async (clock) => new MemoryJobStore({ clock }),
  // Pinned: a capability or method lost here fails a test instead of skipping the ones it backs.
  requires: {
    capabilities: {
      notifications: true,
      transactionalEnqueue: false,
      multiProcess: false,
      scopeLimits: true,
      keyModes: true,
      blockedSet: false,
      progress: true,
      startMarks: true,
      logs: true,
      timeLimits: true,
    },
    abilities: ['cancellation', 'rateLimits', 'history', 'bulk', 'views', 'steps', 'waits'],
    methods: ['completeAndAcquire'],
  },
  // Every "peer" is the same instance. That is still a real race for an in-process store: the
  // racing calls interleave at every await, exactly as engines sharing one MemoryJobStore do,
  // and each store method must be atomic across those interleavings.
  connectPeer: async (store) => store,
  // The memory store has no rows; this reads its state through getJob and maps it to the SQL
  // column names, so the raw-row checks run (and stay honest) here too.
  readRaw: async (store, id) => {
    const job = await store.getJob(id);
    return job ? jobToRow(job) : null;
  },
  skip: {
    durability: 'the memory store keeps nothing beyond its instance, by design',
  },
  rounds: 20,
});
