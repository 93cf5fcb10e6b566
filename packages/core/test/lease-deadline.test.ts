import { describe, expect, it } from 'vitest';
import { LockLostError } from '../src/errors.js';
import { MemoryJobStore } from '../src/memory-store.js';
import type { JobRef, SettleResult } from '../src/store.js';
import { engine, newJob, waitFor } from './helpers.js';

/** A store whose renewals, once `silent`, never answer: a black-holed network. */
class SilentRenewals extends MemoryJobStore {
  silent = false;
  override renewLeases(owner: string, leaseMs: number, jobs: readonly JobRef[]) {
    if (this.silent) return new Promise<SettleResult>(() => {});
    return super.renewLeases(owner, leaseMs, jobs);
  }
}

describe('local lease deadline (invariant 16)', () => {
  it('aborts a handler before its lease ends on the store, though the renewal never answers', async () => {
    const store = new SilentRenewals();
    const leaseMs = 600;
    let abortedAt = 0;
    let reason: unknown = null;
    let leaseEnd = 0;
    const e = engine({
      store,
      leaseMs,
      handlers: {
        long: (_job, ctx) =>
          new Promise<void>((resolve) => {
            ctx.signal.addEventListener('abort', () => {
              abortedAt = Date.now();
              reason = ctx.signal.reason;
              resolve();
            });
          }),
      },
    });
    await e.start();
    const job = await e.enqueue('long', {});
    await waitFor(async () => (await store.getJob(job.id))?.state === 'running', 'job running');
    // Let one renewal land, then cut the renewals off.
    const firstLease = (await store.getJob(job.id))?.lockExpiresAt?.getTime() ?? 0;
    await waitFor(
      async () => ((await store.getJob(job.id))?.lockExpiresAt?.getTime() ?? 0) > firstLease,
      'a renewal',
    );
    store.silent = true;
    leaseEnd = (await store.getJob(job.id))?.lockExpiresAt?.getTime() ?? 0;
    await waitFor(() => abortedAt > 0, 'the handler aborted', 5_000);
    expect(reason).toBeInstanceOf(LockLostError);
    // Aborted while the store still held the lease: no other owner could have taken the job.
    expect(abortedAt).toBeLessThan(leaseEnd);
  });

  it('counts a lease from when the acquiring call was sent, not when it answered', async () => {
    const store = new MemoryJobStore();
    const slowAcquire = store.acquire.bind(store);
    const leaseMs = 600;
    // The acquisition answers after most of the lease has passed.
    store.acquire = async (request) => {
      const jobs = await slowAcquire(request);
      await new Promise((resolve) => setTimeout(resolve, jobs.length > 0 ? 450 : 0));
      return jobs;
    };
    store.renewLeases = () => new Promise<SettleResult>(() => {});
    let abortedAt = 0;
    let leaseEnd = 0;
    const e = engine({
      store,
      leaseMs,
      handlers: {
        long: (job, ctx) =>
          new Promise<void>((resolve) => {
            leaseEnd = job.lockExpiresAt?.getTime() ?? 0;
            ctx.signal.addEventListener('abort', () => {
              abortedAt = Date.now();
              resolve();
            });
          }),
      },
    });
    // Retries left: the lease records its start, so it starts without a renewal (none answers).
    await store.enqueue([newJob({ type: 'long', payload: {}, retries: 1 })]);
    await e.start();
    await waitFor(() => abortedAt > 0, 'the handler aborted', 5_000);
    expect(abortedAt).toBeLessThan(leaseEnd);
  });
});
