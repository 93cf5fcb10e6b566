/**
 * The TypeScript client (`@jobs/http/client`) against a real API over loopback: the work loop
 * runs each job once with heartbeats and progress; a cancel request aborts its handler; a
 * handler error becomes a failed attempt; a lease lost stops the handler without settling.
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
      clients: [{ token, types: ['echo', 'hang', 'boom'] }],
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
