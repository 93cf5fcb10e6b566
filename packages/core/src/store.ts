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
 *   with `capabilities.blockedSet`).
 *   A finished job leaves the live table. A store may acquire a due `timer` job straight into
 *   `running`.
 * - **history**: finished jobs kept, when the engine asks for it (`history.configure`), in a
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
 * Where things live: the one map of the code is CONTRIBUTING.md's "Layout" (checked by
 * `pnpm check:docs`): the engine by concern under `engine/`, the pure rules every store shares
 * in `rules.ts`, the SQL stores' shared core under `sql/` (`@jobs/core/sql`).
 *
 * What a store must write, and what it may: `JobStore` below has three sections.
 * - **Required**: every store writes these (lifecycle, the hot path, admin, schedules).
 * - **Optional fast paths and hooks** (`completeAndAcquire`, `completeInTransaction`,
 *   `subscribe`, `reserveConnections`, `verifySchema`): flat optional methods; the engine uses
 *   each one when present and does the same work without it.
 * - **Optional abilities** (`cancellation`, `rateLimits`, `history`, `bulk`, `views`, `steps`,
 *   `waits`):
 *   each a named object of its own interface (`StoreCancellation`, …). A store has the whole
 *   ability or leaves the member out; its presence is the only flag. `StoreCapabilities` holds
 *   only behaviours of required members (`transactionalEnqueue`, `scopeLimits`, `progress`, …).
 *
 * How to add an ability: write an interface `Store<Name>` in this file with a doc line on every
 * member (all required inside it, except a transactional `…InTransaction` variant, which only
 * stores with transactions of their own can offer); add `readonly <name>?: Store<Name>` to
 * `JobStore` and the name to `StoreAbility`/`STORE_ABILITIES`; implement it in `MemoryJobStore`
 * (the reference) and in `SqlJobStore` as an object delegating to its methods; add a conformance
 * group that skips with a reason when `store.<name>` is absent. The engine and the admin API
 * read `store.<name>` and never probe single methods.
 */
import { JobsError } from './errors.js';
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
  /**
   * When the handler of the current lease started, on the store's clock: null while the job is
   * leased but not started (prefetched by its owner), and whenever it is not running. A lease
   * that lapses before its handler started costs no attempt (see `recoverExpiredLeases`).
   * Absent on stores without `capabilities.startMarks`.
   */
  startedAt?: Date | null;
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
   * Lines its handlers wrote with `ctx.log(message)`, oldest first, across its runs: at most
   * `MAX_LOG_LINES` (the oldest go first), each at most `MAX_LOG_LINE_CHARS`. Written with lease
   * renewals and before the job settles, kept in history. Absent on stores without
   * `capabilities.logs`.
   */
  logs?: JobLogLine[];
  /**
   * The durable steps its handlers completed (`ctx.step`), in the order they completed, across
   * its runs: a step named here never runs again for this job, its `result` is returned
   * instead. Written by `steps.save` under the lease's token, kept in history. Absent on stores
   * without the `steps` ability.
   */
  steps?: JobStep[];
  /**
   * This job's own time limit, in ms (`EnqueueJobOptions.timeoutMs`): a run that takes longer
   * is aborted and fails with a `JobTimeoutError`. Null: its type's limit, if any. Absent on
   * stores without `capabilities.timeLimits` (they keep no per-job limit).
   */
  timeoutMs?: number | null;
  /**
   * An operator asked to cancel this running job (`admin.cancel`); its owner learns it from its
   * next lease renewal. Absent on stores without the `cancellation` ability.
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
   * `debounce` gives it this payload and the later of the two due times. A *running* holder is
   * returned unchanged, and a `replace`/`debounce` change becomes its follow-up: one per key
   * (the latest change wins; `debounce` keeps the later due time), enqueued as a job of its own
   * once the holder has finished (completed or cancelled; the settle's store enqueues it, else
   * the next `recoverExpiredLeases`) — dropped when the holder waits again and takes a change
   * itself. A suspended or dead-letter holder is returned unchanged. Concurrent enqueuers queue
   * on the holder (the last one wins); a holder created by a transaction this one cannot see is
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
  /** The job's own time limit (`Job.timeoutMs`); absent or null for none. */
  timeoutMs?: number | null;
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
   * The job's scope when it is limited (exclusive or `scopeLimit`): a store with a blocked set
   * lets the next blocked job of that scope in once the settle freed a slot.
   * Absent for other jobs; a store without blocked sets ignores it.
   */
  scope?: string;
}

/** The store can cancel (it has the `cancellation` ability). */
export function canCancel(store: JobStore): boolean {
  return store.cancellation !== undefined;
}

/** The store's `cancellation` ability; throws a clear error when it has none. */
export function assertCanCancel(store: JobStore, where: string): StoreCancellation {
  if (store.cancellation === undefined) {
    throw new JobsError(
      'STORE',
      `[@jobs/core] ${where}: the ${store.name} store cannot cancel jobs (it has no \`cancellation\`)`,
    );
  }
  return store.cancellation;
}

/**
 * A finished job to complete: its claim, plus what history records of the run. Both extra
 * fields are optional, so a plain `JobRef` still completes a job (and a store without history
 * ignores them).
 */
export interface JobCompletion extends JobRef {
  /**
   * JSON text of what the handler returned, at most `HISTORY_RESULT_MAX_BYTES` (the engine
   * replaces larger or unstorable results with a marker, see `rules.ts`); null or absent for
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

/** What a store's history keeps, as the engine configured it (`JobStore.history.configure`). */
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
  /**
   * With `capabilities.startMarks`: how many of the leased jobs, the first in acquisition
   * order, start at once — those of them with retries left come back with `startedAt` set,
   * recorded in the same statement. The others are leased but not started (prefetched), and a
   * job without retries left is never recorded by the lease: the owner records each one's start
   * with a renewal (`LeaseRenewalRef.start`) before its handler starts, so a lease whose answer
   * arrives after it lapsed, or an owner that dies before the start, never dead-letters a job
   * that did not run. Absent: all of them start at once and all are recorded (`leaseStarts`).
   */
  start?: number;
  /**
   * With `start`: beyond the first `start` jobs, up to this many of the following ones are
   * recorded as started too — but only those with retries left (`retriesLeft > 0`). An owner
   * whose handlers finish faster than a round trip asks for it, so its slots never wait for a
   * renewal; a job without retries left is never recorded ahead of its start (a crash must not
   * dead-letter a job that never ran). Absent: 0.
   */
  startAhead?: number;
}

/** Starts asked of one rate-limit window (`JobStore.rateLimits.takeRateTokens`). */
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

/**
 * What a batch of writes by a holder did, and why a write was refused: every refused id is in
 * exactly one of the two lists; an id in neither was written.
 */
export interface SettleResult {
  /** Ids not held with that token (a stale token, a recovered lease, a malformed or gone id). */
  lost: string[];
  /**
   * Ids still held with that token but refused because an operator asked to cancel the job
   * (`complete` and `fail` leave such a job to its owner, who ends it with
   * `cancellation.cancelHeld`). Only on stores with `cancellation`; absent when there are none.
   */
  cancelRequested?: string[];
}

/**
 * A lease to renew, with the latest progress its handler reported (`ctx.progress`) as JSON text
 * when it changed since the last renewal: the store writes it in the renewing statement.
 */
export interface LeaseRenewalRef extends JobRef {
  /** JSON text of at most `MAX_PROGRESS_BYTES`; absent or null: progress unchanged. */
  progressJson?: string | null;
  /**
   * With `capabilities.logs`: the job's whole log (`Job.logs`) as JSON text of
   * `[{ at: epoch ms, message }]`, replacing the stored one; absent or null: unchanged.
   */
  logsJson?: string | null;
  /**
   * With `capabilities.startMarks`: `true` records that this job's handler starts now
   * (`startedAt`, unless already set) — the owner starts the handler only after the renewal
   * answered, so a crash before that costs the job no attempt; `false` takes back a start
   * recorded ahead of time (`startAhead`) whose handler did not start soon after all (the job is
   * leased and not started again); absent: unchanged.
   */
  start?: boolean;
}

/** What a renewal did: lost leases, and the renewed jobs an operator asked to cancel. */
export interface RenewResult {
  /** Ids not held with that token: their leases were not renewed. */
  lost: string[];
  /** Ids (renewed, not lost) with a cancel request; absent when there are none. */
  cancelRequested?: string[];
}

/** Largest progress value a store keeps, in bytes of JSON (UTF-8). */
export const MAX_PROGRESS_BYTES = 8 * 1024;

/** A line a handler wrote with `ctx.log` (`Job.logs`). */
export interface JobLogLine {
  /** When it was written (the engine's clock, kept in step with the store's). */
  at: Date;
  message: string;
}

/**
 * A completed durable step (`ctx.step`, `Job.steps`): its key (the name given, `name#2`,
 * `name#3`… for the same name again in one run), its result (JSON), when it completed (the
 * engine's clock) and how long its function ran.
 */
export interface JobStep {
  name: string;
  result: unknown;
  at: Date;
  durationMs: number;
}

/** Largest result one step keeps, in bytes of JSON (UTF-8); a larger one is refused. */
export const MAX_STEP_RESULT_BYTES = 64 * 1024;
/** Largest step list one job keeps (`Job.steps` as JSON, UTF-8 bytes); a step beyond it is refused. */
export const MAX_STEPS_BYTES = 1024 * 1024;

/** Lines a job's log keeps (`Job.logs`): the newest; older ones are dropped. */
export const MAX_LOG_LINES = 100;
/** Characters a log line keeps; a longer one is cut, ending in `…`. */
export const MAX_LOG_LINE_CHARS = 1_000;

/**
 * What `JobStore.cancel` did: `cancelled` (a waiting, suspended or dead-letter job was deleted,
 * with a history record of outcome `cancelled`), `requested` (a running job was flagged; its
 * owner ends it at its next renewal), `finished` (no live job, but history has it: it already
 * ended), `not-found` (no live job and no history record).
 */
export type CancelOutcome = 'cancelled' | 'requested' | 'finished' | 'not-found';

export interface RecoverResult {
  /** Jobs whose lease expired after their handler started, made acquirable again (an attempt counted). */
  requeued: string[];
  /**
   * Jobs whose lease expired after their handler started, with no retries left, moved to the
   * dead-letter area.
   */
  deadlettered: string[];
  /**
   * Jobs whose lease expired before their handler started (prefetched by an owner that died or
   * stalled): acquirable again, no attempt counted (`capabilities.startMarks`). Absent: none.
   */
  released?: string[];
  /**
   * Jobs with a cancel request whose lease expired (their owner died before it ended them):
   * deleted as cancelled, with a history record of outcome `cancelled`. Absent: none.
   */
  cancelled?: string[];
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
   * `listJobs`/`bulk.countJobs` callers that check the result use it; bulk writes never take it.
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

/** Jobs of one queue, type and state, for operators and queue-depth metrics (`JobStore.views.queueStats`). */
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

/** Due waiting jobs of one type, for "nobody runs these" warnings (`JobStore.views.overdueTypes`). */
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
  /**
   * The latest occurrence fired: the store fires only when it is due on the store's clock
   * (`dueAt <= now`), checked with `version`; before then nothing changes and the answer is
   * `conflict`. So a runner whose clock runs ahead never fires early. Absent: not checked.
   */
  dueAt?: Date;
}

export type ScheduleFireStatus = 'fired' | 'skipped' | 'coalesced' | 'conflict';

/** A store's answer to `reserveConnections`. */
export interface ConnectionReservation {
  /** Connections its pool opens at most, after growing to fit where it could; null: unknown. */
  poolSize: number | null;
  /** Connections needed at once: every reservation held plus the store's own calls on the pool. */
  needed: number;
  /** What sets the pool's size, for messages: `max`, `connectionLimit`, the DataSource's `poolSize`. */
  sizeOption: string;
  /** Gives the reservation back (the engine stopped); a grown default pool fits the rest. */
  release(): void;
}

export interface ScheduleFireResult {
  status: ScheduleFireStatus;
  jobs: Job[];
}

/**
 * Behaviours that differ between stores: each flag says how a required member behaves, never
 * whether a member exists (an ability's presence says that, see `JobStore`). The engine and the
 * conformance suite read these.
 */
export interface StoreCapabilities {
  /**
   * `subscribe` delivers wake-ups when another connection or process enqueues. A flag beside
   * the method because it depends on how the store was opened (PostgreSQL behind a
   * transaction pooler without a listen URL hears nothing), not only on the store's class.
   */
  notifications: boolean;
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
  /**
   * Due waiting limited jobs of a full scope beyond a short queue are kept in state `blocked`,
   * out of the acquisition walk, and let back in, in acquisition order, as settles free their
   * scope's slots (the SQL stores). Absent or false: no job is ever `blocked`.
   */
  blockedSet?: boolean;
  /**
   * `renewLeases` writes `progressJson`, and jobs (and history records) carry `progress`.
   * Absent or false: `ctx.progress` keeps the value in the engine's memory only.
   */
  progress?: boolean;
  /**
   * `renewLeases` writes `logsJson`, and jobs and history records carry `logs`. Absent or false:
   * `ctx.log` lines reach only the engine's logger.
   */
  logs?: boolean;
  /**
   * Jobs keep their own time limit (`NewJob.timeoutMs`, `Job.timeoutMs`). Absent or false: only
   * per-type limits apply, and `enqueue` refuses a per-job one.
   */
  timeLimits?: boolean;
  /**
   * The store knows a job *acquired* from one *executing* (seed 000's lesson, DESIGN invariant
   * 4): `AcquireRequest.start`/`startAhead` and `LeaseRenewalRef.start` record when a handler
   * starts (`Job.startedAt`), and `recoverExpiredLeases` gives a job whose handler never
   * started back without counting an attempt. Absent or false: every acquired job counts as
   * started, and a crash charges prefetched jobs an attempt.
   */
  startMarks?: boolean;
  /**
   * The batch an engine's default adaptive prefetch grows to on this store
   * (`concurrency + maxPrefetch`, see `EngineOptions.maxPrefetch`). Absent: 1,000. A store whose
   * acquisitions cost much per call and little per job asks for more (MySQL/MariaDB: 2,000).
   */
  batchLimit?: number;
  /**
   * An engine's default `pollIntervalMs` on this store while it has `notifications`. Absent:
   * 5,000. A store whose `subscribe` also tells of jobs that became due by other paths (in a
   * caller's transaction, released, retried) within a bounded time asks for more, since the
   * engine's poll is then only the fallback of a fallback (MySQL/MariaDB, which reads whether
   * a job is due before each wait on the server: 30,000).
   */
  pollIntervalMs?: number;
}

/**
 * Ability `cancellation` (`admin.cancel`, `ctx.signal` on a cancel request). A store that has it
 * also flags cancel requests in `Job.cancelRequested`, answers them from `renewLeases`
 * (`RenewResult.cancelRequested`), and refuses `complete`/`fail`/`release`/`deferJobs` of a
 * cancel-requested job with `SettleResult.cancelRequested`, so its owner cancels it instead.
 */
export interface StoreCancellation {
  /**
   * Cancels job `id`. A job that is not running is deleted at once, with a history record of
   * outcome `cancelled` (while history keeps `all` or `failed`); a running one is flagged
   * `cancelRequested` for its owner. See `CancelOutcome`.
   */
  cancel(id: string): Promise<CancelOutcome>;
  /**
   * Deletes running jobs held with these tokens as cancelled (history outcome `cancelled`, with
   * `durationMs`), never to be retried. Fenced like `complete`: a stale token changes nothing
   * and is reported lost.
   */
  cancelHeld(jobs: readonly JobCompletion[]): Promise<SettleResult>;
}

/** Ability `rateLimits`: rate-limit windows kept in the store (`EngineOptions.rateLimits`). */
export interface StoreRateLimits {
  /**
   * Takes starts from fixed windows kept in the store, one per key, atomically across
   * connections and processes: a window starts at the first take after the previous one ended,
   * and grants at most `max` starts in all. Results in input order.
   */
  takeRateTokens(requests: readonly RateTokenRequest[]): Promise<RateTokenGrant[]>;
  /**
   * Gives held jobs back unstarted, due `delayMs` from the store's now (`timer`, or `async` for
   * 0), the attempt not counted — for jobs over a rate limit. Fenced like `release`.
   */
  deferJobs(jobs: readonly JobRef[], delayMs: number): Promise<SettleResult>;
}

/**
 * Ability `history`: finished jobs kept in a table of their own (see the glossary). A store
 * without it keeps no history, and `admin.getHistory`/`listHistory` say so.
 */
export interface StoreHistory {
  /**
   * Tells the store which finished jobs to keep (the engine calls it on construction; the
   * last call wins, so engines sharing a store should agree). Until called, a store keeps none.
   */
  configure(settings: HistorySettings): void;
  /** The history record of job `id`, or null. */
  get(id: string): Promise<JobHistoryRecord | null>;
  /** History records matching the filter, newest first (`finishedAt`, then id), keyset-paged. */
  list(request: ListHistoryRequest): Promise<JobHistoryRecord[]>;
  /**
   * Gives the `completed` history record of job `id` — written by `completeInTransaction`
   * while its handler still ran — what the handler finally returned (`resultJson`, as
   * `JobCompletion.resultJson`) and how long it ran. False when there is no such record (history
   * keeps no completed jobs, or it was pruned). Called only after `completeInTransaction`: a
   * store without that fast path may answer false.
   */
  amend(id: string, resultJson: string | null, durationMs: number): Promise<boolean>;
  /**
   * Deletes at most `limit` records that finished more than `retentionMs` ago on the store's
   * clock, oldest first, in one short transaction; returns how many, or null when another
   * process is pruning right now (one node prunes at a time).
   */
  prune(retentionMs: number, limit: number): Promise<number | null>;
  /**
   * Set when the store keeps history in partitions this many ms wide (PostgreSQL: a day) and
   * `prune` drops a partition whole once every record in it is past the retention. The engine
   * then prunes up to a partition boundary (a record is kept for the retention plus up to one
   * partition), so records leave a partition at a time instead of row by row.
   */
  partitionMs?: number;
}

/**
 * Ability `bulk`: operator actions over a filter (the admin API's `retryDeadletterMany`,
 * `deleteMany`, dry-run counts). Without it the admin API pages through `listJobs` instead.
 */
export interface StoreBulk {
  /**
   * How many jobs match the filter (bulk dry runs). With `cap`, counts at most `cap` (a page
   * header's "10,000+" without counting a million rows); a store may ignore `cap`.
   */
  countJobs(filter: JobFilter, cap?: number): Promise<number>;
  /**
   * Moves at most `limit` dead-letter jobs matching the filter (its `state` is ignored) to
   * `async` with `retries` fresh retries, as `retryDeadletter` does; returns how many. The
   * engine calls it in batches until fewer than `limit` come back.
   */
  retryDeadletterMany(filter: JobFilter, retries: number, limit: number): Promise<number>;
  /**
   * Deletes at most `limit` jobs matching the filter, as `deleteJob` does (history records for
   * dead-letter jobs included); returns how many. Matching *running* jobs are not deleted and
   * not counted: each gets a cancel request (as `cancel` gives it), so a caller that repeats
   * the call until fewer than `limit` come back never loops on them.
   */
  deleteMany(filter: JobFilter, limit: number): Promise<number>;
}

/**
 * Ability `views`: bounded reads for operators and metrics (`jobsctl status`, the dashboard,
 * `@jobs/otel`, the engine's "nobody runs these" warning).
 */
export interface StoreViews {
  /**
   * Types, other than `excludeTypes`, of waiting jobs (`timer`/`async`) due at or before
   * `dueBefore`, with their count and oldest due time, oldest first, at most `limit`. A store
   * may count only among the oldest due waiting jobs (the SQL stores: 10,000), so the check
   * costs the same whatever the backlog.
   */
  overdueTypes(request: {
    excludeTypes: readonly string[];
    dueBefore: Date;
    limit: number;
  }): Promise<OverdueType[]>;
  /**
   * Job counts by queue, type and state, each with how many are due and the earliest due time,
   * in any order. With `newest`, counts only the newest `newest` jobs (by id): a bounded read
   * for tables too big to group on every page view (a store may ignore it and count them all).
   */
  queueStats(options?: { newest?: number }): Promise<QueueStatsRow[]>;
  /**
   * The number of live jobs as the database's statistics estimate it, without counting
   * (PostgreSQL `pg_class.reltuples`, MySQL/MariaDB `information_schema.TABLES`); null when it
   * has no estimate (never analysed, SQLite, memory). Dashboards use it to decide between exact
   * and bounded counts.
   */
  estimateJobs(): Promise<number | null>;
}

/** One job's checkpoint for `StoreSteps.saveMany`: its ref and its step list as JSON text. */
export interface StepSave {
  readonly ref: JobRef;
  readonly stepsJson: string;
}

/**
 * Ability `steps`: durable steps (`ctx.step`); jobs (and history records) carry `Job.steps`.
 * Without it `ctx.step` throws.
 */
export interface StoreSteps {
  /**
   * Writes the step list of the job held with `ref`'s token (`stepsJson`: `Job.steps` as JSON
   * text, `[{ name, result, at: epoch ms, durationMs }]`), replacing the one stored, only while
   * that lease is current (the token matches and the job is running). False, and nothing
   * written, when it is not: a stale owner's checkpoint is never recorded. In the caller's
   * transaction when `tx` is given.
   */
  save(ref: JobRef, stepsJson: string, tx?: unknown): Promise<boolean>;
  /**
   * Optional: several jobs' checkpoints in one write (at most one per job, at most 1,000),
   * each exactly as `save` writes it — fenced by its own ref's token, refused alone when that
   * lease is not current. Answers the ids whose checkpoint was refused (nothing written for
   * them). With it, an engine writes the checkpoints its runs reach while a write is under way
   * together, in the next write: fewer round trips per step at any concurrency, none added to
   * a step alone.
   */
  saveMany?(saves: readonly StepSave[]): Promise<string[]>;
  /**
   * Optional, like `completeInTransaction` (only a store with transactions of its own can):
   * runs `work` in a transaction of the store's database and, in the same transaction, writes
   * `stepsJsonOf(result)` as `save` does; commits only while `ref`'s lease is current, else
   * rolls back and rejects with `LockLostError`. Backs `ctx.step(…, { transaction: true })`: a
   * step's database effects and its checkpoint apply together, exactly once.
   */
  saveInTransaction?<T>(
    ref: JobRef,
    work: (tx: unknown) => Promise<T>,
    stepsJsonOf: (result: T) => string,
  ): Promise<T>;
}

/**
 * Ability `waits`: durable waits that free the worker (`ctx.sleep`, `ctx.waitFor`,
 * `engine.signal`, DESIGN invariant 23; child jobs, `ctx.run`, wait and are woken through its
 * signals too). A waiting job holds no slot, lease, connection or scope slot: it is back in the
 * store as a `timer`. Needs `steps` too (the wait's checkpoint is a step). Without it
 * `ctx.sleep`, `ctx.waitFor` and `ctx.run` throw.
 */
export interface StoreWaits {
  /**
   * Gives the job held with `ref`'s token back to waiting, with its step list: state `timer`
   * due `delayMs` from now on the store's clock (`async` when `delayMs` is 0), `stepsJson`
   * written as `StoreSteps.save` writes it, lock cleared and the attempt not counted (as
   * `release` does), in one write fenced by the token: only while that lease is current (the
   * token matches, the job is running and has no cancel request). False, and nothing written,
   * when it is not.
   */
  sleep(ref: JobRef, stepsJson: string, delayMs: number): Promise<boolean>;
  /**
   * Stores a signal for (`name`, `key`) with its payload (JSON text), kept until one waiting
   * job takes it (`takeSignal`) or it expires (`pruneSignals`), and then makes the jobs waiting
   * for it (`waitSignal`) due at once. Each signal is taken by exactly one job, once.
   */
  signal(name: string, key: string, payloadJson: string): Promise<void>;
  /**
   * Deletes at most `limit` stored signals nobody took that were sent more than `retentionMs`
   * ago on the store's clock, oldest first; answers how many. Never touches a job's record
   * of what it waits for (`waitSignal`).
   */
  pruneSignals(retentionMs: number, limit: number): Promise<number>;
  /**
   * For the job held with `ref`'s token: takes (deletes) the oldest stored signal for (`name`,
   * `key`) and, in the same transaction, writes `stepsJsonOf(payloadJson)` as the job's step
   * list, fenced by the token as `StoreSteps.save` is, and forgets the job's waits; answers the
   * payload. With no signal stored it answers null, and writes `stepsJsonOf(null)` the same way
   * when that is a string (a wait that timed out), nothing when it is null. When the fence
   * refuses the write it rejects with `LockLostError` and takes nothing: the signal stays.
   * `stepsJsonOf` answers a string for every payload (null only for no signal).
   */
  takeSignal(
    ref: JobRef,
    name: string,
    key: string,
    stepsJsonOf: (payloadJson: string | null) => string | null,
  ): Promise<string | null>;
  /**
   * `sleep` (until the wait's timeout), and records the job as waiting for (`name`, `key`), so
   * that a signal for it makes the job due at once; when such a signal is already stored
   * (sent meanwhile), the job is due at once. False, and nothing written, when the lease is
   * not current.
   */
  waitSignal(
    ref: JobRef,
    name: string,
    key: string,
    stepsJson: string,
    timeoutMs: number,
  ): Promise<boolean>;
}

/** The names of a store's optional abilities (`JobStore.cancellation`, …). */
export type StoreAbility =
  | 'cancellation'
  | 'rateLimits'
  | 'history'
  | 'bulk'
  | 'views'
  | 'steps'
  | 'waits';

export const STORE_ABILITIES: readonly StoreAbility[] = [
  'cancellation',
  'rateLimits',
  'history',
  'bulk',
  'views',
  'steps',
  'waits',
] as const;

export interface EnqueueOptions {
  /** The caller's open transaction, in the store's own terms (see the store's docs). */
  tx?: unknown;
}

/** What a store's `migrate()` did: the versions it applied (none when it was up to date). */
export interface MigrationResult {
  /** Versions this call applied, in order; empty when the schema was already up to date. */
  applied: number[];
  /** The schema's version now: the newest migration the store knows. */
  version: number;
}

export interface JobStore {
  // ---- required: every store writes these ----

  /** Short name for messages, e.g. `sqlite`. */
  readonly name: string;
  /** What this store can do (`StoreCapabilities`); engines, the admin API and the suite read it. */
  readonly capabilities: StoreCapabilities;

  /**
   * Creates or upgrades the schema. Idempotent; safe when several processes call it at once.
   * A store with numbered migrations says which it applied (the SQL stores do).
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a store of your own may still resolve with nothing
  migrate(): Promise<MigrationResult | void>;
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
   * Deletes finished jobs held with these tokens; one with a cancel request (with
   * `cancellation`) is left alone and reported in `cancelRequested`. With history keeping completed jobs
   * (`history.configure`, keep `all`), each one's record (outcome `completed`, its
   * `resultJson` and `durationMs`) is written in the same statement or transaction; a job
   * whose lease was lost gets no record.
   */
  complete(jobs: readonly JobCompletion[]): Promise<SettleResult>;

  /**
   * Records failed attempts: back to `timer` after the delay with one retry fewer, or deadletter.
   * A job with a cancel request (with `cancellation`) is left alone, reported in `cancelRequested`.
   */
  fail(failures: readonly JobFailure[]): Promise<SettleResult>;

  /** Gives jobs back unstarted: `async` again, lock cleared, the attempt not counted. */
  release(jobs: readonly JobRef[]): Promise<SettleResult>;

  /**
   * Extends the leases of `owner`'s jobs to `now + leaseMs`, in one statement where possible,
   * writing each ref's `progressJson` (when given, with `capabilities.progress`) in the same
   * statement, and answers which renewed jobs have a cancel request (with `cancellation`).
   */
  renewLeases(
    owner: string,
    leaseMs: number,
    jobs: readonly LeaseRenewalRef[],
  ): Promise<RenewResult>;

  /**
   * Finds running jobs whose lease expired, at most `limit`, and ends each lease:
   * - one with a cancel request (with `cancellation`) is deleted as `cancelled`;
   * - one whose handler never started (`startedAt` null, `capabilities.startMarks`) becomes
   *   `async` again with its attempt given back, retries and last error untouched (`released`);
   * - any other one, with retries left, becomes `async` with one retry fewer and an error saying
   *   the lease expired (`requeued`); without, it goes to the dead-letter area.
   * A job that keeps killing its worker is recorded as started each time, so it still reaches
   * the dead-letter area after its retries.
   */
  recoverExpiredLeases(limit: number): Promise<RecoverResult>;

  /** The earliest due time of a waiting job the request could acquire, or null. */
  nextDueAt(request: Omit<AcquireRequest, 'owner' | 'limit' | 'leaseMs'>): Promise<Date | null>;

  // ---- admin ----

  /** The job with this id in any state (running included); null when there is none. */
  getJob(id: string): Promise<Job | null>;
  /** Jobs matching the filter, in id order, paged. */
  listJobs(request: ListJobsRequest): Promise<Job[]>;
  /** Moves a dead-letter job to `async` with `retries` fresh retries; null if not in deadletter. */
  retryDeadletter(id: string, retries: number): Promise<Job | null>;
  /**
   * Deletes a job that is not running. False when it did not exist. A dead-letter job gets a
   * history record (outcome `deadletter`) in the same transaction while history keeps `all` or
   * `failed`; deleting a job in another state records nothing. A *running* job is not deleted
   * (its handler may still run, and a limited job's slot must stay taken until its owner lets
   * go): it gets a cancel request, as `cancel` gives it, and true is returned; a store without
   * the `cancellation` ability refuses it with an error.
   */
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
  /** The schedule of this exact name; null when there is none. */
  getSchedule(name: string): Promise<ScheduleRecord | null>;
  /** Every schedule, paused ones included, ordered by name. */
  listSchedules(): Promise<ScheduleRecord[]>;
  /** Deletes the schedule (its jobs stay). False when it did not exist. */
  deleteSchedule(name: string): Promise<boolean>;
  /**
   * Pauses (it is not fired while paused) or resumes a schedule, bumping its version; the
   * updated record, or null when there is no schedule of that name.
   */
  setSchedulePaused(name: string, paused: boolean): Promise<ScheduleRecord | null>;
  /** Unpaused schedules with `nextAt <= now`, or with a pending misfire. */
  dueSchedules(limit: number): Promise<ScheduleRecord[]>;
  /**
   * In one transaction: if the schedule's version still matches, applies the overlap rule
   * (an unfinished job — timer, async or running — of this schedule makes `skip` drop the fire
   * and `coalesce` set `pendingMisfire`), inserts the jobs otherwise (clearing `pendingMisfire`),
   * and moves the schedule to `nextAt` with a new version. A stale version, or a `dueAt` still
   * ahead of the store's clock, changes nothing.
   */
  fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult>;

  // ---- optional fast paths and hooks: the engine uses each one when present ----

  /**
   * Throws a `JobsError` (code `SCHEMA`) that says to run `migrate()` (naming the
   * command) when the store's schema is missing or older than this package needs. Engines call
   * it at `start()`, so a forgotten migration fails at once instead of logging "relation does
   * not exist" on every poll.
   */
  verifySchema?(): Promise<void>;

  /**
   * Fast path: `complete(done)` and `acquire(request)` in one round trip (a PostgreSQL CTE
   * can), history records included. The engine uses it when present, unless the store runs
   * calls concurrently (`capabilities.concurrentCalls`).
   */
  completeAndAcquire?(
    done: readonly JobCompletion[],
    request: AcquireRequest,
  ): Promise<SettleResult & { jobs: Job[] }>;

  /**
   * Fast path: runs `work` in a transaction of the store's database and, in the same
   * transaction, completes the job held with `ref`'s token; commits only while that lease is
   * still current, else rolls back and rejects with `LockLostError`. So a job's database
   * effects written through `tx` apply exactly once, even when its handler runs twice. `tx`
   * is the transaction in the store's own terms (see the store's docs). Backs `ctx.transaction`.
   */
  completeInTransaction?<T>(ref: JobCompletion, work: (tx: unknown) => Promise<T>): Promise<T>;

  /**
   * Calls `listener` when jobs may have been enqueued elsewhere (other connections or processes).
   * Returns an unsubscribe function. The engine subscribes only when
   * `capabilities.notifications` is true; without either it polls.
   */
  subscribe?(listener: () => void): () => void;

  /**
   * For stores on a connection pool: an engine about to run says how many store calls
   * it may make at once (its handlers' `ctx.transaction`s plus its own). A pool of the store's
   * default size grows to fit every reservation held; a size the caller chose (or the caller's
   * pool) is kept, and the engine warns when it is smaller than `needed`.
   */
  reserveConnections?(connections: number): ConnectionReservation;

  // ---- optional abilities: present (an object) or absent, never half there ----

  /** Cancelling jobs; see `StoreCancellation`. Absent: `admin.cancel` says the store cannot. */
  readonly cancellation?: StoreCancellation;
  /** Rate-limit windows in the store; see `StoreRateLimits`. Absent: no `rateLimits` option. */
  readonly rateLimits?: StoreRateLimits;
  /** Finished jobs kept; see `StoreHistory`. Absent: no history. */
  readonly history?: StoreHistory;
  /** Operator actions over a filter; see `StoreBulk`. Absent: the admin API pages `listJobs`. */
  readonly bulk?: StoreBulk;
  /** Bounded operator reads; see `StoreViews`. Absent: `jobsctl status`, metrics fall back to `stats`. */
  readonly views?: StoreViews;
  /** Durable steps; see `StoreSteps`. Absent: `ctx.step` throws. */
  readonly steps?: StoreSteps;
  /** Durable waits (`ctx.sleep`); see `StoreWaits`. Absent: `ctx.sleep` throws. */
  readonly waits?: StoreWaits;
}
