import type { Clock } from '../clock.js';
import type {
  HistoryKeep,
  Job,
  JobError,
  JobStore,
  KeyMode,
  OverdueType,
  RetryPolicy,
} from '../store.js';

/** What a handler gets besides the job. */
export interface JobContext {
  /** Aborted when the lease is lost, or when `stop()` times out. Pass it to fetch, child processes… */
  signal: AbortSignal;
  /** 1 for the first attempt. */
  attempt: number;
  /** For jobs created by a schedule: the fire time of the occurrence. */
  occurrence: Date | null;
  /** For sharded schedules: this job's shard. */
  shard: { index: number; count: number } | null;
  /** The engine's logger. */
  log: Logger;
  /**
   * Runs `work` in a transaction of the store's database that also completes this job, and
   * commits only while this engine still holds the job's lease: the job's database effects
   * written through `tx` apply exactly once, even if the job runs twice (a lapsed lease, a
   * cut-off worker). `tx` is the transaction in the store's terms: a `pg` PoolClient
   * (@jobs/postgres), a mysql2 connection (@jobs/mysql), a better-sqlite3 Database
   * (@jobs/sqlite), an EntityManager (@jobs/typeorm). Rejects with `LockLostError` (and rolls
   * back) when the lease was lost. Once it resolved the job is done, whatever the handler does
   * next.
   *
   * @example
   * handlers: { charge: async (job, ctx) => {
   *   await ctx.transaction(async (client: PoolClient) => {
   *     await client.query('INSERT INTO charges (order_id) VALUES ($1)', [job.payload.orderId]);
   *   });
   * } }
   */
  transaction<T, Tx = unknown>(work: (tx: Tx) => T | Promise<T>): Promise<T>;
  /**
   * Reports how far the job is: any JSON value of at most 8 KiB (`MAX_PROGRESS_BYTES`), else a
   * `ValidationError` is thrown here. No round trip: the latest value is written with the next
   * lease renewal (every `leaseMs / 3`) and, if it changed since, before the job settles, so it
   * survives a restart and goes to history. Readable through `admin.getJob(id).progress`, the
   * `progress` event, `jobs show` and the dashboard. On a store without
   * `capabilities.progress` it is kept in this engine's memory only.
   *
   * @example
   * for (const [i, file] of files.entries()) {
   *   await upload(file);
   *   ctx.progress({ done: i + 1, total: files.length });
   * }
   */
  progress(value: unknown): void;
  /**
   * The remote said "back off": pushes this job's rate-limit window (its type's `rateLimit`
   * key) out by `delayMs`, so no engine starts a job of that key before then, and puts this job
   * back waiting for `delayMs` when the handler returns, without counting an attempt. Return
   * right after it. Needs a store with `capabilities.rateLimits`.
   *
   * @example
   * const res = await fetch(url, { signal: ctx.signal });
   * if (res.status === 429) return ctx.rateLimited(Number(res.headers.get('retry-after')) * 1000);
   */
  rateLimited(delayMs: number): Promise<void>;
}

/**
 * At most `max` starts of a type per `perMs` window, across every engine on the store; `key`
 * splits the limit by what it returns for a job (a tenant, an API host), each key its own window.
 */
export interface RateLimit {
  max: number;
  perMs: number;
  // biome-ignore lint/suspicious/noExplicitAny: handlers choose their payload type
  key?: (job: Job<any>) => string;
}

// biome-ignore lint/suspicious/noExplicitAny: handlers choose their payload type
export type JobHandler<P = any> = (job: Job<P>, ctx: JobContext) => unknown | Promise<unknown>;

/** A handler with per-type options. */
export interface HandlerDefinition<P = unknown> {
  handler: JobHandler<P>;
  /** Retry policy for this type (default: the engine's). */
  retry?: RetryPolicy | string;
  /** Default retries for jobs of this type enqueued without `retries`. */
  retries?: number;
  /**
   * Default scope limit of jobs of this type enqueued with a `scope` and neither `exclusive`
   * nor `scopeLimit`: at most this many of them (and of other limited jobs of the scope) run
   * at once. 1 to 1000.
   */
  scopeLimit?: number;
  /**
   * At most `max` starts per `perMs` ms (per `key(job)` when given), across all engines: jobs
   * over it wait, due when the window ends, without counting an attempt.
   *
   * @example
   * handlers: { report: { handler, rateLimit: { max: 10, perMs: 1000, key: (job) => job.tenantId ?? '-' } } }
   */
  rateLimit?: RateLimit;
}

export interface Logger {
  debug(message: string, data?: Record<string, unknown>): void;
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
  error(message: string, data?: Record<string, unknown>): void;
}

export interface EngineOptions {
  store: JobStore;
  /** Job type → handler. An engine without handlers is a client: it enqueues and administers. */
  // biome-ignore lint/suspicious/noExplicitAny: handlers choose their payload type
  handlers?: Record<string, JobHandler<any> | HandlerDefinition<any>>;
  /** Jobs running at once in this engine. Default 10. */
  concurrency?: number;
  /**
   * Jobs leased beyond `concurrency`, waiting in memory to start. Default: adaptive — it
   * starts at `concurrency`, doubles each time a full batch comes back (a backlog is waiting)
   * up to `maxPrefetch`, and halves when batches come back less than half full; and it never
   * holds more than start within half a second at the handlers' average run time
   * (`concurrency × 500 / averageMs`: 100 ms jobs at concurrency 10 prefetch at most 50), so
   * slow jobs stay in the database for idle nodes. A number fixes it. Prefetched jobs'
   * leases are renewed with the rest and released at once by `stop()`; a crash strands them
   * for one lease at most.
   */
  prefetch?: number;
  /**
   * Upper bound of the adaptive prefetch. Default: enough for batches of the store's
   * `capabilities.batchLimit` — 1,000 unless the store asks for more (MySQL/MariaDB: 2,000) —
   * that is `max(concurrency, batchLimit - concurrency)`.
   */
  maxPrefetch?: number;
  /** Lease length; renewed every `leaseMs / 3` while jobs are held. Default 30 000. */
  leaseMs?: number;
  /** Upper bound of the idle polling delay (fallback when no wake-up arrives). Default 5 000. */
  pollIntervalMs?: number;
  /** Only jobs of these queues (default: all). */
  queues?: string[];
  /** Only jobs of these tenants (default: all). */
  tenants?: string[];
  /** Default retry policy. Default: exponential from 1 s, factor 2, cap 10 min, jitter 0.2. */
  retry?: RetryPolicy | string;
  /** Default retries of a job. Default 3, like Flowable. */
  retries?: number;
  /** Largest payload accepted, in bytes of JSON. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Unique name of this engine instance (lock owner). Default: host-pid-random. */
  owner?: string;
  /** Clock used for timeouts and schedule arithmetic; default is kept in sync with the store. */
  clock?: Clock;
  /**
   * Which finished jobs the store keeps in its history table, and for how long. Default
   * `{ keep: 'all', retention: 'P7D' }`: every completed job (with its result, capped at
   * 64 KiB, and duration) and every job deleted from the dead-letter area, for a week.
   * `keep: 'failed'` keeps only jobs that did not complete (outcomes `deadletter` and
   * `cancelled`); `'none'` keeps nothing and costs the hot path nothing. `retention` is an
   * ISO-8601 duration from `PT1M` to `P3650D`; engines prune older records in batches of 1,000,
   * one process at a time. A store without history (`JobStore.configureHistory`) keeps none.
   */
  history?: HistoryOptions;
  logger?: Logger;
}

/** See `EngineOptions.history`. */
export interface HistoryOptions {
  /** Default `'all'`. */
  keep?: HistoryKeep;
  /** ISO-8601 duration, default `'P7D'`. */
  retention?: string;
}

export interface EnqueueJobOptions {
  /** Absolute due time. */
  runAt?: Date;
  /** Due after this many ms (from the store's now). */
  delayMs?: number;
  /** Failed attempts allowed before deadletter. Default: the type's or engine's (3). */
  retries?: number;
  /** Per-job retry policy (`'R5/PT10M'` also sets retries to 5). */
  retry?: RetryPolicy | string;
  /** Higher runs first. Default 0. */
  priority?: number;
  scope?: string;
  /** At most one exclusive job per scope runs at a time. Needs `scope`. Same as `scopeLimit: 1`. */
  exclusive?: boolean;
  /**
   * At most this many limited jobs of `scope` run at once, across all nodes (1 to 1000; needs
   * `scope`). Each waiting job checks the scope against its own limit.
   *
   * @example
   * await engine.enqueue('sync', { account: 'acct-1' }, { scope: 'acct-1', scopeLimit: 3 });
   */
  scopeLimit?: number;
  /** While an unfinished job holds this key, enqueue returns it instead of creating another. */
  key?: string;
  /**
   * What enqueuing a held `key` does: `keep` (default) returns the holder; `replace` gives a
   * waiting holder this payload and due time; `debounce` gives it this payload and pushes its
   * due time out (never in). A running holder is returned unchanged. Needs `key`.
   *
   * @example
   * await engine.enqueue('reindex', { doc }, { key: `reindex:${doc}`, keyMode: 'debounce', delayMs: 5_000 });
   */
  keyMode?: KeyMode;
  tenantId?: string;
  /** Default `'default'`. */
  queue?: string;
  /**
   * String headers stored with the job (`Job.meta`), e.g. a trace context: at most 16 entries,
   * keys of 1–255 characters, values of at most 1 024, no control characters.
   */
  meta?: Record<string, string>;
  /** The caller's open transaction (pg client, mysql2 connection, better-sqlite3 db, EntityManager). */
  tx?: unknown;
}

/** A validated job about to be written, as an `EngineHooks.enqueue` hook sees it. */
export interface EnqueueDraft {
  readonly type: string;
  readonly queue: string;
  /** The job's headers so far (the caller's `meta`, or empty). Add to it; it is checked again. */
  readonly meta: Record<string, string>;
}

/**
 * Hooks around an engine's work, for instrumentation such as `@jobs/otel`; added with
 * `engine.use(hooks)`. Each hook gets `next` and must call it once and return what it resolves
 * to; of several, the first added is the outermost.
 *
 * @example
 * engine.use({
 *   async run(job, next) {
 *     const started = performance.now();
 *     try { return await next(); } finally { timings.record(job.type, performance.now() - started); }
 *   },
 * });
 */
export interface EngineHooks {
  /**
   * Around each `enqueue` / `enqueueMany` call, after validation: may add headers to the drafts'
   * `meta` (a trace context) before calling `next()`, which writes the jobs in one store call
   * and resolves to them. Headers that break the `meta` limits reject the enqueue.
   */
  enqueue?(drafts: readonly EnqueueDraft[], next: () => Promise<Job[]>): Promise<Job[]>;
  /**
   * Around each handler run: `next()` runs the handler and settles as it does. Call it inside
   * the async context the hook sets up (an active span) so the handler's own work joins it.
   */
  run?(job: Job, next: () => Promise<unknown>): Promise<unknown>;
}

export interface EngineEvents {
  enqueued: { job: Job; created: boolean };
  acquired: { jobs: Job[] };
  'timer-fired': { job: Job };
  started: { job: Job };
  completed: { job: Job; durationMs: number };
  failed: { job: Job; error: JobError; willRetry: boolean; retryDelayMs: number };
  retried: { job: Job };
  deadlettered: { job: Job; error: JobError };
  'lease-lost': { job: Job };
  /** A handler reported progress (`ctx.progress`); it is written with the next renewal. */
  progress: { job: Job; progress: unknown };
  /**
   * A job an operator cancelled ended `cancelled` here (its handler stopped, or it had not
   * started); it is never retried. `durationMs` is null when it never ran.
   */
  cancelled: { job: Job; durationMs: number | null };
  released: { jobs: Job[] };
  'leases-recovered': { requeued: string[]; deadlettered: string[] };
  'schedule-fired': { schedule: string; occurrence: Date; status: string; jobs: Job[] };
  error: { error: unknown; during: string };
  /**
   * Jobs have been due for over a minute whose type this engine has no handler for (checked
   * every few minutes): if no other engine runs them, they wait for ever.
   */
  'unhandled-jobs': { types: OverdueType[] };
  /** History records past the retention were deleted (a pruning pass of this engine). */
  'history-pruned': { count: number };
}

export type EngineEventName = keyof EngineEvents;
