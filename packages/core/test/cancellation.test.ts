import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  JobsError,
  MAX_PROGRESS_BYTES,
  MemoryJobStore,
  NotFoundError,
  ValidationError,
} from '../src/index.js';
import { engine, sleep, waitFor } from './helpers.js';

// Leases of at least 1 s where a renewal must land: the machine may be loaded.
const LEASE_MS = 1_200;

describe('admin.cancel', () => {
  it('removes a waiting job at once and records it as cancelled; a second cancel says finished', async () => {
    const store = new MemoryJobStore();
    const client = engine({ store });
    const job = await client.enqueue('later', {}, { delayMs: 60_000 });
    expect(await client.admin.cancel(job.id)).toBe('cancelled');
    expect(await store.getJob(job.id)).toBeNull();
    const record = await client.admin.getJob(job.id);
    expect(record).toMatchObject({ state: 'finished', outcome: 'cancelled' });
    expect(await client.admin.cancel(job.id)).toBe('finished');
  });

  it('throws NotFoundError for an unknown id, and a clear error on a store that cannot cancel', async () => {
    const store = new MemoryJobStore();
    const client = engine({ store });
    await expect(client.admin.cancel('999')).rejects.toThrow(NotFoundError);
    const plain = new MemoryJobStore();
    Object.assign(plain, { cancellation: undefined });
    const other = engine({ store: plain });
    await expect(other.admin.cancel('1')).rejects.toThrow(/cannot cancel jobs/);
    await expect(other.admin.cancel('1')).rejects.toBeInstanceOf(JobsError);
  });

  it('aborts a running handler with a CancelledError at its next renewal; the job ends cancelled, never retried', async () => {
    const store = new MemoryJobStore();
    let runs = 0;
    let reason: unknown = null;
    const worker = engine({
      store,
      leaseMs: LEASE_MS,
      handlers: {
        long: async (_job, ctx) => {
          runs += 1;
          await new Promise<void>((resolve) =>
            ctx.signal.addEventListener('abort', () => resolve()),
          );
          reason = ctx.signal.reason;
          throw ctx.signal.reason;
        },
      },
    });
    const cancelled: string[] = [];
    const failed: string[] = [];
    worker.on('cancelled', ({ job }) => cancelled.push(job.id));
    worker.on('failed', ({ job }) => failed.push(job.id));
    await worker.start();
    const job = await worker.enqueue('long', {}, { retries: 5 });
    await waitFor(() => runs === 1, 'the handler to start');
    expect(await worker.admin.cancel(job.id)).toBe('requested');
    expect((await store.getJob(job.id))?.cancelRequested).toBe(true);
    await waitFor(() => cancelled.length === 1, 'the cancelled event');
    expect(reason).toBeInstanceOf(CancelledError);
    expect(await store.getJob(job.id)).toBeNull();
    expect(await worker.admin.getJob(job.id)).toMatchObject({ outcome: 'cancelled' });
    await sleep(LEASE_MS / 2);
    expect(runs).toBe(1);
    expect(failed).toEqual([]);
  });

  it('cancels a handler that returns successfully after the cancel request: cancellation wins before completion', async () => {
    const store = new MemoryJobStore();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const worker = engine({
      store,
      leaseMs: LEASE_MS,
      handlers: { work: () => gate },
    });
    const outcomes: string[] = [];
    worker.on('cancelled', () => outcomes.push('cancelled'));
    worker.on('completed', () => outcomes.push('completed'));
    await worker.start();
    const job = await worker.enqueue('work', {});
    await waitFor(async () => (await store.getJob(job.id))?.state === 'running', 'running');
    expect(await worker.admin.cancel(job.id)).toBe('requested');
    release(); // returns before the renewal tells it: the store refuses the completion
    await waitFor(() => outcomes.length > 0, 'an outcome');
    expect(outcomes).toEqual(['cancelled']);
    expect(await worker.admin.getJob(job.id)).toMatchObject({ outcome: 'cancelled' });
  });
});

describe('ctx.progress', () => {
  it('is written with the heartbeat, readable through getJob, emitted, and kept in history', async () => {
    const store = new MemoryJobStore();
    let finish: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const worker = engine({
      store,
      leaseMs: LEASE_MS,
      handlers: {
        report: async (_job, ctx) => {
          ctx.progress({ done: 1, total: 3 });
          await done;
          ctx.progress({ done: 3, total: 3 });
        },
      },
    });
    const events: unknown[] = [];
    worker.on('progress', ({ progress }) => events.push(progress));
    await worker.start();
    const job = await worker.enqueue('report', {});
    await waitFor(
      async () => ((await store.getJob(job.id))?.progress ?? null) !== null,
      'the heartbeat to write progress',
    );
    expect((await worker.admin.getJob(job.id))?.progress).toEqual({ done: 1, total: 3 });
    finish();
    await waitFor(async () => (await store.getJob(job.id)) === null, 'completion');
    // The last value, reported after the last heartbeat, is written before the job settles.
    expect(await worker.admin.getJob(job.id)).toMatchObject({
      outcome: 'completed',
      progress: { done: 3, total: 3 },
    });
    expect(events).toEqual([
      { done: 1, total: 3 },
      { done: 3, total: 3 },
    ]);
  });

  it('rejects values that are not JSON or larger than MAX_PROGRESS_BYTES, with a ValidationError', async () => {
    const store = new MemoryJobStore();
    const errors: unknown[] = [];
    const worker = engine({
      store,
      handlers: {
        bad: (_job, ctx) => {
          for (const value of [() => 1, Number.NaN, 'x'.repeat(MAX_PROGRESS_BYTES)]) {
            try {
              ctx.progress(value);
            } catch (error) {
              errors.push(error);
            }
          }
        },
      },
    });
    await worker.start();
    const job = await worker.enqueue('bad', {});
    await waitFor(async () => (await store.getJob(job.id)) === null, 'completion');
    expect(errors).toHaveLength(3);
    for (const error of errors) expect(error).toBeInstanceOf(ValidationError);
  });
});
