/**
 * The `JobStore` contract: everything an engine needs from a database, and nothing more.
 *
 * Glossary
 * - **job**: one unit of work of a `type` with a JSON `payload`, stored as one row.
 * - **state**: where a job is in its lifecycle:
 *   `timer` (waits for its due time, e.g. a delayed job or a retry after backoff),
 *   `async` (due, waiting for an executor), `running` (leased to an owner: acquired, maybe
 *   prefetched and not started yet, or executing), `deadletter` (out of retries; waits for an
 *   operator), `suspended` (parked by an operator; remembers the state it came from).
 *   A finished job is deleted. A store may acquire a due `timer` job straight into `running`.
 * - **owner**: the engine instance that holds a job (a unique string per engine).
 * - **lease**: an owner's claim on a running job until `lockExpiresAt`, measured on the store's
 *   clock. Owners renew leases while jobs run; an expired lease makes the job acquirable again.
 * - **token** (fencing token): a fresh value written at each acquisition. Every write by the
 *   holder (complete, fail, release, renew) names the token; a stale token changes nothing.
 * - **scope**: a string grouping jobs (a process instance, a tenant's account, a shard). At most
 *   one *exclusive* job per scope runs at a time, and they start in order.
 * - **key**: a unique key; while an unfinished job holds it, enqueuing the same key returns that job.
 * - **schedule**: a named repeating trigger (cron, every, repeat). Each **occurrence** (one fire
 *   time) creates its jobs exactly once, whoever fires it. Every write bumps its `version`; fires
 *   and redefinitions compare-and-set on it, so neither undoes the other.
 *
 * Time: every comparison against "now" (due times, lease expiry) is made with the store's clock
 * (`now()`), never the calling node's, so nodes whose clocks disagree still agree on leases.
 *
 * Order of acquisition: priority descending, then due time ascending, then insertion order.
 */
export type JobState = 'timer' | 'async' | 'running' | 'deadletter' | 'suspended';

export const JOB_STATES: readonly JobState[] = [
  'timer',
  'async',
  'running',
  'deadletter',
  'suspended',
] as const;

/** The error a failed attempt left on the job. */
export interface JobError {
  message: string;
  stack: string | null;
}

/**
 * How a job waits between failed attempts, stored with the job when given per job.
 * - `cycle`: an ISO-8601 repeating interval like Flowable's `failedJobRetryTimeCycle`, `R5/PT10M`.
 * - `exponential`: `initialMs * factor^(attempt-1)`, capped at `maxMs`, with ± `jitter` (0..1).
 * - `fixed`: always `delayMs`.
 */
export type RetryPolicy =
  | { kind: 'cycle'; cycle: string }
  | { kind: 'exponential'; initialMs: number; factor?: number; maxMs?: number; jitter?: number }
  | { kind: 'fixed'; delayMs: number };

/** A job as stored and as users see it. */
export interface Job<P = unknown> {
  id: string;
  type: string;
  payload: P;
  state: JobState;
  /** Higher runs first. */
  priority: number;
  /** When the job becomes (or became) due, on the store's clock. */
  dueAt: Date;
  /** Failed attempts still allowed before the job goes to the dead-letter area. */
  retriesLeft: number;
  /** Acquisitions so far (a release gives one back). */
  attempts: number;
  scope: string | null;
  exclusive: boolean;
  key: string | null;
  tenantId: string | null;
  queue: string;
  lastError: JobError | null;
  createdAt: Date;
  lockOwner: string | null;
  lockExpiresAt: Date | null;
  /** Fencing token of the current lease; null when not running. */
  lockToken: string | null;
  /** Retry policy given for this job; null means the engine's policy for its type. */
  retryPolicy: RetryPolicy | null;
  /** For a suspended job, the state it returns to on activate. */
  suspendedFrom: 'timer' | 'async' | null;
  /** Set on jobs created by a schedule. */
  schedule: string | null;
  /** The occurrence (fire time) that created this job. */
  occurrence: Date | null;
  /** Shard index and count, for sharded schedules. */
  shard: { index: number; count: number } | null;
}

/** A job to insert. The engine has validated it. */
export interface NewJob {
  type: string;
  payload: unknown;
  /** Absolute due time; null means "now" on the store's clock. */
  dueAt: Date | null;
  /** Delay from the store's "now", added to `dueAt ?? now`. */
  delayMs: number;
  priority: number;
  retries: number;
  scope: string | null;
  exclusive: boolean;
  key: string | null;
  tenantId: string | null;
  queue: string;
  retryPolicy: RetryPolicy | null;
  schedule: string | null;
  occurrence: Date | null;
  shard: { index: number; count: number } | null;
}

export interface EnqueueResult {
  job: Job;
  /** False when an unfinished job already held the key and was returned instead. */
  created: boolean;
}

/** A claim on a running job: its id and the fencing token of the lease. */
export interface JobRef {
  id: string;
  token: string;
}

export interface AcquireRequest {
  owner: string;
  /** Most jobs to return. */
  limit: number;
  leaseMs: number;
  /** Only these job types (the handlers the engine has). Never empty. */
  types: readonly string[];
  /** Only these queues; null for all. */
  queues: readonly string[] | null;
  /** Only these tenants; null for all (including jobs without tenant). */
  tenants: readonly string[] | null;
}

export interface JobFailure extends JobRef {
  error: JobError;
  /** True: straight to the dead-letter area. False: back to `timer`, due after the delay. */
  deadletter: boolean;
  /** Backoff before the next attempt, measured from the store's now. */
  retryDelayMs: number;
}

/** What a batch of writes by a holder did: ids whose token was stale are in `lost`. */
export interface SettleResult {
  lost: string[];
}

export interface RecoverResult {
  /** Jobs whose lease expired, made acquirable again (an attempt counted). */
  requeued: string[];
  /** Jobs whose lease expired with no retries left, moved to the dead-letter area. */
  deadlettered: string[];
}

/** Selects jobs for admin operations. All given fields must match. */
export interface JobFilter {
  state?: JobState | readonly JobState[];
  type?: string;
  scope?: string;
  tenantId?: string;
  queue?: string;
  schedule?: string;
}

export interface ListJobsRequest extends JobFilter {
  /** Page size, 1..1000. */
  limit: number;
  offset: number;
}

export interface StatsRow {
  type: string;
  state: JobState;
  count: number;
}

/** What a schedule fires, as stored. `spec` is owned by the engine (JSON). */
export interface ScheduleRecord {
  name: string;
  spec: unknown;
  /** Next fire time on the store's clock; null when the schedule has no more occurrences. */
  nextAt: Date | null;
  paused: boolean;
  /** A fire was coalesced (overlap `coalesce`); run once when the previous occurrence ends. */
  pendingMisfire: boolean;
  /** Fires dropped by overlap `skip`. */
  skipped: number;
  /** Occurrences fired so far. */
  fired: number;
  /** Bumped by every write; fires and versioned saves (`expectedVersion`) compare-and-set on it. */
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface SaveScheduleRequest {
  name: string;
  spec: unknown;
  nextAt: Date | null;
  /** On update: reset `fired`, `skipped` and `pendingMisfire` (the trigger changed). */
  resetProgress: boolean;
  /**
   * Compare-and-set on the schedule's `version`, checked in the same statement or transaction
   * as the write: `undefined` upserts unconditionally; `null` only creates (nothing changes if
   * the name exists); a number only updates, and only while the stored version equals it. A
   * caller that computed `nextAt` from a read passes that read's version, so a fire in between
   * is never undone.
   */
  expectedVersion?: number | null;
}

export interface ScheduleFire {
  name: string;
  /** The version read; the fire changes nothing if the schedule moved on since. */
  version: number;
  /** The schedule's next fire time after this one. */
  nextAt: Date | null;
  overlap: 'skip' | 'coalesce' | 'allow';
  /** Jobs of this occurrence (one per shard). */
  jobs: NewJob[];
  /** Added to `fired` when jobs are created. */
  occurrences: number;
}

export type ScheduleFireStatus = 'fired' | 'skipped' | 'coalesced' | 'conflict';

export interface ScheduleFireResult {
  status: ScheduleFireStatus;
  jobs: Job[];
}

/** What differs between databases. The engine and the conformance suite read these. */
export interface StoreCapabilities {
  /** `subscribe` delivers wake-ups when another connection or process enqueues. */
  notifications: boolean;
  /** Acquisition skips rows other acquirers hold instead of waiting (`SKIP LOCKED`). */
  skipLocked: boolean;
  /** `enqueue(jobs, { tx })` joins the caller's open transaction. */
  transactionalEnqueue: boolean;
  /** Several processes may open the same store at once. */
  multiProcess: boolean;
}

export interface EnqueueOptions {
  /** The caller's open transaction, in the store's own terms (see the store's docs). */
  tx?: unknown;
}

export interface JobStore {
  /** Short name for messages, e.g. `sqlite`. */
  readonly name: string;
  readonly capabilities: StoreCapabilities;

  /** Creates or upgrades the schema. Idempotent; safe when several processes call it at once. */
  migrate(): Promise<void>;
  /** Releases connections and file handles. */
  close(): Promise<void>;
  /** The store's clock. */
  now(): Promise<Date>;

  /**
   * Inserts jobs in one transaction (the caller's, when `tx` is given). A job with a key held by
   * an unfinished job is not inserted; the holder is returned with `created: false`.
   * Results are in input order.
   */
  enqueue(jobs: readonly NewJob[], options?: EnqueueOptions): Promise<EnqueueResult[]>;

  /**
   * Leases up to `limit` due jobs (state `timer` or `async`, `dueAt <= now`) of the given types to
   * `owner`, in acquisition order, and returns them as `running` with a fresh token, lease expiry
   * `now + leaseMs` and `attempts + 1`. Never hands a job to two owners. An exclusive job is taken
   * only if it is first in its scope (by acquisition order) among due waiting jobs and no
   * exclusive job of its scope is running with a live lease.
   */
  acquire(request: AcquireRequest): Promise<Job[]>;

  /** Deletes finished jobs held with these tokens. */
  complete(jobs: readonly JobRef[]): Promise<SettleResult>;

  /**
   * Optional hot path: `complete(done)` and `acquire(request)` in one round trip (a PostgreSQL CTE
   * can). The engine uses it when present.
   */
  completeAndAcquire?(
    done: readonly JobRef[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }>;

  /** Records failed attempts: back to `timer` after the delay with one retry fewer, or deadletter. */
  fail(failures: readonly JobFailure[]): Promise<SettleResult>;

  /** Gives jobs back unstarted: `async` again, lock cleared, the attempt not counted. */
  release(jobs: readonly JobRef[]): Promise<SettleResult>;

  /** Extends the leases of `owner`'s jobs to `now + leaseMs`, in one statement where possible. */
  renewLeases(owner: string, leaseMs: number, jobs: readonly JobRef[]): Promise<SettleResult>;

  /**
   * Finds running jobs whose lease expired: with retries left they become `async` with one retry
   * fewer and an error saying the lease expired; without, they go to the dead-letter area.
   */
  recoverExpiredLeases(limit: number): Promise<RecoverResult>;

  /** The earliest due time of a waiting job the request could acquire, or null. */
  nextDueAt(request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>): Promise<Date | null>;

  /**
   * Calls `listener` when jobs may have been enqueued elsewhere (other connections or processes).
   * Only when `capabilities.notifications`. Returns an unsubscribe function.
   */
  subscribe?(listener: () => void): () => void;

  // ---- admin ----

  getJob(id: string): Promise<Job | null>;
  /** Jobs matching the filter, in id order, paged. */
  listJobs(request: ListJobsRequest): Promise<Job[]>;
  /** Moves a dead-letter job to `async` with `retries` fresh retries; null if not in deadletter. */
  retryDeadletter(id: string, retries: number): Promise<Job | null>;
  /** Deletes a job in any state. False when it did not exist. */
  deleteJob(id: string): Promise<boolean>;
  /** Moves waiting (`timer`, `async`) jobs matching the filter to `suspended`. Returns how many. */
  suspend(filter: JobFilter): Promise<number>;
  /** Moves suspended jobs matching the filter back to the state they came from. */
  activate(filter: JobFilter): Promise<number>;
  /** Job counts by type and state. */
  stats(): Promise<StatsRow[]>;

  // ---- schedules ----

  /**
   * Creates or updates a schedule by name (a new one: version 1, unpaused, no progress; an
   * update keeps `paused` and bumps the version). Null, with nothing written, only when
   * `expectedVersion` was given and did not match.
   */
  saveSchedule(request: SaveScheduleRequest): Promise<ScheduleRecord | null>;
  getSchedule(name: string): Promise<ScheduleRecord | null>;
  listSchedules(): Promise<ScheduleRecord[]>;
  /** Deletes the schedule (its jobs stay). False when it did not exist. */
  deleteSchedule(name: string): Promise<boolean>;
  setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null>;
  /** Unpaused schedules with `nextAt <= now`, or with a pending misfire. */
  dueSchedules(limit: number): Promise<ScheduleRecord[]>;
  /**
   * In one transaction: if the schedule's version still matches, applies the overlap rule
   * (an unfinished job — timer, async or running — of this schedule makes `skip` drop the fire
   * and `coalesce` set `pendingMisfire`), inserts the jobs otherwise (clearing `pendingMisfire`),
   * and moves the schedule to `nextAt` with a new version. A stale version changes nothing.
   */
  fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult>;
}
