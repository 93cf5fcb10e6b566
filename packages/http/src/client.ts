/**
 * `createWorkerClient`: the worker side of `@jobs/http`, on `fetch` alone, so it runs in Node,
 * Deno, Bun and browsers. `work(types, handler)` is the whole loop: long-poll for jobs,
 * heartbeat each one's lease while its handler runs (aborting the handler when the lease is lost
 * or an operator cancels it), then complete or fail it — completions that finish together go as
 * one request. Every call can carry a W3C trace context (`trace`); `work` sends each job's own
 * on its settle calls.
 *
 * @example
 * import { createWorkerClient } from '@jobs/http/client';
 * const client = createWorkerClient({ url: 'http://jobs.internal:8080', token: process.env.TOKEN });
 * const stop = new AbortController();
 * await client.work(['resize-image'], async (job, { signal, progress }) => {
 *   await progress({ step: 1 });
 *   return { ok: true };
 * }, { signal: stop.signal });
 */

/** A job leased to this worker. */
export interface AcquiredJob<P = unknown> {
  id: string;
  type: string;
  payload: P;
  /** This attempt, from 1. */
  attempt: number;
  retriesLeft: number;
  /** The lease's fencing token: every later call names it. */
  token: string;
  /** ISO time; extend before it. */
  leaseExpiresAt: string;
  scope: string | null;
  tenantId: string | null;
  queue: string;
  meta: Record<string, string> | null;
  progress: unknown;
  /** The W3C trace context stored with the job (`meta.traceparent`, from `@jobs/otel`), or null. */
  traceparent: string | null;
  tracestate: string | null;
}

/** A W3C trace context sent as the call's `traceparent` / `tracestate` headers. */
export interface TraceContextHeaders {
  traceparent: string;
  tracestate?: string | null;
}

/** Options every call takes. */
export interface CallOptions {
  /** Sent as headers: the API's request span becomes its child (when the API traces). */
  trace?: TraceContextHeaders | null;
}

export interface AcquireOptions extends CallOptions {
  types?: readonly string[];
  max?: number;
  leaseMs?: number;
  /** Long-poll: wait up to this long for a job. */
  waitMs?: number;
  worker?: string;
  signal?: AbortSignal;
}

export interface FailOptions extends CallOptions {
  retryInMs?: number;
  unrecoverable?: boolean;
}

/** An error answer of the API (problem+json). `kind` is the last part of its `type`. */
export class WorkerApiError extends Error {
  constructor(
    readonly status: number,
    readonly kind: string,
    detail: string,
  ) {
    super(`[@jobs/http] ${status} ${kind}: ${detail}`);
    this.name = 'WorkerApiError';
  }

  /** The lease is gone (409): stop working on the job; its outcome is not this worker's to say. */
  get leaseLost(): boolean {
    return this.status === 409;
  }
}

export interface WorkContext {
  /** Aborts when the lease is lost, the job is cancelled, or the loop is stopped. */
  signal: AbortSignal;
  /** Reports progress (JSON): sent with the next heartbeat. */
  progress(value: unknown): void;
  attempt: number;
}

export interface WorkOptions {
  /** Jobs worked at once. Default 1. */
  concurrency?: number;
  leaseMs?: number;
  /** Long-poll per acquire call. Default 30,000. */
  waitMs?: number;
  worker?: string;
  /** Stops the loop: running handlers are aborted and their jobs released. */
  signal?: AbortSignal;
  /** Called with errors of the loop itself (network, API), before it retries after a pause. */
  onError?: (error: unknown) => void;
}

export interface WorkerClient {
  acquire(options?: AcquireOptions): Promise<AcquiredJob[]>;
  extend(
    job: Pick<AcquiredJob, 'id' | 'token'>,
    options?: { progress?: unknown; leaseMs?: number } & CallOptions,
  ): Promise<{ leaseExpiresAt: string; cancelRequested: boolean }>;
  complete(
    job: Pick<AcquiredJob, 'id' | 'token'>,
    result?: unknown,
    options?: CallOptions,
  ): Promise<void>;
  /**
   * Completes many held jobs in one request (`POST /complete`), each on its own: a job whose
   * lease was lost comes back with its `problem`, the others are completed.
   */
  completeMany(
    jobs: readonly (Pick<AcquiredJob, 'id' | 'token'> & { result?: unknown })[],
    options?: CallOptions,
  ): Promise<
    {
      id: string;
      outcome?: 'completed';
      problem?: { type: string; status: number; detail: string };
    }[]
  >;
  /**
   * Completes `done` and acquires in one request (`POST /acquire` with `complete`): the jobs a
   * worker finished ride on its next acquire — one round trip and, where the store fuses them,
   * one store call. Each completion is answered on its own in `results`, as by `completeMany`.
   *
   * @example
   * let held: AcquiredJob[] = [];
   * for (;;) {
   *   const { jobs } = await client.completeAndAcquire(held.map((job) => ({ ...job, result: run(job) })), { max: 100 });
   *   held = jobs;
   * }
   */
  completeAndAcquire(
    done: readonly (Pick<AcquiredJob, 'id' | 'token'> & { result?: unknown })[],
    options?: AcquireOptions,
  ): Promise<{
    jobs: AcquiredJob[];
    results: Awaited<ReturnType<WorkerClient['completeMany']>>;
  }>;
  fail(
    job: Pick<AcquiredJob, 'id' | 'token'>,
    error: string | { message: string; stack?: string },
    options?: FailOptions,
  ): Promise<{ outcome: 'retry' | 'deadletter'; retryInMs: number | null; retriesLeft: number }>;
  release(job: Pick<AcquiredJob, 'id' | 'token'>, options?: CallOptions): Promise<void>;
  /**
   * Works jobs of `types` with `handler` until `options.signal` aborts. Completions that finish
   * within the same few milliseconds go as one `POST /complete` (a lone one as its job's
   * `complete`); failures go one by one. Each job's settle calls carry its own trace context.
   */
  work(
    types: readonly string[],
    handler: (job: AcquiredJob, ctx: WorkContext) => Promise<unknown>,
    options?: WorkOptions,
  ): Promise<void>;
}

export interface WorkerClientOptions {
  /** The API's base URL, e.g. `http://localhost:8080/workers`. */
  url: string;
  token: string;
  /** A `fetch` of your own (tests, proxies). Default: the global one. */
  fetch?: typeof fetch;
}

export function createWorkerClient(options: WorkerClientOptions): WorkerClient {
  const base = options.url.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  if (typeof options.token !== 'string' || options.token === '') {
    throw new TypeError('[@jobs/http] createWorkerClient: `token` is required');
  }

  async function call<T>(
    path: string,
    body: object,
    trace: TraceContextHeaders | null | undefined,
    signal?: AbortSignal,
  ): Promise<T> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${options.token}`,
      'content-type': 'application/json',
    };
    if (trace?.traceparent) {
      headers.traceparent = trace.traceparent;
      if (trace.tracestate) headers.tracestate = trace.tracestate;
    }
    const response = await doFetch(`${base}${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
    const text = await response.text();
    if (!response.ok) {
      let kind = 'error';
      let detail = text;
      try {
        const problem = JSON.parse(text) as { type?: string; detail?: string };
        kind = problemKind(problem.type);
        detail = String(problem.detail ?? text);
      } catch {
        // not problem+json (a proxy's page): keep the text
      }
      throw new WorkerApiError(response.status, kind, detail);
    }
    return JSON.parse(text) as T;
  }

  const jobPath = (id: string, action: string): string =>
    `/jobs/${encodeURIComponent(id)}/${action}`;

  const client: WorkerClient = {
    async acquire(given = {}) {
      const { signal, trace, ...body } = given;
      const answer = await call<{ jobs: AcquiredJob[] }>('/acquire', body, trace, signal);
      return answer.jobs;
    },
    extend(job, given = {}) {
      const { trace, ...body } = given;
      return call(jobPath(job.id, 'extend'), { token: job.token, ...body }, trace);
    },
    async complete(job, result, given = {}) {
      await call(jobPath(job.id, 'complete'), { token: job.token, result }, given.trace);
    },
    async completeMany(jobs, given = {}) {
      const answer = await call<{ results: Awaited<ReturnType<WorkerClient['completeMany']>> }>(
        '/complete',
        { jobs: jobs.map(({ id, token, result }) => ({ id, token, result })) },
        given.trace,
      );
      return answer.results;
    },
    async completeAndAcquire(done, given = {}) {
      const { signal, trace, ...body } = given;
      const complete = done.map(({ id, token, result }) => ({ id, token, result }));
      const answer = await call<{
        jobs: AcquiredJob[];
        results?: Awaited<ReturnType<WorkerClient['completeMany']>>;
      }>('/acquire', { ...body, complete }, trace, signal);
      return { jobs: answer.jobs, results: answer.results ?? [] };
    },
    fail(job, error, given = {}) {
      const { trace, ...body } = given;
      return call(jobPath(job.id, 'fail'), { token: job.token, error, ...body }, trace);
    },
    async release(job, given = {}) {
      await call(jobPath(job.id, 'release'), { token: job.token }, given.trace);
    },

    async work(types, handler, given = {}) {
      const concurrency = given.concurrency ?? 1;
      const leaseMs = given.leaseMs ?? 30_000;
      const stop = given.signal;
      const running = new Set<Promise<void>>();
      const pause = (ms: number) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          stop?.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
          });
        });
      while (!stop?.aborted) {
        if (running.size >= concurrency) {
          await Promise.race(running);
          continue;
        }
        let jobs: AcquiredJob[];
        try {
          jobs = await client.acquire({
            types,
            max: concurrency - running.size,
            leaseMs,
            waitMs: given.waitMs ?? 30_000,
            ...(given.worker ? { worker: given.worker } : {}),
            ...(stop ? { signal: stop } : {}),
          });
        } catch (error) {
          if (stop?.aborted) break;
          given.onError?.(error);
          await pause(1_000);
          continue;
        }
        for (const job of jobs) {
          const run = runOne(job, handler, leaseMs, stop, given.onError).finally(() =>
            running.delete(run),
          );
          running.add(run);
        }
      }
      await Promise.allSettled(running);
    },
  };

  async function runOne(
    job: AcquiredJob,
    handler: (job: AcquiredJob, ctx: WorkContext) => Promise<unknown>,
    leaseMs: number,
    stop: AbortSignal | undefined,
    onError: ((error: unknown) => void) | undefined,
  ): Promise<void> {
    const abort = new AbortController();
    let lost = false;
    let progress: { value: unknown } | null = null;
    const onStop = (): void => abort.abort(new Error('the worker is stopping'));
    stop?.addEventListener('abort', onStop);
    // Heartbeat every third of the lease; a lost lease or a cancel request aborts the handler.
    const beat = setInterval(
      () => {
        const sent = progress;
        progress = null;
        client
          .extend(job, { leaseMs, ...(sent ? { progress: sent.value } : {}) })
          .then((answer) => {
            if (answer.cancelRequested) abort.abort(new Error('the job was cancelled'));
          })
          .catch((error: unknown) => {
            if (error instanceof WorkerApiError && error.leaseLost) {
              lost = true;
              abort.abort(error);
            } else onError?.(error);
          });
      },
      Math.max(50, Math.floor(leaseMs / 3)),
    );
    try {
      let result: unknown;
      try {
        result = await handler(job, {
          signal: abort.signal,
          attempt: job.attempt,
          progress(value) {
            progress = { value };
          },
        });
      } catch (error) {
        clearInterval(beat);
        if (lost) return;
        if (stop?.aborted && !abort.signal.reason?.message?.includes('cancelled')) {
          await client.release(job, { trace: traceOf(job) }).catch(() => {});
          return;
        }
        const err = error instanceof Error ? error : new Error(String(error));
        await client.fail(
          job,
          { message: err.message || err.name, ...(err.stack ? { stack: err.stack } : {}) },
          { trace: traceOf(job) },
        );
        return;
      }
      clearInterval(beat);
      if (!lost) await completions.add({ job, result });
    } catch (error) {
      if (!(error instanceof WorkerApiError && error.leaseLost)) onError?.(error);
    } finally {
      clearInterval(beat);
      stop?.removeEventListener('abort', onStop);
    }
  }

  /**
   * Completions of `work` that finish within one timer turn (a few ms), sent together: one
   * `POST /complete` for many (each job answered on its own), a lone one as its job's
   * `complete` with its trace context. Each resolves, or rejects as its own call would have.
   */
  const completions = batched<{ job: AcquiredJob; result: unknown }>(async (batch) => {
    if (batch.length === 1) {
      const [{ job, result }] = batch as [{ job: AcquiredJob; result: unknown }];
      await client.complete(job, result, { trace: traceOf(job) });
      return [null];
    }
    const answers = new Map(
      (
        await client.completeMany(
          batch.map(({ job, result }) => ({ id: job.id, token: job.token, result })),
        )
      ).map((answer) => [answer.id, answer]),
    );
    return batch.map(({ job }) => {
      const problem = answers.get(job.id)?.problem;
      return problem
        ? new WorkerApiError(problem.status, problemKind(problem.type), problem.detail)
        : null;
    });
  }, MAX_COMPLETE_BATCH);

  return client;
}

/** The most jobs one `POST /complete` may carry. */
const MAX_COMPLETE_BATCH = 1_000;

/** `lease-lost` from `urn:jobs:http:lease-lost`. */
function problemKind(type: unknown): string {
  return String(type ?? 'error').replace(/^urn:jobs:http:/, '');
}

/** The trace context stored with `job`, as the headers of its calls. */
function traceOf(job: AcquiredJob): TraceContextHeaders | null {
  return job.traceparent ? { traceparent: job.traceparent, tracestate: job.tracestate } : null;
}

/**
 * Items added within one timer turn go to `send` together (at most `max` at a time); `send`
 * answers each item's error, or null. `add` resolves or rejects with its own item's answer.
 */
function batched<T>(
  send: (items: T[]) => Promise<(Error | null)[]>,
  max: number,
): { add(item: T): Promise<void> } {
  let queue: { item: T; resolve(): void; reject(error: unknown): void }[] = [];
  const flush = (): void => {
    const taken = queue;
    queue = [];
    for (let at = 0; at < taken.length; at += max) {
      const part = taken.slice(at, at + max);
      send(part.map((p) => p.item)).then(
        (errors) => {
          part.forEach((p, i) => {
            const error = errors[i];
            if (error) p.reject(error);
            else p.resolve();
          });
        },
        (error: unknown) => {
          for (const p of part) p.reject(error);
        },
      );
    }
  };
  return {
    add(item) {
      return new Promise<void>((resolve, reject) => {
        if (queue.length === 0) setTimeout(flush, 0);
        queue.push({ item, resolve, reject });
      });
    },
  };
}
