/**
 * `createWorkerApi`: external workers over HTTP (Flowable's external worker jobs). A worker in
 * any language acquires jobs of its types with a lease, extends the lease while it works
 * (learning of cancel requests), and completes, fails or releases each job — every call after
 * acquire naming the lease's fencing token, so a worker whose lease lapsed changes nothing
 * (DESIGN invariant 24). The API needs no engine: an acquire recovers lapsed leases itself.
 * Given an OpenTelemetry tracer, it traces each request and each remote run (`tracing.ts`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  assertKnownOptions,
  consoleLogger,
  DEFAULT_RETRY_POLICY,
  decideRetry,
  durationToMs,
  type HistoryKeep,
  historyResultJson,
  isJobId,
  type Job,
  type JobCompletion,
  type JobFailure,
  type JobRef,
  type JobStore,
  type Logger,
  MAX_PROGRESS_BYTES,
  parseDuration,
  parseRetryPolicy,
  type RetryPolicy,
  recordableError,
  refOf,
  StoreSyncedClock,
  ValidationError,
} from '@jobs/core';
import {
  type AuthorizedClient,
  createAuthenticator,
  MAX_ACQUIRE,
  type WorkerClientConfig,
} from './auth.js';
import {
  boolField,
  DEFAULT_MAX_BODY_BYTES,
  type Incoming,
  intField,
  knownFields,
  readJsonBody,
  readRequestText,
  stringField,
  tooLarge,
} from './body.js';
import { WorkerApiMetrics } from './metrics.js';
import { openApiDocument } from './openapi.js';
import { jsonReply, ProblemError, problemReply, type Reply, toResponse } from './problems.js';
import { settleBatches } from './settle-batches.js';
import {
  admitRateLimited,
  configureHistory,
  endCancelled,
  keepsProgress,
  keepsRateLimits,
} from './store-access.js';
import { createTracing, type WorkerApiTracer, type WorkerApiTracing } from './tracing.js';
import { Waiters } from './waiters.js';
import { workflowChildren } from './workflow-children.js';

export type { WorkerClientConfig } from './auth.js';

export interface WorkerApiOptions {
  /** Any `JobStore`, migrated. */
  store: JobStore;
  /** Who may call, each with the job types it may work. */
  clients: readonly WorkerClientConfig[];
  /** Path the API is served under, e.g. `/workers`. Default: Express's mount path, else the root. */
  basePath?: string;
  /**
   * Backoff of a failed attempt whose `fail` call gives no `retryInMs`, when the job has no
   * policy of its own: an ISO-8601 cycle (`R5/PT10M`) or a policy object. Default: the engine's
   * (exponential from 1 s, doubling, capped at 10 minutes, ±20 % jitter).
   */
  retry?: RetryPolicy | string;
  /** Lease given when an acquire asks for none, in ms. Default 30,000. */
  defaultLeaseMs?: number;
  /** Longest lease an acquire or extend may ask for, in ms. Default 600,000 (10 minutes). */
  maxLeaseMs?: number;
  /** Longest long-poll (`waitMs`) an acquire may ask for, in ms. Default 60,000. */
  maxWaitMs?: number;
  /**
   * How often a waiting acquire looks again without a wake-up, and how often lapsed leases are
   * recovered, in ms. Default 1,000 (stores with notifications wake waiters at once anyway).
   */
  pollMs?: number;
  /** Largest request body, in bytes (413 beyond). Default 1 MiB. */
  maxBodyBytes?: number;
  /**
   * Which finished jobs the store's history keeps (`configureHistory`), when no engine on the
   * same store says so. Absent: left as the store (or an engine) has it.
   */
  history?: { keep: HistoryKeep; retention?: string };
  /**
   * Rate limits by job type: at most `max` starts per `perMs` window across every acquirer of
   * the store (engines with the same limit on the type share the window). Jobs over the limit
   * go back waiting until the window ends, no attempt counted. Needs a store that keeps rate
   * limits (its `rateLimits` ability).
   */
  rateLimits?: Readonly<Record<string, { max: number; perMs: number }>>;
  /** Where the API's own errors go (never tokens). Default: the console, warnings and errors. */
  logger?: Logger;
  /**
   * An OpenTelemetry `Tracer` (`trace.getTracer('@jobs/http')`): a server span per request, a
   * child of its `traceparent` header, and a `jobs.run <type>` span per remote run, from acquire
   * to its settle, with `@jobs/otel`'s attributes. Default: none (no spans).
   */
  tracer?: WorkerApiTracer;
  /**
   * How a run's span relates to the trace context stored with its job, as `@jobs/otel`'s
   * `link`: `'link'` (default) starts the run's own trace with a span link to it; `'child'`
   * makes the run its child, so the enqueuing request and the remote run are one trace.
   */
  link?: 'link' | 'child';
}

export interface WorkerApi {
  /** For `node:http`, Express, Connect, Fastify: `createServer(api.handler)`, `app.use('/workers', api.handler)`. */
  handler(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void;
  /** For fetch-style servers (Hono, Bun, Deno): `(request) => api.fetch(request)`. */
  fetch(request: Request): Promise<Response>;
  /** Ends long-polls at once (they answer with no jobs) and drops the store subscription. */
  close(): void;
}

/** An operation of the API: the routes the OpenAPI document must describe, and only these. */
export interface WorkerApiRoute {
  method: 'GET' | 'POST';
  /** OpenAPI path template, e.g. `/jobs/{id}/extend`. */
  path: string;
  operationId: string;
}

export const WORKER_API_ROUTES: readonly WorkerApiRoute[] = [
  { method: 'POST', path: '/acquire', operationId: 'acquire' },
  { method: 'POST', path: '/jobs/{id}/extend', operationId: 'extend' },
  { method: 'POST', path: '/jobs/{id}/complete', operationId: 'complete' },
  { method: 'POST', path: '/jobs/{id}/fail', operationId: 'fail' },
  { method: 'POST', path: '/jobs/{id}/release', operationId: 'release' },
  { method: 'POST', path: '/complete', operationId: 'completeMany' },
  { method: 'GET', path: '/openapi.json', operationId: 'openapi' },
  { method: 'GET', path: '/health', operationId: 'health' },
  { method: 'GET', path: '/metrics', operationId: 'metrics' },
];

const JOB_ACTIONS = new Set(['extend', 'complete', 'fail', 'release']);
const MIN_LEASE_MS = 100;
const WORKER_NAME = /^[A-Za-z0-9._:@-]{1,100}$/;
/** Leased jobs remembered for settles without a read (the oldest are forgotten beyond). */
const MAX_REMEMBERED = 20_000;

function normalizeBase(base: string): string {
  const trimmed = base.trim().replace(/\/+$/, '');
  return trimmed === '' ? '' : trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
}

function positive(value: number | undefined, fallback: number, name: string, min = 1): number {
  const given = value ?? fallback;
  if (!Number.isSafeInteger(given) || given < min) {
    throw new TypeError(
      `[@jobs/http] createWorkerApi: \`${name}\` must be a whole number ≥ ${min} (got ${String(value)})`,
    );
  }
  return given;
}

/** The API's tracing when it is given a tracer, else null; `tracer` and `link` checked. */
function tracingOf(options: WorkerApiOptions): WorkerApiTracing | null {
  const link = options.link ?? 'link';
  if (link !== 'link' && link !== 'child') {
    throw new ValidationError(
      'link',
      `[@jobs/http] createWorkerApi: must be 'link' or 'child' (got ${JSON.stringify(link)})`,
    );
  }
  if (options.tracer === undefined) return null;
  if (typeof options.tracer?.startSpan !== 'function') {
    throw new ValidationError(
      'tracer',
      '[@jobs/http] createWorkerApi: expected an OpenTelemetry Tracer (with startSpan)',
    );
  }
  return createTracing(options.tracer, link);
}

/**
 * Creates the external-worker API over `store`.
 *
 * @example
 * import { createServer } from 'node:http';
 * import { createWorkerApi } from '@jobs/http';
 * const api = createWorkerApi({ store, clients: [{ token: process.env.WORKER_TOKEN!, types: ['run-script'] }] });
 * createServer(api.handler).listen(8080);
 */
export function createWorkerApi(options: WorkerApiOptions): WorkerApi {
  if (!options || typeof options.store !== 'object' || options.store === null) {
    throw new TypeError('[@jobs/http] createWorkerApi: `store` (a JobStore) is required');
  }
  assertKnownOptions(
    options,
    [
      'store',
      'clients',
      'basePath',
      'retry',
      'defaultLeaseMs',
      'maxLeaseMs',
      'maxWaitMs',
      'pollMs',
      'maxBodyBytes',
      'history',
      'rateLimits',
      'logger',
      'tracer',
      'link',
    ],
    '@jobs/http',
  );
  const store = options.store;
  const authenticate = createAuthenticator(options.clients);
  const typePolicy: RetryPolicy =
    options.retry === undefined ? DEFAULT_RETRY_POLICY : parseRetryPolicy(options.retry).policy;
  const maxLeaseMs = positive(options.maxLeaseMs, 600_000, 'maxLeaseMs', MIN_LEASE_MS);
  const defaultLeaseMs = positive(options.defaultLeaseMs, 30_000, 'defaultLeaseMs', MIN_LEASE_MS);
  if (defaultLeaseMs > maxLeaseMs) {
    throw new TypeError('[@jobs/http] createWorkerApi: `defaultLeaseMs` is above `maxLeaseMs`');
  }
  const maxWaitMs = positive(options.maxWaitMs, 60_000, 'maxWaitMs', 0);
  const pollMs = positive(options.pollMs, 1_000, 'pollMs', 10);
  const maxBodyBytes = positive(options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES, 'maxBodyBytes');
  const logger = options.logger ?? consoleLogger('warn');
  const configuredBase =
    options.basePath === undefined ? undefined : normalizeBase(options.basePath);
  if (options.history !== undefined) {
    if (!['all', 'failed', 'none'].includes(options.history?.keep)) {
      throw new TypeError(
        "[@jobs/http] createWorkerApi: `history.keep` must be 'all', 'failed' or 'none'",
      );
    }
    const retentionMs = durationToMs(
      parseDuration(options.history.retention ?? 'P7D', 'history.retention'),
    );
    configureHistory(store, { keep: options.history.keep, retentionMs });
  }

  const rateLimits = new Map<string, { max: number; perMs: number }>();
  for (const [type, limit] of Object.entries(options.rateLimits ?? {})) {
    const at = `[@jobs/http] createWorkerApi: rateLimits[${JSON.stringify(type)}]`;
    if (!keepsRateLimits(store)) {
      throw new TypeError(
        `${at}: the ${store.name} store keeps no rate limits (it has no \`rateLimits\`)`,
      );
    }
    const { max, perMs } = limit ?? ({} as { max: number; perMs: number });
    if (
      !Number.isSafeInteger(max) ||
      max < 1 ||
      !Number.isSafeInteger(perMs) ||
      perMs < 1 ||
      perMs > 86_400_000
    ) {
      throw new TypeError(`${at} must be { max: whole number ≥ 1, perMs: 1 to 86,400,000 }`);
    }
    rateLimits.set(type, { max, perMs });
  }

  const tracing = tracingOf(options);
  const metrics = new WorkerApiMetrics();
  // Settles of many requests in one turn go to the store in one call.
  const completeBatched = settleBatches((items: JobCompletion[]) => store.complete(items));
  const failBatched = settleBatches((items: JobFailure[]) => store.fail(items));
  const releaseBatched = settleBatches((items: JobRef[]) => store.release(items));
  /**
   * Jobs this API leased, as acquired (payload dropped), by id: a settle naming the same token
   * needs no read of the job first (its type, owner and retry state do not change while it is
   * held; the store still checks the token). A miss — another API instance leased it, or it
   * was forgotten — reads the job.
   */
  const leased = new Map<string, Job>();
  const remember = (job: Job): void => {
    const before = leased.get(job.id);
    // Leased again with another token: the run before lost its lease (recovered elsewhere).
    if (before !== undefined) tracing?.runEnded(before, 'lease-lost', clock.now());
    else if (leased.size >= MAX_REMEMBERED) leased.delete(leased.keys().next().value as string);
    leased.set(job.id, { ...job, payload: null, progress: null });
  };
  /** Runs of this API whose lapsed lease was recovered: ended as lease-lost, and forgotten. */
  const forgetLapsed = (ids: readonly string[]): void => {
    for (const id of ids) {
      const run = leased.get(id);
      if (run === undefined) continue;
      leased.delete(id);
      tracing?.runEnded(run, 'lease-lost', clock.now());
    }
  };
  const waiters = new Waiters(store);
  // Jobs worked here as workflow children: their outcomes reach their parents.
  const children = workflowChildren(store, logger);
  // The store's clock read locally: lease expiries reported to workers, run durations.
  const clock = new StoreSyncedClock(() => store.now());
  let clockSyncedAt = Number.NEGATIVE_INFINITY;
  let lastRecoveryAt = Number.NEGATIVE_INFINITY;
  let recovery: Promise<void> | null = null;
  let closed = false;

  async function syncClock(): Promise<void> {
    if (performance.now() - clockSyncedAt < 60_000) return;
    clockSyncedAt = performance.now();
    await clock.sync(1);
  }

  /** Ends lapsed leases (no engine may be running anywhere), at most once per `pollMs`. */
  function recoverLapsed(): Promise<void> {
    if (recovery !== null) return recovery;
    if (performance.now() - lastRecoveryAt < pollMs) return Promise.resolve();
    lastRecoveryAt = performance.now();
    recovery = (async () => {
      try {
        for (let round = 0; round < 10; round++) {
          const result = await store.recoverExpiredLeases(100);
          forgetLapsed([
            ...result.requeued,
            ...result.deadlettered,
            ...(result.released ?? []),
            ...(result.cancelled ?? []),
          ]);
          const count =
            result.requeued.length +
            result.deadlettered.length +
            (result.released?.length ?? 0) +
            (result.cancelled?.length ?? 0);
          if (result.requeued.length + (result.released?.length ?? 0) > 0) waiters.wakeAll();
          if (count < 100) break;
        }
      } catch (error) {
        logger.warn('[@jobs/http] recovering lapsed leases failed', { error });
      } finally {
        recovery = null;
      }
    })();
    return recovery;
  }

  function allowType(client: AuthorizedClient, type: string): void {
    if (!client.types.has(type)) {
      throw new ProblemError(
        'forbidden',
        `client "${client.name}" may not work jobs of type ${JSON.stringify(type.slice(0, 255))}`,
      );
    }
  }

  // ---- POST /acquire ----

  async function acquire(
    client: AuthorizedClient,
    body: Record<string, unknown>,
    signal: AbortSignal | null,
  ): Promise<Reply> {
    knownFields(body, ['types', 'max', 'leaseMs', 'waitMs', 'worker', 'complete']);
    // Completions of the jobs the worker finished, settled before the acquire (one round trip).
    const done =
      body.complete === undefined || body.complete === null
        ? null
        : readCompletions(body.complete, '"complete"');
    let types: string[];
    if (body.types === undefined || body.types === null) types = [...client.types];
    else {
      if (
        !Array.isArray(body.types) ||
        body.types.length === 0 ||
        body.types.length > 100 ||
        !body.types.every((t) => typeof t === 'string' && t.length > 0 && t.length <= 255)
      ) {
        throw new ProblemError('bad-request', '"types" must list 1 to 100 job type names');
      }
      types = [...new Set(body.types as string[])];
      for (const type of types) allowType(client, type);
    }
    const max = intField(body, 'max', 1, client.maxAcquire, 1);
    const leaseMs = intField(body, 'leaseMs', MIN_LEASE_MS, maxLeaseMs, defaultLeaseMs);
    const waitMs = intField(body, 'waitMs', 0, maxWaitMs, 0);
    const worker = stringField(body, 'worker', 100, 'worker');
    if (!WORKER_NAME.test(worker)) {
      throw new ProblemError(
        'bad-request',
        '"worker" must be 1–100 characters of A-Z a-z 0-9 . _ : @ -',
      );
    }
    const owner = `http:${client.name}/${worker}`;
    const deadline = performance.now() + waitMs;
    await syncClock();
    let jobs: Job[] = [];
    let results: CompletionResult[] | null = null;
    let fused = done !== null && done.length > 0 ? await prepareCompletions(client, done) : null;
    if (done !== null && fused === null) results = [];
    for (;;) {
      await recoverLapsed();
      const mark = waiters.mark();
      const request = { owner, limit: max, leaseMs, types, queues: null, tenants: null };
      if (fused !== null) {
        // The completions ride on the first acquisition: one store call where the store fuses
        // them (`completeAndAcquire`), each still fenced by its token.
        const prepared = fused;
        fused = null;
        ({ jobs, results } = await completeThenAcquire(client, prepared, request));
      } else jobs = await store.acquire(request);
      if (rateLimits.size > 0 && jobs.length > 0) {
        jobs = await admitRateLimited(store, rateLimits, jobs, () => clock.now());
      }
      if (jobs.length > 0 || closed || signal?.aborted) break;
      const left = deadline - performance.now();
      if (left <= 0) break;
      // Sleep until a wake-up, the next poll, or the next known due time.
      const nextDue = await store.nextDueAt({ types, queues: null, tenants: null });
      const untilDue = nextDue === null ? left : Math.max(1, nextDue.getTime() - clock.now());
      await waiters.wait(Math.min(left, pollMs, untilDue), signal, mark);
    }
    if (jobs.length > 0 && signal?.aborted) {
      // The worker went away while we acquired: give its jobs back at once, no attempt counted.
      await store.release(jobs.map(refOf)).catch(() => {});
      waiters.wakeAll();
      return jsonReply(200, { jobs: [], ...(results === null ? {} : { results }) });
    }
    metrics.job('acquired', client.name, jobs.length);
    for (const job of jobs) remember(job);
    // The jobs of one acquisition share their lease's expiry: its text is made once.
    let expiresMs = Number.NaN;
    let expiresText = '';
    const expiry = (at: Date | null): string => {
      const ms = at === null ? clock.now() + leaseMs : at.getTime();
      if (ms !== expiresMs) {
        expiresMs = ms;
        expiresText = new Date(ms).toISOString();
      }
      return expiresText;
    };
    return jsonReply(200, {
      ...(results === null ? {} : { results }),
      jobs: jobs.map((job) => ({
        id: job.id,
        type: job.type,
        payload: job.payload,
        attempt: job.attempts,
        retriesLeft: job.retriesLeft,
        token: job.lockToken,
        leaseExpiresAt: expiry(job.lockExpiresAt ?? null),
        scope: job.scope,
        tenantId: job.tenantId,
        queue: job.queue,
        meta: job.meta,
        progress: job.progress ?? null,
        // The W3C trace context stored with the job (`@jobs/otel`), to pass on.
        traceparent: job.meta?.traceparent ?? null,
        tracestate: job.meta?.tracestate ?? null,
      })),
    });
  }

  // ---- POST /jobs/{id}/… ----

  /** The job held with `token`, or a 409 / 403 when the caller does not hold it. */
  async function heldJob(client: AuthorizedClient, id: string, token: string): Promise<Job> {
    const known = leased.get(id);
    if (known !== undefined && known.lockToken === token) {
      allowType(client, known.type);
      return known;
    }
    const job = await store.getJob(id);
    if (job === null) {
      throw new ProblemError('lease-lost', `job ${id} is no longer live: its lease is gone`);
    }
    allowType(client, job.type);
    if (job.state !== 'running' || job.lockToken !== token) {
      metrics.job('lease_lost', client.name);
      throw new ProblemError(
        'lease-lost',
        `the token does not hold job ${id}'s current lease (it lapsed, was taken over or ended): nothing was changed`,
      );
    }
    return job;
  }

  function leaseLost(client: AuthorizedClient, id: string): ProblemError {
    metrics.job('lease_lost', client.name);
    return new ProblemError(
      'lease-lost',
      `job ${id}'s lease was lost before the call took effect: nothing was changed`,
    );
  }

  /** After a refused settle: a job with a cancel request is ended as cancelled (409 either way). */
  async function refusedSettle(client: AuthorizedClient, job: Job, token: string): Promise<never> {
    leased.delete(job.id);
    const now = await store.getJob(job.id);
    if (now !== null && now.lockToken === token && now.cancelRequested === true) {
      const result = await endCancelled(store, [{ ...refOf(now), durationMs: runMs(now) }]);
      if (!result.lost.includes(job.id)) {
        await children.cancelled(now);
        metrics.job('cancelled', client.name);
        tracing?.runEnded(job, 'cancelled', clock.now());
        throw new ProblemError(
          'cancelled',
          `job ${job.id} was cancelled by an operator: it ended as cancelled and this call was not recorded`,
        );
      }
    }
    tracing?.runEnded(job, 'lease-lost', clock.now());
    throw leaseLost(client, job.id);
  }

  function runMs(job: Job): number | null {
    return job.startedAt ? Math.max(0, Math.round(clock.now() - job.startedAt.getTime())) : null;
  }

  /** The completion of held `job` with `result`, as the store writes it. */
  function completionOf(job: Job, result: unknown): JobCompletion {
    const completion: JobCompletion = refOf(job); // a new object: completed in place
    completion.resultJson = historyResultJson(result);
    completion.durationMs = runMs(job);
    return completion;
  }

  /**
   * What completing job `id` held with `token` writes, once checked (held, no cancel request)
   * and, for a workflow child, its result stored for its parent; throws a problem when it cannot.
   */
  async function prepareCompletion(
    client: AuthorizedClient,
    id: string,
    token: string,
    result: unknown,
  ): Promise<{ job: Job; completion: JobCompletion }> {
    const job = await heldJob(client, id, token);
    if (job.cancelRequested === true) await refusedSettle(client, job, token);
    // A child's result is stored for its parent before its completion (as an engine does).
    await children.beforeComplete(job, result);
    return { job, completion: completionOf(job, result) };
  }

  /**
   * After the store answered a completion: refused (`lost`) is a problem, else it is done (its
   * `completed` metric is the caller's to count).
   */
  async function completionLanded(
    client: AuthorizedClient,
    job: Job,
    lost: boolean,
  ): Promise<void> {
    if (lost) await refusedSettle(client, job, job.lockToken as string);
    leased.delete(job.id);
    await children.ended(job);
    tracing?.runEnded(job, 'completed', clock.now());
  }

  /** Completes job `id` held with `token`; throws a problem when it cannot. */
  async function completeJob(
    client: AuthorizedClient,
    id: string,
    token: string,
    result: unknown,
  ): Promise<void> {
    const { job, completion } = await prepareCompletion(client, id, token, result);
    await completionLanded(client, job, await completeBatched(completion));
    metrics.job('completed', client.name);
  }

  /** A refused job's own answer: its problem (anything else is the request's failure). */
  function refusedAnswer(id: string, error: unknown): CompletionResult {
    if (error instanceof ProblemError) return { id, problem: error.problem };
    throw error;
  }

  /**
   * The completions an acquire carries, checked; each refused one answered at once. A job this
   * API leased with the same token, no cancel request known and no parent is checked here and
   * now, with no read and no await (the store still fences the write by its token); any other
   * takes `prepareCompletion`'s way.
   */
  async function prepareCompletions(
    client: AuthorizedClient,
    done: readonly CompletionItem[],
  ): Promise<PreparedCompletions> {
    const ready: PreparedCompletion[] = [];
    const results: (CompletionResult | null)[] = new Array(done.length).fill(null);
    const slow: Promise<void>[] = [];
    for (let index = 0; index < done.length; index++) {
      const { id, token, result } = done[index] as CompletionItem;
      const known = leased.get(id);
      if (
        known !== undefined &&
        known.lockToken === token &&
        known.cancelRequested !== true &&
        !children.isChild(known)
      ) {
        if (client.types.has(known.type)) {
          ready.push({ index, job: known, completion: completionOf(known, result) });
        } else {
          try {
            allowType(client, known.type);
          } catch (error) {
            results[index] = refusedAnswer(id, error);
          }
        }
        continue;
      }
      slow.push(
        prepareCompletion(client, id, token, result).then(
          ({ job, completion }) => {
            ready.push({ index, job, completion });
          },
          (error: unknown) => {
            results[index] = refusedAnswer(id, error);
          },
        ),
      );
    }
    if (slow.length > 0) await Promise.all(slow);
    return { ready, results };
  }

  /**
   * After the store answered prepared completions (`lost`: the refused ones): each answered, in
   * the order the request named them. A completed job that is no workflow child and was not
   * refused is settled here without an await.
   */
  async function completionsLanded(
    client: AuthorizedClient,
    prepared: PreparedCompletions,
    lost: ReadonlySet<string>,
  ): Promise<CompletionResult[]> {
    const { results } = prepared;
    let completed = 0;
    const slow: Promise<void>[] = [];
    for (const { index, job } of prepared.ready) {
      if (!lost.has(job.id) && !children.isChild(job)) {
        leased.delete(job.id);
        tracing?.runEnded(job, 'completed', clock.now());
        results[index] = { id: job.id, outcome: 'completed' };
        completed++;
        continue;
      }
      slow.push(
        completionLanded(client, job, lost.has(job.id)).then(
          () => {
            results[index] = { id: job.id, outcome: 'completed' };
            completed++;
          },
          (error: unknown) => {
            results[index] = refusedAnswer(job.id, error);
          },
        ),
      );
    }
    if (slow.length > 0) await Promise.all(slow);
    metrics.job('completed', client.name, completed);
    return results as CompletionResult[];
  }

  /**
   * Writes prepared completions and acquires: in one store call where the store fuses them
   * (`completeAndAcquire`), else the completions (batched with other requests') then the acquire.
   */
  async function completeThenAcquire(
    client: AuthorizedClient,
    prepared: PreparedCompletions,
    request: Parameters<JobStore['acquire']>[0],
  ): Promise<{ jobs: Job[]; results: CompletionResult[] }> {
    let jobs: Job[];
    let lost: Set<string>;
    if (prepared.ready.length === 0) {
      jobs = await store.acquire(request);
      lost = new Set();
    } else if (store.completeAndAcquire) {
      const completions: JobCompletion[] = new Array(prepared.ready.length);
      for (let i = 0; i < completions.length; i++) {
        completions[i] = (prepared.ready[i] as PreparedCompletion).completion;
      }
      const answer = await store.completeAndAcquire(completions, request);
      jobs = answer.jobs;
      lost = new Set(answer.lost);
      for (const id of answer.cancelRequested ?? []) lost.add(id);
    } else {
      const refused = await Promise.all(prepared.ready.map((p) => completeBatched(p.completion)));
      lost = new Set(prepared.ready.filter((_, i) => refused[i]).map((p) => p.job.id));
      jobs = await store.acquire(request);
    }
    return { jobs, results: await completionsLanded(client, prepared, lost) };
  }

  // ---- POST /complete (a batch) ----

  /**
   * Completes many held jobs in one request, each on its own: one job's problem (a lost lease,
   * a type the client may not work) is its own entry in the answer and holds back no other.
   * The completions go to the store together, in one call.
   */
  async function completeMany(
    client: AuthorizedClient,
    body: Record<string, unknown>,
  ): Promise<Reply> {
    knownFields(body, ['jobs']);
    const checked = readCompletions(body.jobs, '"jobs"', 1);
    const results = await Promise.all(
      checked.map(({ id, token, result }) =>
        completeJob(client, id, token, result).then(
          (): CompletionResult => ({ id, outcome: 'completed' }),
          (error: unknown) => refusedAnswer(id, error),
        ),
      ),
    );
    return jsonReply(200, { results });
  }

  async function jobAction(
    client: AuthorizedClient,
    id: string,
    action: string,
    body: Record<string, unknown>,
  ): Promise<Reply> {
    const token = stringField(body, 'token', 200);
    switch (action) {
      case 'extend': {
        knownFields(body, ['token', 'progress', 'leaseMs']);
        const leaseMs = intField(body, 'leaseMs', MIN_LEASE_MS, maxLeaseMs, defaultLeaseMs);
        let progressJson: string | null = null;
        if (body.progress !== undefined && body.progress !== null && keepsProgress(store)) {
          progressJson = JSON.stringify(body.progress);
          if (Buffer.byteLength(progressJson, 'utf8') > MAX_PROGRESS_BYTES) {
            throw new ProblemError(
              'bad-request',
              `"progress" is over ${MAX_PROGRESS_BYTES} bytes of JSON`,
            );
          }
        }
        const job = await heldJob(client, id, token);
        await syncClock();
        const sent = clock.now();
        const ref = { ...refOf(job), ...(progressJson === null ? {} : { progressJson }) };
        const result = await store.renewLeases(job.lockOwner as string, leaseMs, [ref]);
        if (result.lost.includes(id)) {
          leased.delete(id);
          tracing?.runEnded(job, 'lease-lost', clock.now());
          throw leaseLost(client, id);
        }
        metrics.job('extended', client.name);
        return jsonReply(200, {
          // Measured from before the call: never later than the store's own expiry.
          leaseExpiresAt: new Date(sent + leaseMs).toISOString(),
          cancelRequested: result.cancelRequested?.includes(id) ?? false,
        });
      }
      case 'complete': {
        knownFields(body, ['token', 'result']);
        await completeJob(client, id, token, body.result);
        return jsonReply(200, { id, outcome: 'completed' });
      }
      case 'fail': {
        knownFields(body, ['token', 'error', 'retryInMs', 'unrecoverable']);
        const error = readError(body.error);
        const unrecoverable = boolField(body, 'unrecoverable');
        const retryInMs =
          body.retryInMs === undefined || body.retryInMs === null
            ? null
            : intField(body, 'retryInMs', 0, 365 * 24 * 3_600_000, 0);
        const job = await heldJob(client, id, token);
        if (job.cancelRequested === true) return refusedSettle(client, job, token);
        // The engine's rule, with this API's `retry` as the type's policy.
        const { willRetry, delayMs } = decideRetry(
          job,
          { unrecoverable, delayMs: retryInMs },
          typePolicy,
        );
        const lost = await failBatched({
          ...refOf(job),
          error,
          deadletter: !willRetry,
          retryDelayMs: delayMs,
        });
        if (lost) return refusedSettle(client, job, token);
        leased.delete(id);
        if (!willRetry) await children.ended(job);
        metrics.job(willRetry ? 'retried' : 'deadlettered', client.name);
        tracing?.runEnded(job, willRetry ? 'retried' : 'deadletter', clock.now(), error);
        if (willRetry && delayMs === 0) waiters.wakeAll();
        return jsonReply(200, {
          id,
          outcome: willRetry ? 'retry' : 'deadletter',
          retryInMs: willRetry ? delayMs : null,
          retriesLeft: willRetry ? job.retriesLeft - 1 : 0,
        });
      }
      default: {
        knownFields(body, ['token']);
        const job = await heldJob(client, id, token);
        if (job.cancelRequested === true) return refusedSettle(client, job, token);
        if (await releaseBatched(refOf(job))) return refusedSettle(client, job, token);
        leased.delete(id);
        metrics.job('released', client.name);
        tracing?.runEnded(job, 'released', clock.now());
        waiters.wakeAll();
        return jsonReply(200, { id, outcome: 'released' });
      }
    }
  }

  // ---- dispatch ----

  async function route(request: Incoming, at: OperationAt): Promise<Reply> {
    const { operation, known } = at;
    if (!known) {
      throw new ProblemError('not-found', `there is no operation at ${request.path.slice(0, 200)}`);
    }
    if (request.method.toUpperCase() !== known.method) {
      throw new ProblemError('method-not-allowed', `${known.path} takes ${known.method}`, {
        allow: known.method,
      });
    }
    switch (operation) {
      case 'openapi':
        return jsonReply(200, openApiDocument(request.base));
      case 'health': {
        try {
          await store.now();
          return jsonReply(200, { status: 'ok', store: store.name });
        } catch (error) {
          logger.warn('[@jobs/http] health check: the store does not answer', { error });
          throw new ProblemError('unavailable', `the ${store.name} store does not answer`);
        }
      }
      case 'metrics': {
        return {
          status: 200,
          headers: { 'content-type': 'text/plain; version=0.0.4', 'cache-control': 'no-store' },
          body: metrics.render(waiters.size),
        };
      }
    }
    // Everything else needs a client: authentication before the body is read.
    const client = authenticate(request.header('authorization'));
    if (client === null) {
      throw new ProblemError(
        'unauthorized',
        request.header('authorization') !== null
          ? 'the bearer token is not one this API knows'
          : 'send a bearer token: Authorization: Bearer <token>',
        { 'www-authenticate': 'Bearer' },
      );
    }
    const body = await readJsonBody(request, maxBodyBytes);
    if (operation === 'acquire') return acquire(client, body, request.signal);
    if (operation === 'completeMany') return completeMany(client, body);
    const id = decodedSegment(at.jobId as string);
    if (id === null || !isJobId(id))
      throw new ProblemError('bad-request', 'the job id in the path is not a job id');
    return jobAction(client, id, operation, body);
  }

  async function respond(request: Incoming): Promise<Reply> {
    const at = operationAt(request.path);
    const span = tracing?.requestStarted(request, at.known?.path ?? null);
    let response: Reply;
    try {
      response = await route(request, at);
    } catch (error) {
      if (error instanceof ProblemError) response = problemReply(error);
      else {
        logger.error('[@jobs/http] request failed', {
          method: request.method,
          path: request.path,
          error,
        });
        response = problemReply(
          new ProblemError('internal', 'the request failed on the server (logged there)'),
        );
      }
    }
    metrics.request(at.operation, response.status);
    span?.end(response.status);
    return response;
  }

  return {
    async fetch(request: Request): Promise<Response> {
      const basePath = configuredBase ?? '';
      const { pathname } = new URL(request.url);
      if (basePath !== '' && pathname !== basePath && !pathname.startsWith(`${basePath}/`)) {
        return toResponse(
          problemReply(new ProblemError('not-found', 'there is nothing at this address')),
        );
      }
      const reply = await respond({
        method: request.method,
        path: pathname.slice(basePath.length) || '/',
        base: basePath,
        header: (name) => request.headers.get(name),
        text: (maxBytes) => readRequestText(request, maxBytes),
        signal: request.signal,
      });
      return toResponse(reply);
    },

    handler(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void {
      const mounted = (req as { baseUrl?: unknown }).baseUrl;
      const raw = req.url ?? '/';
      let basePath: string;
      let rest: string;
      if (typeof mounted === 'string') {
        basePath = configuredBase ?? normalizeBase(mounted);
        rest = raw;
      } else {
        basePath = configuredBase ?? '';
        const under =
          basePath === '' ||
          raw === basePath ||
          raw.startsWith(`${basePath}/`) ||
          raw.startsWith(`${basePath}?`);
        if (!under) {
          if (next) next();
          else
            writeReply(
              problemReply(new ProblemError('not-found', 'there is nothing at this address')),
              res,
            );
          return;
        }
        rest = raw.slice(basePath.length);
      }
      if (!rest.startsWith('/')) rest = `/${rest}`;
      // A worker that hangs up ends its long-poll (and gets nothing it would never see).
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const request = nodeIncoming(req, basePath, rest, gone.signal);
      respond(request)
        .then((response) => {
          if (!req.complete) {
            // Refused before its body was read (413, 401): drain a bounded rest, so the client
            // reads this answer instead of a reset connection; beyond that, hang up.
            res.setHeader('connection', 'close');
            let drained = 0;
            req.removeAllListeners('data');
            req.on('data', (chunk: Buffer) => {
              drained += chunk.length;
              if (drained > 16 * maxBodyBytes) req.socket.destroy();
            });
            req.resume();
          }
          writeReply(response, res);
        })
        .catch((error: unknown) => {
          logger.error('[@jobs/http] request failed', { error });
          if (!res.headersSent) res.statusCode = 500;
          res.end();
        });
    },

    close(): void {
      closed = true;
      waiters.close();
    },
  };
}

const COMPLETION_FIELDS = ['id', 'token', 'result'];

/** One completion a request names: `{ id, token, result? }`. */
interface CompletionItem {
  id: string;
  token: string;
  result: unknown;
}

/** A completion's answer: completed, or its own problem. */
type CompletionResult =
  | { id: string; outcome: 'completed' }
  | { id: string; problem: ProblemError['problem'] };

/** A completion checked and ready to write: the `index`th the request named. */
interface PreparedCompletion {
  index: number;
  job: Job;
  completion: JobCompletion;
}

/**
 * Completions checked and ready to write; `results` holds each named one's answer by its
 * place in the request, the refused ones' already given.
 */
interface PreparedCompletions {
  ready: PreparedCompletion[];
  results: (CompletionResult | null)[];
}

/**
 * The `{ id, token, result? }` entries of a list of completions (`field` names it in errors):
 * `min` to MAX_ACQUIRE of them, each job once.
 */
function readCompletions(items: unknown, field: string, min = 0): CompletionItem[] {
  if (!Array.isArray(items) || items.length < min || items.length > MAX_ACQUIRE) {
    throw new ProblemError(
      'bad-request',
      `${field} must list ${min} to ${MAX_ACQUIRE} { id, token, result? }`,
    );
  }
  const name = field.replace(/"/g, '');
  const ids = new Set<string>();
  const checked: CompletionItem[] = new Array(items.length);
  for (let i = 0; i < items.length; i++) {
    const item: unknown = items[i];
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      throw new ProblemError('bad-request', `${name}[${i}] must be { id, token, result? }`);
    }
    const entry = item as Record<string, unknown>;
    for (const key in entry) {
      if (key !== 'id' && key !== 'token' && key !== 'result') {
        knownFields(entry, COMPLETION_FIELDS);
      }
    }
    const id = stringField(entry, 'id', 19);
    if (!isJobId(id)) throw new ProblemError('bad-request', `${name}[${i}].id is not a job id`);
    ids.add(id);
    checked[i] = { id, token: stringField(entry, 'token', 200), result: entry.result };
  }
  if (ids.size !== checked.length) {
    throw new ProblemError('bad-request', `${field} names a job twice`);
  }
  return checked;
}

/** The operation a request path names, if any; for a job's action, its id as in the path. */
interface OperationAt {
  /** The route's `operationId`, or `unknown`. */
  operation: string;
  known: WorkerApiRoute | undefined;
  jobId: string | null;
}

function operationAt(path: string): OperationAt {
  const jobPath = /^\/jobs\/([^/]+)\/([a-z]+)$/.exec(path);
  const operation =
    jobPath && JOB_ACTIONS.has(jobPath[2] as string)
      ? (jobPath[2] as string)
      : (WORKER_API_ROUTES.find((r) => r.path === path)?.operationId ?? 'unknown');
  return {
    operation,
    known: WORKER_API_ROUTES.find((r) => r.operationId === operation),
    jobId: jobPath?.[1] ?? null,
  };
}

/** The `{ message, stack }` a job keeps, from a fail call's `error` (a string or an object). */
function readError(value: unknown): { message: string; stack: string | null } {
  if (typeof value === 'string' && value.length > 0) return recordableError(value, null);
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const { message, stack } = value as { message?: unknown; stack?: unknown };
    if (
      typeof message === 'string' &&
      message.length > 0 &&
      (stack === undefined || stack === null || typeof stack === 'string')
    ) {
      return recordableError(message, typeof stack === 'string' ? stack : null);
    }
  }
  throw new ProblemError(
    'bad-request',
    '"error" must be a non-empty string or { "message": string, "stack"?: string }',
  );
}

/** A node request as the API reads it; its body read straight from the socket, bounded. */
function nodeIncoming(
  req: IncomingMessage,
  base: string,
  rest: string,
  signal: AbortSignal,
): Incoming {
  const query = rest.indexOf('?');
  const path = (query === -1 ? rest : rest.slice(0, query)) || '/';
  return {
    method: req.method ?? 'GET',
    path,
    base,
    header(name) {
      const value = req.headers[name.toLowerCase()];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(', ') : value;
    },
    async text(maxBytes) {
      const parsed = (req as { body?: unknown }).body;
      if (parsed !== undefined && parsed !== null && !req.readable) {
        // A body parser (express.json) already read it.
        const text =
          typeof parsed === 'string'
            ? parsed
            : Buffer.isBuffer(parsed)
              ? parsed.toString('utf8')
              : JSON.stringify(parsed);
        if (Buffer.byteLength(text, 'utf8') > maxBytes) throw tooLarge(maxBytes);
        return text;
      }
      const declared = Number(req.headers['content-length'] ?? Number.NaN);
      if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);
      if (req.readableEnded) return '';
      return new Promise<string>((resolve, reject) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const onData = (chunk: Buffer): void => {
          size += chunk.length;
          if (size > maxBytes) {
            cleanup();
            req.pause();
            reject(tooLarge(maxBytes));
            return;
          }
          chunks.push(chunk);
        };
        const onEnd = (): void => {
          cleanup();
          resolve(Buffer.concat(chunks).toString('utf8'));
        };
        const onError = (error: Error): void => {
          cleanup();
          reject(error);
        };
        const cleanup = (): void => {
          req.off('data', onData);
          req.off('end', onEnd);
          req.off('error', onError);
        };
        req.on('data', onData);
        req.on('end', onEnd);
        req.on('error', onError);
      });
    },
    signal,
  };
}

function writeReply(reply: Reply, res: ServerResponse): void {
  res.writeHead(reply.status, reply.headers);
  res.end(reply.body);
}

/** A path segment with its `%` escapes decoded, or null when an escape is malformed (`%zz`). */
function decodedSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}
