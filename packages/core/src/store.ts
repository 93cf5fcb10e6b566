/**
 * The `JobStore` contract: everything an engine needs from a database, and nothing more.
 *
 * Glossary
 * - **job**: one unit of work of a `type` with a JSON `payload`, stored as one row.
 * - **state**: where a job is in its lifecycle:
 *   `timer` (waits for its due time, e.g. a delayed job or a retry after backoff),
 *   `async` (due, waiting for an executor), `running` (leased to an owner: acquired, maybe
 *   prefetched and not started yet, or executing), `deadletter` (out of retries; waits for an
 *   operator), `suspended` (parked by an operator; remembers the state it came from),
 *   `blocked` (a limited job that is due but waits for a slot of its full scope: kept out of
 *   the acquisition walk and let in, in acquisition order, as slots free up; only on stores
 *   with `rebalanceScopes`).
 *   A finished job leaves the live table. A store may acquire a due `timer` job straight into
 *   `running`.
 * - **history**: finished jobs kept, when the engine asks for it (`configureHistory`), in a
 *   table of their own: outcome (`completed`, `deadletter` = deleted from the dead-letter area,
 *   `cancelled`), result, last error, attempts, duration, owner, finish time. A record is
 *   written in the same statement or transaction that finishes the job, and pruned after the
 *   retention period. The live table stays small, so the hot path never reads history.
 * - **owner**: the engine instance that holds a job (a unique string per engine).
 * - **lease**: an owner's claim on a running job until `lockExpiresAt`, measured on the store's
 *   clock. Owners renew leases while jobs run; an expired lease makes the job acquirable again.
 * - **token** (fencing token): a fresh value written at each acquisition. Every write by the
 *   holder (complete, fail, release, renew) names the token; a stale token changes nothing.
 * - **scope**: a string grouping jobs (a process instance, a tenant's account, a shard). At most
 *   `scopeLimit` *limited* jobs per scope run at a time (an *exclusive* job has a limit of 1),
 *   and they start in order. A limited job's lease keeps its slot until it settles or is
 *   recovered, also after it lapsed.
 * - **key**: a unique key; while an unfinished job holds it, enqueuing the same key returns that
 *   job (`keyMode` `keep`), or updates it while it waits (`replace`, `debounce`).
 * - **schedule**: a named repeating trigger (cron, every, repeat). Each **occurrence** (one fire
 *   time) creates its jobs exactly once, whoever fires it. Every write bumps its `version`; fires
 *   and redefinitions compare-and-set on it, so neither undoes the other.
 *
 * Time: every comparison against "now" (due times, lease expiry) is made with the store's clock
 * (`now()`), never the calling node's, so nodes whose clocks disagree still agree on leases.
 *
 * Order of acquisition: priority descending, then due time ascending, then insertion order.
 *
 * Where things live: the engine is split by concern under `engine/` — `engine.ts` (the
 * `JobEngine` facade), `options.ts`, `enqueue.ts` (client side), `acquisition-loop.ts`,
 * `held-jobs.ts` (leased jobs: the prefetch buffer, executing, settling), `dispatch.ts`
 * (handlers and their `ctx`), `settlement.ts` (batched complete/fail/release, uncertain
 * settles), `lease-renewal.ts` (heartbeat and local lease deadline), `maintenance.ts` (clock
 * sync, expired-lease recovery), `timer-firing.ts` (schedule firing, the `timer-fired` event),
 * `shutdown.ts`. The retry decision (retry or deadletter, and the backoff) is in `retry.ts`.
 * The scope-limit rule (exclusive = a limit of 1) is a store's: `sql/scope-rule.ts` for SQL
 * stores, `acquire` in `memory-store.ts`; the engine only checks the options (`validate.ts`).
 * Rate limits: the window rule is `rate-window.ts` (kept per key by the store's
 * `takeRateTokens`), the engine's side `engine/rate-limits.ts`.
 * The SQL stores share `sql/` (`@jobs/core/sql`): `sql-store.ts` (`SqlJobStore`, this contract
 * over a `Dialect` and an `Executor`), `operations/` (enqueue, acquire, settle, recover, admin,
 * schedules), `dialects/` (PostgreSQL, MySQL/MariaDB, SQLite), `rows.ts` (the one column list)
 * and `migrate.ts` (the one migration loader, numbered `.sql` files in `migrations/`).
 */
export type JobState = 'timer' | 'async' | 'blocked' | 'running' | 'deadletter' | 'suspended';

export const JOB_STATES: readonly JobState[] = [
  'timer',
  'async',
  'blocked',
  'running',
  'deadletter',
  'suspended',
] as const;

/** The states a job waits in: `timer`, `async`, `blocked`. */
export type WaitingState = 'timer' | 'async' | 'blocked';

/** True for a state a job waits in to run (`timer`, `async`, `blocked`). */
export function isWaitingState(state: JobState): state is WaitingState {
  return state === 'timer' || state === 'async' || state === 'blocked';
}

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
  /** At most one job of its scope with a limit runs at a time (a `scopeLimit` of 1). */
  exclusive: boolean;
  /**
   * At most this many limited jobs of its scope run at once (1 for an exclusive job); null for
   * a job without a limit. Optional, so stores written before limits still type-check.
   */
  scopeLimit?: number | null;
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
  suspendedFrom: WaitingState | null;
  /** Set on jobs created by a schedule. */
  schedule: string | null;
  /** The occurrence (fire time) that created this job. */
  occurrence: Date | null;
  /** Shard index and count, for sharded schedules. */
  shard: { index: number; count: number } | null;
  /**
   * Small string headers stored with the job by the code that enqueued it, e.g. the W3C trace
   * context (`traceparent`, `tracestate`) that `@jobs/otel` writes; null when none were given.
   */
  meta: Record<string, string> | null;
  /**
   * The latest value the handler reported with `ctx.progress` (JSON) and a heartbeat wrote;
   * null when none. Absent on stores without `capabilities.progress`.
   */
  progress?: unknown;
  /**
   * An operator asked to cancel this running job (`admin.cancel`); its owner learns it from its
   * next lease renewal. Absent on stores without `capabilities.cancellation`.
   */
  cancelRequested?: boolean;
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
  /** A scope limit of 1 (`scopeLimit` is then 1 or absent). */
  exclusive: boolean;
  /**
   * The job's scope limit N ≥ 1 (1 with `exclusive`); absent or null for none. A store without
   * `capabilities.scopeLimits` is never given one above 1 (the engine refuses it).
   */
  scopeLimit?: number | null;
  key: string | null;
  /**
   * What a key held by an unfinished job does (absent: `keep`): `keep` returns the holder;
   * `replace` gives a *waiting* holder (`timer`/`async`) this job's payload and due time;
   * `debounce` gives it this payload and the later of the two due times. A running (or
   * suspended, dead-letter) holder is returned unchanged. Concurrent enqueuers queue on the
   * holder (the last one wins); a holder created by a transaction this one cannot see is
   * returned unchanged (this enqueue counts as the earlier). Only with `capabilities.keyModes`.
   */
  keyMode?: KeyMode;
  tenantId: string | null;
  queue: string;
  retryPolicy: RetryPolicy | null;
  schedule: string | null;
  occurrence: Date | null;
  shard: { index: number; count: number } | null;
  /**
   * String headers stored with the job in the same INSERT (see `Job.meta`); absent or null for
   * none. Optional, so stores and tests written before it still type-check.
   */
  meta?: Record<string, string> | null;
}

/** What enqueuing a key that an unfinished job holds does (see `NewJob.keyMode`). */
export type KeyMode = 'keep' | 'replace' | 'debounce';

export interface EnqueueResult {
  job: Job;
  /** False when an unfinished job already held the key and was returned instead. */
  created: boolean;
}

/** A claim on a running job: its id and the fencing token of the lease. */
export interface JobRef {
  id: string;
  token: string;
  /**
   * The job's scope when it is limited (exclusive or `scopeLimit`): a store with
   * `rebalanceScopes` lets the next blocked job of that scope in once the settle freed a slot.
   * Absent for other jobs; a store without blocked sets ignores it.
   */
  scope?: string;
}

/**
 * The ref an owner settles `job` with: its id and lease token, and its scope when it is limited
 * (so a store with blocked sets lets the scope's next job in).
 */
export function refOf(job: Job): JobRef {
  const ref: JobRef = { id: job.id, token: job.lockToken as string };
  const scope = limitedScopeOf(job);
  if (scope !== undefined) ref.scope = scope;
  return ref;
}

/** The scope of a limited job (exclusive or `scopeLimit`); undefined for any other. */
export function limitedScopeOf(job: Job): string | undefined {
  return job.scope !== null && (job.exclusive || (job.scopeLimit ?? null) !== null)
    ? job.scope
    : undefined;
}

/**
 * A finished job to complete: its claim, plus what history records of the run. Both extra
 * fields are optional, so a plain `JobRef` still completes a job (and a store without history
 * ignores them).
 */
export interface JobCompletion extends JobRef {
  /**
   * JSON text of what the handler returned, at most `HISTORY_RESULT_MAX_BYTES` (the engine
   * replaces larger or unstorable results with a marker, see `history.ts`); null or absent for
   * none. The engine sends it only while history keeps completed jobs.
   */
  resultJson?: string | null;
  /** How long the handler ran, in ms, measured by the engine. */
  durationMs?: number | null;
}

/**
 * How a finished job ended: `completed` (its handler succeeded), `deadletter` (an operator
 * deleted it from the dead-letter area), `cancelled` (an operator cancelled it, `admin.cancel`).
 */
export type HistoryOutcome = 'completed' | 'deadletter' | 'cancelled';

export const HISTORY_OUTCOMES: readonly HistoryOutcome[] = [
  'completed',
  'deadletter',
  'cancelled',
] as const;

/**
 * Which finished jobs history keeps: `all`; `failed` (only outcomes `deadletter` and
 * `cancelled`: jobs that did not complete); `none`.
 */
export type HistoryKeep = 'all' | 'failed' | 'none';

/** What a store's history keeps, as the engine configured it (`JobStore.configureHistory`). */
export interface HistorySettings {
  keep: HistoryKeep;
  /** Records older than this (by `finishedAt`, on the store's clock) are pruned. */
  retentionMs: number;
}

/**
 * A finished job as history keeps it: the job's own fields as they were when it finished, plus
 * how it ended. `state` is `'finished'`; `lockOwner` is the owner that ran it last (null when
 * nobody held it at the end); it holds no lease.
 */
export interface JobHistoryRecord<P = unknown>
  extends Omit<Job<P>, 'state' | 'lockExpiresAt' | 'lockToken' | 'suspendedFrom'> {
  state: 'finished';
  outcome: HistoryOutcome;
  /** What the handler returned (JSON), or a marker object when it was too large; else null. */
  result: unknown;
  /** When it finished, on the store's clock. */
  finishedAt: Date;
  /** How long its last run took, in ms; null when it did not end by running. */
  durationMs: number | null;
  lockExpiresAt: null;
  lockToken: null;
  suspendedFrom: null;
}

/** Selects history records. All given fields must match; `since`/`until` bound `finishedAt`. */
export interface HistoryFilter {
  type?: string;
  outcome?: HistoryOutcome;
  /** Finished at or after this time. */
  since?: Date;
  /** Finished before this time. */
  until?: Date;
}

export interface ListHistoryRequest extends HistoryFilter {
  /** Page size, 1..1000. */
  limit: number;
  /** Keyset position: only records strictly after this one in newest-first order. */
  after?: { finishedAt: Date; id: string } | null;
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

/** Starts asked of one rate-limit window (`JobStore.takeRateTokens`). */
export interface RateTokenRequest {
  /** The window's key: the job type, or `type|key` for a keyed limit. At most 255 characters. */
  key: string;
  /** Most starts per window. */
  max: number;
  /** Window length in ms. */
  perMs: number;
  /** Starts wanted now (0: only push the window out, with `blockMs`). */
  want: number;
  /** Grant nothing until `now + blockMs` on the store's clock (a remote said "back off"). */
  blockMs?: number;
}

/** What a rate-limit window granted. */
export interface RateTokenGrant {
  key: string;
  /** Starts granted, at most `want`; those plus the window's earlier ones are at most `max`. */
  granted: number;
  /** When the window ends (or the block lifts), on the store's clock: when to ask again. */
  retryAt: Date;
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

/**
 * A lease to renew, with the latest progress its handler reported (`ctx.progress`) as JSON text
 * when it changed since the last renewal: the store writes it in the renewing statement.
 */
export interface LeaseRenewalRef extends JobRef {
  /** JSON text of at most `MAX_PROGRESS_BYTES`; absent or null: progress unchanged. */
  progressJson?: string | null;
}

/** What a renewal did: lost leases, and the renewed jobs an operator asked to cancel. */
export interface RenewResult extends SettleResult {
  /** Ids (renewed, not lost) with a cancel request; absent when there are none. */
  cancelRequested?: string[];
}

/** Largest progress value a store keeps, in bytes of JSON (UTF-8). */
export const MAX_PROGRESS_BYTES = 8 * 1024;

/**
 * What `JobStore.cancel` did: `cancelled` (a waiting, suspended or dead-letter job was deleted,
 * with a history record of outcome `cancelled`), `requested` (a running job was flagged; its
 * owner ends it at its next renewal), `finished` (no live job, but history has it: it already
 * ended), `not-found` (no live job and no history record).
 */
export type CancelOutcome = 'cancelled' | 'requested' | 'finished' | 'not-found';

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
  /**
   * The job holding this unique key. Optional for stores (a store may ignore it), so only
   * `listJobs`/`countJobs` callers that check the result use it; bulk writes never take it.
   */
  key?: string;
}

export interface ListJobsRequest extends JobFilter {
  /** Page size, 1..1000. */
  limit: number;
  offset: number;
  /**
   * Keyset position: only jobs after this id in id order (`offset` then applies after it), so
   * deep pages stay as fast as the first. Optional for stores: one that ignores it returns
   * jobs from the start, which a caller can tell (the first id is not after `afterId`).
   */
  afterId?: string | null;
}

export interface StatsRow {
  type: string;
  state: JobState;
  count: number;
}

/** Jobs of one queue, type and state, for operators and queue-depth metrics (`JobStore.queueStats`). */
export interface QueueStatsRow {
  queue: string;
  type: string;
  state: JobState;
  count: number;
  /** How many of them have `dueAt <= now` on the store's clock (for `timer`/`async`: acquirable). */
  due: number;
  /** The earliest `dueAt` among them: for a group with `due > 0`, the oldest due job's. */
  oldestDueAt: Date;
}

/** Due waiting jobs of one type, for "nobody runs these" warnings (`JobStore.overdueTypes`). */
export interface OverdueType {
  type: string;
  count: number;
  oldestDueAt: Date;
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
  /**
   * Calls from one engine run at the same time on separate connections (a pool of more than
   * one). The engine then writes completions on their own as jobs finish, beside its
   * acquisitions, instead of holding them for `completeAndAcquire` (one call that does both
   * on one connection, one after the other). Absent or false: completions ride on the next
   * acquisition when the store has `completeAndAcquire`.
   */
  concurrentCalls?: boolean;
  /**
   * Scope limits above 1 (`NewJob.scopeLimit`) are kept; absent or false: only exclusive
   * (a limit of 1), and the engine refuses larger limits with a clear error.
   */
  scopeLimits?: boolean;
  /** `NewJob.keyMode` `replace` and `debounce` are kept; absent or false: only `keep`. */
  keyModes?: boolean;
  /** `takeRateTokens` and `deferJobs` exist: rate limits are kept in the store. */
  rateLimits?: boolean;
  /**
   * `cancel` and `cancelHeld` exist, `renewLeases` answers `cancelRequested`, and `complete`
   * / `fail` leave a cancel-requested job alone (reported lost, so its owner cancels it).
   * Absent or false: `admin.cancel` says the store cannot cancel.
   */
  cancellation?: boolean;
  /**
   * `renewLeases` writes `progressJson`, and jobs (and history records) carry `progress`.
   * Absent or false: `ctx.progress` keeps the value in the engine's memory only.
   */
  progress?: boolean;
  /**
   * The batch an engine's default adaptive prefetch grows to on this store
   * (`concurrency + maxPrefetch`, see `EngineOptions.maxPrefetch`). Absent: 1,000. A store whose
   * acquisitions cost much per call and little per job asks for more (MySQL/MariaDB: 2,000).
   */
  batchLimit?: number;
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
   * `now + leaseMs` and `attempts + 1`. Never hands a job to two owners. A limited job (exclusive,
   * or with a `scopeLimit` N) is taken only while fewer than N limited jobs of its scope are
   * `running` (live or lapsed lease) and it is among the first `N - running` due waiting limited
   * jobs of its scope by acquisition order (any type, queue or tenant); N is its own limit.
   */
  acquire(request: AcquireRequest): Promise<Job[]>;

  /**
   * Deletes finished jobs held with these tokens. With history keeping completed jobs
   * (`configureHistory`, keep `all`), each one's record (outcome `completed`, its
   * `resultJson` and `durationMs`) is written in the same statement or transaction; a job
   * whose lease was lost gets no record.
   */
  complete(jobs: readonly JobCompletion[]): Promise<SettleResult>;

  /**
   * Optional hot path: `complete(done)` and `acquire(request)` in one round trip (a PostgreSQL CTE
   * can), history records included. The engine uses it when present, unless the store runs
   * calls concurrently (`capabilities.concurrentCalls`).
   */
  completeAndAcquire?(
    done: readonly JobCompletion[],
    request: AcquireRequest,
  ): Promise<{ lost: string[]; jobs: Job[] }>;

  /**
   * Optional: runs `work` in a transaction of the store's database and, in the same
   * transaction, completes the job held with `ref`'s token; commits only while that lease is
   * still current, else rolls back and rejects with `LockLostError`. So a job's database
   * effects written through `tx` apply exactly once, even when its handler runs twice. `tx`
   * is the transaction in the store's own terms (see the store's docs). Backs `ctx.transaction`.
   */
  completeInTransaction?<T>(ref: JobCompletion, work: (tx: unknown) => Promise<T>): Promise<T>;

  /** Records failed attempts: back to `timer` after the delay with one retry fewer, or deadletter. */
  fail(failures: readonly JobFailure[]): Promise<SettleResult>;

  /**
   * Optional (`capabilities.rateLimits`): takes starts from fixed windows kept in the store, one
   * per key, atomically across connections and processes: a window starts at the first take
   * after the previous one ended, and grants at most `max` starts in all. Results in input order.
   */
  takeRateTokens?(requests: readonly RateTokenRequest[]): Promise<RateTokenGrant[]>;

  /**
   * Optional (`capabilities.rateLimits`): gives held jobs back unstarted, due `delayMs` from the
   * store's now (`timer`, or `async` for 0), the attempt not counted — for jobs over a rate limit.
   */
  deferJobs?(jobs: readonly JobRef[], delayMs: number): Promise<SettleResult>;

  /** Gives jobs back unstarted: `async` again, lock cleared, the attempt not counted. */
  release(jobs: readonly JobRef[]): Promise<SettleResult>;

  /**
   * Extends the leases of `owner`'s jobs to `now + leaseMs`, in one statement where possible,
   * writing each ref's `progressJson` (when given, with `capabilities.progress`) in the same
   * statement, and answers which renewed jobs have a cancel request (`capabilities.cancellation`).
   */
  renewLeases(
    owner: string,
    leaseMs: number,
    jobs: readonly LeaseRenewalRef[],
  ): Promise<RenewResult>;

  /**
   * Optional (`capabilities.cancellation`): cancels job `id`. A job that is not running is
   * deleted at once, with a history record of outcome `cancelled` (while history keeps `all`
   * or `failed`); a running one is flagged `cancelRequested` for its owner. See `CancelOutcome`.
   */
  cancel?(id: string): Promise<CancelOutcome>;
  /**
   * Optional (`capabilities.cancellation`): deletes running jobs held with these tokens as
   * cancelled (history outcome `cancelled`, with `durationMs`), never to be retried. Fenced
   * like `complete`: a stale token changes nothing and is reported lost.
   */
  cancelHeld?(jobs: readonly JobCompletion[]): Promise<SettleResult>;

  /**
   * Finds running jobs whose lease expired: with retries left they become `async` with one retry
   * fewer and an error saying the lease expired; without, they go to the dead-letter area.
   */
  recoverExpiredLeases(limit: number): Promise<RecoverResult>;

  /**
   * Optional: the blocked set. Brings the given scopes (when absent, a sweep: the next few
   * hundred scopes with blocked or due waiting limited jobs, going on from where the last sweep
   * stopped, so each costs a bounded amount and every scope comes round in turn) in line with
   * the scope rule: due waiting limited jobs of a full scope beyond a short queue become
   * `blocked` (out of the acquisition walk, so a long queue behind one busy scope costs nothing
   * to jobs of other scopes), and the first blocked jobs in acquisition order come back
   * (`async`) as slots free up. A store that has it calls it itself after enqueuing limited
   * jobs, after settling refs that carry a `scope`, after admin changes, and — a sweep that
   * also lets in jobs a race left blocked — after `recoverExpiredLeases`, which engines call
   * every half lease. Returns how many came back.
   */
  rebalanceScopes?(scopes?: readonly string[]): Promise<number>;

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
  /**
   * Deletes a job in any state. False when it did not exist. A dead-letter job gets a history
   * record (outcome `deadletter`) in the same transaction while history keeps `all` or
   * `failed`; deleting a job in another state records nothing.
   */
  deleteJob(id: string): Promise<boolean>;
  /** Moves waiting (`timer`, `async`) jobs matching the filter to `suspended`. Returns how many. */
  suspend(filter: JobFilter): Promise<number>;
  /** Moves suspended jobs matching the filter back to the state they came from. */
  activate(filter: JobFilter): Promise<number>;
  /** Job counts by type and state. */
  stats(): Promise<StatsRow[]>;
  /**
   * Optional: how many jobs match the filter (bulk dry runs). With `cap`, counts at most `cap`
   * (a page header's "10,000+" without counting a million rows); a store may ignore `cap`.
   */
  countJobs?(filter: JobFilter, cap?: number): Promise<number>;
  /**
   * Optional bulk retry: moves at most `limit` dead-letter jobs matching the filter (its `state`
   * is ignored) to `async` with `retries` fresh retries, as `retryDeadletter` does; returns how
   * many. The engine calls it in batches until fewer than `limit` come back.
   */
  retryDeadletterMany?(filter: JobFilter, retries: number, limit: number): Promise<number>;
  /**
   * Optional bulk delete: deletes at most `limit` jobs matching the filter, as `deleteJob`
   * does (history records for dead-letter jobs included); returns how many.
   */
  deleteMany?(filter: JobFilter, limit: number): Promise<number>;

  // ---- history (optional: a store without it keeps no history) ----

  /**
   * Tells the store which finished jobs to keep (the engine calls it on construction; the
   * last call wins, so engines sharing a store should agree). Until called, a store keeps none.
   */
  configureHistory?(settings: HistorySettings): void;
  /** The history record of job `id`, or null. */
  getHistory?(id: string): Promise<JobHistoryRecord | null>;
  /** History records matching the filter, newest first (`finishedAt`, then id), keyset-paged. */
  listHistory?(request: ListHistoryRequest): Promise<JobHistoryRecord[]>;
  /**
   * Deletes at most `limit` records that finished more than `retentionMs` ago on the store's
   * clock, oldest first, in one short transaction; returns how many, or null when another
   * process is pruning right now (one node prunes at a time).
   */
  pruneHistory?(retentionMs: number, limit: number): Promise<number | null>;
  /**
   * Optional: types, other than `excludeTypes`, of waiting jobs (`timer`/`async`) due at or
   * before `dueBefore`, with their count and oldest due time, oldest first, at most `limit`.
   * The engine uses it to say when jobs wait that no handler it knows runs.
   */
  overdueTypes?(request: {
    excludeTypes: readonly string[];
    dueBefore: Date;
    limit: number;
  }): Promise<OverdueType[]>;

  /**
   * Optional: job counts by queue, type and state, each with how many are due and the earliest
   * due time, in any order. Operators' views (`jobs status`) and queue-depth metrics read it.
   * With `newest`, counts only the newest `newest` jobs (by id): a bounded read for tables too
   * big to group on every page view (a store may ignore it and count them all).
   */
  queueStats?(options?: { newest?: number }): Promise<QueueStatsRow[]>;
  /**
   * Optional: the number of live jobs as the database's statistics estimate it, without
   * counting (PostgreSQL `pg_class.reltuples`, MySQL/MariaDB `information_schema.TABLES`);
   * null when it has no estimate (never analysed, SQLite). Dashboards use it to decide between
   * exact and bounded counts.
   */
  estimateJobs?(): Promise<number | null>;

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
