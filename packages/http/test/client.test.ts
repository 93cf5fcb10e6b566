/**
 * The TypeScript client (`@jobs/http/client`) against a real API over loopback: the work loop
 * runs each job once with heartbeats and progress; completions that finish together go as one
 * request, failures one by one; a cancel request aborts its handler; a handler error becomes a
 * failed attempt; a lease lost stops the handler without settling.
 */
import { JobAdmin, JobEngine, MemoryJobStore } from '@jobs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerClient, WorkerApiError } from '../src/client.js';
import { newToken, type Served, serveApi } from './harness.js';

describe('createWorkerClient', () => {
  const store = new MemoryJobStore();
  const engine = new JobEngine({ store });
  const admin = new JobAdmin(store);
  const token = newToken();
  let served: Served;

  beforeAll(async () => {
    served = await serveApi({
      store,
      clients: [{ token, types: ['echo', 'hang', 'boom', 'together'] }],
      pollMs: 50,
    });
  });
  afterAll(async () => {
    await served.close();
    await store.close();
  });

  it('work() runs each job once, completes it with its result and reports progress', async () => {
    const client = createWorkerClient({ url: served.url, token });
    const jobs = await Promise.all([1, 2, 3, 4, 5].map((n) => engine.enqueue('echo', { n })));
    const stop = new AbortController();
    const seen: number[] = [];
    const loop = client.work(
      ['echo'],
      async (job, ctx) => {
        ctx.progress({ half: true });
        seen.push((job.payload as { n: number }).n);
        if (seen.length === jobs.length) setImmediate(() => stop.abort());
        return { doubled: (job.payload as { n: number }).n * 2 };
      },
      { concurrency: 2, leaseMs: 300, waitMs: 1_000, signal: stop.signal },
    );
    await loop;
    expect(seen.sort()).toEqual([1, 2, 3, 4, 5]);
    for (const job of jobs) expect(await store.getJob(job.id)).toBeNull();
  });

  it('completeAndAcquire() completes the held jobs and acquires the next in one request', async () => {
    const requests: string[] = [];
    const counting: typeof fetch = (input, init) => {
      requests.push(new URL(String(input)).pathname);
      return fetch(input, init);
    };
    const client = createWorkerClient({ url: served.url, token, fetch: counting });
    const jobs = await engine.enqueueMany(
      [1, 2, 3].map((n) => ({ type: 'together', payload: { n } })),
    );
    const first = await client.completeAndAcquire([], { types: ['together'], max: 2 });
    expect(first.results).toEqual([]);
    expect(first.jobs).toHaveLength(2);
    const second = await client.completeAndAcquire(
      first.jobs.map((job) => ({ ...job, result: { ok: true } })),
      { types: ['together'], max: 2 },
    );
    expect(second.results).toEqual(first.jobs.map((job) => ({ id: job.id, outcome: 'completed' })));
    expect(second.jobs).toHaveLength(1);
    const last = await client.completeAndAcquire(second.jobs, { types: ['together'] });
    expect(last.results.map((r) => r.outcome)).toEqual(['completed']);
    expect(last.jobs).toEqual([]);
    for (const job of jobs) expect(await store.getJob(job.id)).toBeNull();
    expect(requests).toEqual(['/acquire', '/acquire', '/acquire']);
  });

  it('work() completes jobs that finish together in one POST /complete; fails go one by one', async () => {
    const requests: string[] = [];
    const counting: typeof fetch = (input, init) => {
      requests.push(new URL(String(input)).pathname);
      return fetch(input, init);
    };
    const client = createWorkerClient({ url: served.url, token, fetch: counting });
    // Five finish at once; the sixth fails (for good: it is not tried again meanwhile).
    const jobs = await engine.enqueueMany(
      [1, 2, 3, 4, 5, 6].map((n) => ({
        type: 'together',
        payload: { n },
        options: { retries: 0 },
      })),
    );
    const failing = jobs.find((job) => (job.payload as { n: number }).n === 6) as (typeof jobs)[0];
    const finishing = jobs.filter((job) => job !== failing);
    const stop = new AbortController();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let started = 0;
    const errors: unknown[] = [];
    const loop = client.work(
      ['together'],
      async (job) => {
        started += 1;
        if (started === jobs.length) open();
        await gate;
        if ((job.payload as { n: number }).n === 6) throw new Error('six');
        return 'ok';
      },
      {
        concurrency: jobs.length,
        leaseMs: 5_000,
        waitMs: 1_000,
        signal: stop.signal,
        onError: (error) => errors.push(error),
      },
    );
    for (;;) {
      const left = await Promise.all(finishing.map((job) => store.getJob(job.id)));
      const failed = await store.getJob(failing.id);
      if (left.every((job) => job === null) && failed?.lastError) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    stop.abort();
    await loop;
    expect(errors).toEqual([]);
    expect((await store.getJob(failing.id))?.state).toBe('deadletter');
    expect((await store.getJob(failing.id))?.lastError?.message).toBe('six');
    // One request completed the five; the failure went on its own.
    const settles = requests.filter((path) => /\/(complete|fail)$/.test(path));
    expect(settles.sort()).toEqual(['/complete', `/jobs/${failing.id}/fail`]);
  });

  it('a cancel request reaches the handler through a heartbeat, and the job ends cancelled', async () => {
    const client = createWorkerClient({ url: served.url, token });
    const job = await engine.enqueue('hang', {});
    const stop = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const aborted = new Promise<string>((resolve) => {
      void client.work(
        ['hang'],
        (_job, ctx) =>
          new Promise((_, reject) => {
            started();
            ctx.signal.addEventListener('abort', () => {
              resolve(String((ctx.signal.reason as Error).message));
              reject(ctx.signal.reason);
            });
          }),
        { leaseMs: 300, waitMs: 1_000, signal: stop.signal },
      );
    });
    await running;
    expect(await admin.cancel(job.id)).toBe('requested');
    expect(await aborted).toMatch(/cancelled/);
    stop.abort();
    // The handler's failure call ends the job as cancelled.
    for (;;) {
      if ((await store.getJob(job.id)) === null) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(
      ((await admin.getJob(job.id)) as { outcome?: string } | null)?.outcome ?? 'gone',
    ).not.toBe('completed');
  });

  it('a handler error fails the attempt; a stale token is a WorkerApiError with leaseLost', async () => {
    const client = createWorkerClient({ url: served.url, token });
    const job = await engine.enqueue('boom', {}, { retries: 0 });
    const [held] = await client.acquire({ types: ['boom'], leaseMs: 5_000 });
    expect(held?.id).toBe(job.id);
    const answer = await client.fail(held as never, { message: 'exploded' });
    expect(answer.outcome).toBe('deadletter');
    const error = await client.complete(held as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkerApiError);
    expect((error as WorkerApiError).leaseLost).toBe(true);
    expect((error as WorkerApiError).kind).toBe('lease-lost');
    expect((await store.getJob(job.id))?.lastError?.message).toBe('exploded');
  });
});
