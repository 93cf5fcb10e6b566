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
  /**
   * The job's log: `ctx.log('uploaded 3 files')` writes a line kept with the job (`job.logs`,
   * the newest 100, each at most 1,000 characters; written with the next lease renewal and
   * before the job settles, kept in history, shown by `jobsctl show` and the dashboard) and passes
   * it to the engine's logger. `ctx.log.info`/`warn`/`error` do the same at their level;
   * `ctx.log.debug` goes to the engine's logger only.
   *
   * @example
   * ctx.log(`fetched ${rows.length} rows`);
   */
  log: JobLog;
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
   * A durable step: runs `fn` once per job — across retries, crashes and takeovers — and
   * returns its result, stored as JSON (`Job.steps`, at most `MAX_STEP_RESULT_BYTES` = 64 KiB
   * each, checked like payloads); a later run of the job gets the stored result back without
   * running `fn`. Steps are keyed by name, not replayed: the code between steps runs again. The
   * same name again in one run gets a counter (`name`, `name#2`, `name#3`…; `#` is not allowed in
   * a name). A step that throws fails the attempt as any error does, and is not recorded.
   *
   * The checkpoint is written only under this run's lease: when the lease is gone it is refused
   * and the step rejects with `LockLostError`. A step never starts after the lease's local
   * deadline. A plain step is at least once: when the process dies after `fn` and before its
   * checkpoint, `fn` runs again. With `{ transaction: true }`, `fn(tx)` gets the store's
   * transaction (as `ctx.transaction` gives it) and its writes commit with the checkpoint, only
   * while this lease is current, else roll back (`LockLostError`): exactly once. Needs a store
   * with `capabilities.steps` (and transactions for `transaction: true`).
   *
   * @example
   * const charge = await ctx.step('charge', () => pay(job.payload));
   * await ctx.step('reserve', async (tx: PoolClient) => reserve(tx, charge), { transaction: true });
   */
  step<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
  step<T, Tx = unknown>(
    name: string,
    fn: (tx: Tx) => T | Promise<T>,
    options: { transaction?: boolean },
  ): Promise<T>;
  /**
   * A durable sleep that frees the worker: `duration` is ms, an ISO-8601 duration (`'PT1H'`)
   * or a `Date` to wake at. The first time, the wake time is checkpointed with the job's steps
   * (under this run's lease, like a step) and the job goes back to waiting — state `timer`, due
   * at the wake time — without counting an attempt and holding no slot, lease, connection or
   * scope slot; this run ends here (the returned promise never resolves in this run: the handler
   * is interrupted by an engine-internal error it should not catch). The job runs again after
   * the wake time, possibly on another engine: completed steps return their stored results and
   * this `ctx.sleep` returns at once. Sleeps and steps share names (and counters). Needs a store
   * with `waits`.
   *
   * @example
   * await ctx.step('charge', () => pay(job.payload));
   * await ctx.sleep('cool-off', 'PT1H');
   * await ctx.step('follow-up', () => mail(job.payload));
   */
  sleep(name: string, duration: number | string | Date): Promise<void>;
  /**
   * Waits for a signal (`engine.signal(name, { key, payload })`, from any process) without
   * holding the worker, and returns its payload, or null after `timeoutMs` (by default about
   * 100 years) without one. A signal sent before the wait is found by it. Each signal is taken
   * by exactly one waiting job, once: it is deleted in the same transaction that checkpoints
   * its payload as this wait's step result, fenced by the lease. With no signal stored the job
   * goes back to waiting — a `timer` due at the timeout, made due at once by a signal — and this
   * run ends here, as with `ctx.sleep`; the next run returns the payload (or null). Waits share
   * names and counters with steps and sleeps. Needs a store with `waits`.
   *
   * @example
   * const approval = await ctx.waitFor<{ ok: boolean }>('approval', { key: job.payload.id, timeoutMs: 86_400_000 });
   * if (approval === null) return 'timed out';
   */
  waitFor<T = unknown>(
    name: string,
    options: { key: string; timeoutMs?: number },
  ): Promise<T | null>;
  /**
   * Reports how far the job is: any JSON value of at most 8 KiB (`MAX_PROGRESS_BYTES`), else a
   * `ValidationError` is thrown here. No round trip: the latest value is written with the next
   * lease renewal (every `leaseMs / 3`) and, if it changed since, before the job settles, so it
   * survives a restart and goes to history. Readable through `admin.getJob(id).progress`, the
   * `progress` event, `jobsctl show` and the dashboard. On a store without
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
  /**
   * A child job: enqueues a job of `type` with `payload` (and its own `options`, as `enqueue`
   * takes them, without `tx`, `key` or `keyMode`) and waits for it without holding the worker,
   * then returns the child's result. Memoised by name like a step: across retries, crashes and
   * takeovers the child is enqueued once (with the checkpoint naming it, in one transaction on
   * stores with transactional steps) and its result is returned from the checkpoint afterwards.
   * Calls made together (`Promise.all`, with steps too) enqueue their children together and park
   * the parent once; the last child to end wakes it (or, should that wake-up be lost, it looks
   * again after `childRecheckMs`). A child that ends dead-lettered or cancelled makes this throw
   * `ChildJobError`. Cancelling the parent cancels its unfinished children. Children, steps,
   * sleeps and waits share names and counters. Needs a store with `steps` and `waits`; do not
   * call it inside a step's function.
   *
   * @example
   * const [label, invoice] = await Promise.all([
   *   ctx.run('label', 'make-label', { id: job.payload.id }),
   *   ctx.run('invoice', 'make-invoice', { id: job.payload.id }, { queue: 'billing' }),
   * ]);
   */
  run<T = unknown>(
    name: string,
    type: string,
    payload?: unknown,
    options?: Omit<EnqueueJobOptions, 'tx' | 'key' | 'keyMode'>,
  ): Promise<T>;
  /**
   * For a node of a flow (`engine.flow`, `engine.batch`): the flow's id, this node's name and
   * its parents' results by name; with `after: 'finished'` (a batch's callback) also how its
   * parents ended (`ended`). Null for a job that is not a flow node.
   *
   * @example
   * handlers: { ship: async (job, ctx) => ship((ctx.flow?.parents.pack as { box: string }).box) }
   */
  readonly flow: FlowContext | null;
}

/** `ctx.flow` of a flow node's handler. */
export interface FlowContext {
  /** The flow's id (its flow job's id). */
  id: string;
  /** This node's name. */
  node: string;
  /** The results of this node's completed parents, by name. */
  parents: Record<string, unknown>;
  /** With `after: 'finished'`: how its parents ended; else null. */
  ended: FlowTally | null;
}

/** How the parents of a node with `after: 'finished'` ended (a batch callback's counts). */
export interface FlowTally {
  completed: number;
  deadlettered: number;
  cancelled: number;
  /** Parents never started because one of theirs did not complete. */
  skipped: number;
  /** Every parent that did not complete: its node, job id (null when skipped), outcome, error. */
  failures: Array<{
    node: string;
    id: string | null;
    outcome: 'deadletter' | 'cancelled' | 'skipped';
    error: JobError | null;
  }>;
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

/**
 * A job handler: runs one job; what it returns is the job's result (history, `engine.result`).
 */
// biome-ignore lint/suspicious/noExplicitAny: handlers choose their payload type
export type JobHandler<P = any, R = unknown> = (job: Job<P>, ctx: JobContext) => R | Promise<R>;

/** A handler with per-type options. */
export interface HandlerDefinition<P = unknown, R = unknown> {
  handler: JobHandler<P, R>;
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
   * Time limit of a run of this type, in ms (1 ms to a week; a job's own `timeoutMs` wins): a
   * run that takes longer gets its `ctx.signal` aborted with a `JobTimeoutError`, and the
   * attempt fails with it when the handler returns (retried as any failure). A handler that
   * ignores its signal keeps its slot until it returns — a second run never starts beside it.
   */
  timeoutMs?: number;
  /**
   * At most `max` starts per `perMs` ms (per `key(job)` when given), across all engines: jobs
   * over it wait, due when the window ends, without counting an attempt.
   *
   * @example
   * handlers: { report: { handler, rateLimit: { max: 10, perMs: 1000, key: (job) => job.tenantId ?? '-' } } }
   */
  rateLimit?: RateLimit;
  /** Only on a `BatchHandlerDefinition` (its handler takes jobs in batches). */
  batch?: undefined;
}

/** How a batch handler's calls are filled (`BatchHandlerDefinition.batch`). */
export interface BatchOptions {
  /** The most jobs in one call: an integer from 1 to 1000. */
  size: number;
  /**
   * How long the first job of a batch waits for more to join before the call is made with
   * what joined, in ms (0 to 60 000; default `DEFAULT_BATCH_WAIT_MS`, 20). A full batch is
   * called at once; a job is never held back longer than this.
   */
  waitMs?: number;
}

/**
 * What a batch handler gives back for one job of its batch: the job's result, or an `Error`
 * to fail that job (retried under its own retry rule; an `UnrecoverableError` dead-letters
 * it). A job's result therefore cannot be an `Error` instance.
 */
export type BatchOutcome<R = unknown> = R | Error;

/** What a batch handler gets besides its jobs. */
export interface BatchContext {
  /**
   * Aborted once every job of the batch is aborted (leases lost, cancelled, time limits, or
   * `stop()` timed out): the whole call can stop. Use `signalOf(job)` to stop work on one job.
   */
  signal: AbortSignal;
  /**
   * One job's signal, as `ctx.signal` is for a single run: aborted when its lease is lost,
   * an operator cancelled it (`CancelledError`), its time limit passed, or `stop()` timed out.
   * Its outcome is then decided as for a single run (a cancelled job ends `cancelled`,
   * whatever the handler returns for it). Throws for a job that is not in this batch.
   */
  // biome-ignore lint/suspicious/noExplicitAny: handlers choose their payload type
  signalOf(job: Job<any>): AbortSignal;
  /** The engine's logger. */
  log: Logger;
}

/**
 * A batch handler: runs up to `batch.size` jobs of its type in one call and returns one
 * outcome per job, in the order given (`BatchOutcome`). A thrown error, or an answer that is
 * not an array of exactly one outcome per job, fails every job of the batch.
 */
// biome-ignore lint/suspicious/noExplicitAny: handlers choose their payload type
export type BatchHandler<P = any, R = unknown> = (
  jobs: Job<P>[],
  ctx: BatchContext,
) => readonly BatchOutcome<R>[] | Promise<readonly BatchOutcome<R>[]>;

/**
 * A handler that takes the jobs of its type in batches: up to `batch.size` leased jobs in one
 * call, waiting at most `batch.waitMs` for a batch to fill. Each job keeps its own lease,
 * token, attempts, cancel request, time limit and retry rule, and settles exactly as a single
 * run would (history, events, hooks). Every job of a batch takes one slot of `concurrency`, so
 * a batch holds at most `concurrency` jobs: give `concurrency >= batch.size`.
 *
 * @example
 * handlers: { index: { batch: { size: 100 }, handler: async (jobs, ctx) => {
 *   const ok = await search.bulkIndex(jobs.map((job) => job.payload), { signal: ctx.signal });
 *   return ok.map((indexed) => (indexed ? true : new Error('not indexed')));
 * } } }
 */
export interface BatchHandlerDefinition<P = unknown, R = unknown>
  extends Omit<HandlerDefinition<P, R>, 'handler' | 'batch'> {
  batch: BatchOptions;
  handler: BatchHandler<P, R>;
}

/** `ctx.log`: a function that writes a line to the job's log, and a `Logger`. */
export interface JobLog extends Logger {
  (message: string, data?: Record<string, unknown>): void;
}

export interface Logger {
  debug(message: string, data?: Record<string, unknown>): void;
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
  error(message: string, data?: Record<string, unknown>): void;
}

/**
 * What a job type carries, in a typed engine's job map (`JobEngine<Jobs>`): its payload, and
 * what its handler returns (`engine.result`). Both optional: absent means `unknown`.
 */
export interface JobTypeSpec {
  payload?: unknown;
  result?: unknown;
  /** The type's handler takes its jobs in batches (`BatchHandlerDefinition`). */
  batch?: boolean;
}

/**
 * The job map of an untyped engine (`new JobEngine(…)` without a type argument): any type,
 * any payload, any result.
 */
// biome-ignore lint/suspicious/noExplicitAny: the untyped engine accepts anything
export type AnyJobs = Record<string, { payload: any; result: any }>;

/** The job types of a job map, as strings. */
export type JobTypeOf<Jobs> = Extract<keyof Jobs, string>;
/** The payload of job type `T` in a job map. */
export type PayloadOf<Jobs, T extends keyof Jobs> = Jobs[T] extends { payload: infer P }
  ? P
  : unknown;
/** What a handler of job type `T` returns, in a job map. */
export type ResultOf<Jobs, T extends keyof Jobs> = Jobs[T] extends { result: infer R }
  ? R
  : unknown;

/** A job of type `T` of a job map: its payload typed, its type the literal. */
export type JobOf<Jobs, T extends JobTypeOf<Jobs>> = Job<PayloadOf<Jobs, T>> & { type: T };

/**
 * Marks a plain handler function as not a batch definition, so TypeScript types a handler's
 * parameters from `handlers`' type alone (a batch handler's need annotations).
 */
export interface NotABatch {
  batch?: undefined;
}

/**
 * The handlers of a job map: each type's handler gets its payload and returns its result. A
 * map without types (`object`, as generic code sees the engine) takes any handlers.
 */
export type HandlersOf<Jobs> = [JobTypeOf<Jobs>] extends [never]
  ? // An index signature, not an optional mapped type: its values' union has no `undefined`,
    // so TypeScript tells a definition from a batch definition and types a handler's parameters.
    { [type: string]: AnyHandlerOf<AnyJobs, string> }
  : string extends JobTypeOf<Jobs>
    ? { [type: string]: AnyHandlerOf<Jobs, string> }
    : { [T in JobTypeOf<Jobs>]?: HandlerOf<Jobs, T> };

/**
 * What `handlers` takes for job type `T` of a typed job map: a handler or a definition, or a
 * `BatchHandlerDefinition` when the map marks the type `batch: true` (one shape per type, so
 * TypeScript types the handler's parameters either way).
 */
export type HandlerOf<Jobs, T extends keyof Jobs> = Jobs[T] extends { batch: true }
  ? BatchHandlerDefinition<PayloadOf<Jobs, T>, ResultOf<Jobs, T>>
  :
      | JobHandler<PayloadOf<Jobs, T>, ResultOf<Jobs, T>>
      | HandlerDefinition<PayloadOf<Jobs, T>, ResultOf<Jobs, T>>;

/**
 * What an untyped engine's `handlers` takes: a handler, a definition or a batch definition
 * (annotate a batch handler's parameters: `(jobs: Job[], ctx: BatchContext)`).
 */
export type AnyHandlerOf<Jobs, T extends keyof Jobs> =
  | (JobHandler<PayloadOf<Jobs, T>, ResultOf<Jobs, T>> & NotABatch)
  | HandlerDefinition<PayloadOf<Jobs, T>, ResultOf<Jobs, T>>
  | BatchHandlerDefinition<PayloadOf<Jobs, T>, ResultOf<Jobs, T>>;

/**
 * Engine options. `Jobs`, the job map (see `JobEngine`), types the handlers; untyped by default.
 */
export interface EngineOptions<Jobs extends object = AnyJobs> {
  store: JobStore;
  /** Job type → handler. An engine without handlers is a client: it enqueues and administers. */
  handlers?: HandlersOf<Jobs>;
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
  /**
   * Upper bound of the idle polling delay (fallback when no wake-up arrives). Default 5 000 on
   * a store with notifications, unless it asks for another (`capabilities.pollIntervalMs`:
   * MySQL/MariaDB 30 000, its wake-ups read whether a job is due every `notifyWaitMs`); 1 000
   * on one without.
   */
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
  /**
   * How long a signal nobody took (`engine.signal` before any `ctx.waitFor` for its name and
   * key) is kept for a wait that begins later: an ISO-8601 duration from `PT1M` to `P3650D`,
   * default `'P7D'`. Engines delete older ones in the background every few minutes, in small
   * batches (`signals-pruned` event). A job already waiting is never affected: a signal for it
   * is taken at once.
   */
  signalRetention?: string;
  /**
   * A parent parked for its child jobs (`ctx.run`) is woken by the last of them to end; should
   * that wake-up be lost (the process that settled the child died first), the parent looks at
   * its children again after this many ms at most. Default 60 000 (10 ms to 24 h).
   */
  childRecheckMs?: number;
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
  /**
   * This job's time limit in ms (1 ms to a week), over its type's `timeoutMs`: a run that takes
   * longer gets its `ctx.signal` aborted with a `JobTimeoutError` and the attempt fails with it
   * (retried as any failure). Needs a store with `capabilities.timeLimits`.
   *
   * @example
   * await engine.enqueue('import', { file }, { timeoutMs: 10 * 60_000 });
   */
  timeoutMs?: number;
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
  /**
   * Around each `ctx.step` call: `next()` runs the step's function, or — for a step a previous
   * run completed (`step.replayed`) — resolves to its stored result without running it. Call it
   * inside the async context the hook sets up so the function's own work joins it. `step.name`
   * is the step's key (`name#2` for a repeated name).
   */
  step?(
    job: Job,
    step: { readonly name: string; readonly transaction: boolean; readonly replayed: boolean },
    next: () => Promise<unknown>,
  ): Promise<unknown>;
  /**
   * Around each `ctx.sleep`, `ctx.waitFor` and `ctx.run` call: `next()` resolves to what the
   * call returns in this run — at once when an earlier run's checkpoint answers it
   * (`wait.replayed`), or after the signal was taken or the child's result read — or rejects:
   * with the engine's park when the job now waits (`isParked(error)`: the run ends there, not
   * a failure), or with the call's error. `wait.name` is the checkpoint's key (`name#2` for a
   * repeated name); `wait.signal` the signal's name (`waitFor`), `wait.childType` the child's
   * type (`run`).
   */
  wait?(job: Job, wait: WaitCall, next: () => Promise<unknown>): Promise<unknown>;
}

/** A `ctx.sleep`, `ctx.waitFor` or `ctx.run` call, as an `EngineHooks.wait` hook sees it. */
export interface WaitCall {
  readonly kind: 'sleep' | 'waitFor' | 'run';
  /** The checkpoint's key: the name given, `name#2` for its second use in a run. */
  readonly name: string;
  /** An earlier run's checkpoint answers the call: nothing waits. */
  readonly replayed: boolean;
  /** `waitFor`: the signal's name. */
  readonly signal?: string;
  /** `run`: the child's job type. */
  readonly childType?: string;
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
  /**
   * `ctx.sleep` ended a run: the job waits (`timer`) until `until` with its steps, and runs
   * again then; not a failure, not an attempt.
   */
  sleeping: { job: Job; name: string; until: Date };
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
  /** Signals nobody took, older than `signalRetention`, were deleted (a pass of this engine). */
  'signals-pruned': { count: number };
}

export type EngineEventName = keyof EngineEvents;
