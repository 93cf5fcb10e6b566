/**
 * Batch handlers on the store: a real `JobEngine` whose handler takes the jobs of its type in
 * batches (`handlers: { t: { batch: { size, waitMs }, handler: (jobs, ctx) => outcomes } }`).
 * Each job of a batch keeps its own lease and token and settles exactly as a single run would:
 * per-job outcomes, a thrown error or a wrong-length answer failing every job under its own
 * retry rule, a cancel reaching one job, exclusive scopes held across batches, and a lone job
 * called without waiting for the batch to fill. Counts and order are checked, never times.
 */
import {
  type BatchContext,
  CancelledError,
  type EngineOptions,
  type Job,
  JobEngine,
  type JobStore,
  silentLogger,
  UnrecoverableError,
} from '@jobs/core';
import { expect, it } from 'vitest';
import { type Harness, waitFor } from '../harness.js';

/** Leases where a renewal must land in time on a loaded machine: at least 1 s. */
const LEASE_MS = 1_500;
/** How long these tests wait for engines to settle what they ran. */
const SETTLED_MS = 20_000;

type Answer = (jobs: Job[], ctx: BatchContext) => unknown;

/**
 * Starts an engine on `store` whose `index` type runs in batches of `size` (waiting `waitMs`),
 * recording each call's job ids and answering with `answer`; stopped after the test.
 */
async function batchEngine(
  h: Harness,
  store: JobStore,
  batch: { size: number; waitMs?: number },
  answer: Answer = (jobs) => jobs.map(() => 'ok'),
  options: Omit<EngineOptions, 'store' | 'handlers'> = {},
) {
  const calls: string[][] = [];
  const engine = new JobEngine({
    store,
    logger: silentLogger,
    leaseMs: LEASE_MS,
    ...options,
    handlers: {
      index: {
        batch,
        handler: async (jobs: Job[], ctx: BatchContext) => {
          calls.push(jobs.map((job) => job.id));
          return (await answer(jobs, ctx)) as unknown[];
        },
      },
    },
  });
  const settled: { event: string; id: string; message?: string; willRetry?: boolean }[] = [];
  engine.on('completed', ({ job }) => settled.push({ event: 'completed', id: job.id }));
  engine.on('failed', ({ job, error, willRetry }) =>
    settled.push({ event: 'failed', id: job.id, message: error.message, willRetry }),
  );
  engine.on('cancelled', ({ job }) => settled.push({ event: 'cancelled', id: job.id }));
  h.defer(() => engine.stop({ timeoutMs: 1_000 }));
  return { engine, calls, settled };
}

const idsOf = (jobs: readonly Job[]): string[] => jobs.map((job) => job.id);

export function batchHandlersGroup(h: Harness): void {
  it('a batch handler gets at most size jobs per call, in acquisition order, each job completed with its own result', async () => {
    const store = await h.open();
    const { engine, calls, settled } = await batchEngine(
      h,
      store,
      { size: 2, waitMs: 50 },
      (jobs) => jobs.map((job) => (job.payload as { n: number }).n * 10),
    );
    const jobs = await engine.enqueueMany(
      Array.from({ length: 5 }, (_, n) => ({ type: 'index', payload: { n } })),
    );
    await engine.start();
    await waitFor('all 5 jobs completed', async () => settled.length === 5, SETTLED_MS);
    expect(settled.every((s) => s.event === 'completed')).toBe(true);
    expect(Math.max(...calls.map((c) => c.length))).toBe(2);
    expect(calls.flat()).toEqual(idsOf(jobs));
    for (const [n, job] of jobs.entries()) {
      expect(await store.getJob(job.id)).toBeNull();
      if (store.history) {
        expect(await store.history.get(job.id)).toMatchObject({
          outcome: 'completed',
          result: n * 10,
          attempts: 1,
        });
      }
    }
  });

  it('outcomes settle per job: a result completes, an Error is retried under its rule, an UnrecoverableError dead-letters', async () => {
    const store = await h.open();
    const { engine, calls, settled } = await batchEngine(
      h,
      store,
      { size: 10, waitMs: 50 },
      (jobs) =>
        jobs.map((job) => {
          const kind = (job.payload as { kind: string }).kind;
          if (kind === 'fail') return new Error('flaky remote');
          if (kind === 'fatal') return new UnrecoverableError('bad document');
          return { indexed: true };
        }),
    );
    const [ok, fail, fatal] = await engine.enqueueMany([
      { type: 'index', payload: { kind: 'ok' } },
      { type: 'index', payload: { kind: 'fail' }, options: { retries: 2 } },
      { type: 'index', payload: { kind: 'fatal' }, options: { retries: 2 } },
    ]);
    await engine.start();
    await waitFor('the three jobs settled', async () => settled.length === 3, SETTLED_MS);
    expect(calls).toEqual([idsOf([ok, fail, fatal] as Job[])]);
    expect(await store.getJob((ok as Job).id)).toBeNull();
    const retried = await store.getJob((fail as Job).id);
    expect(retried).toMatchObject({ state: 'timer', attempts: 1, retriesLeft: 1 });
    expect(retried?.lastError?.message).toBe('flaky remote');
    const dead = await store.getJob((fatal as Job).id);
    expect(dead?.state).toBe('deadletter');
    expect(dead?.lastError?.message).toBe('bad document');
    expect(settled.find((s) => s.id === fail?.id)).toMatchObject({
      event: 'failed',
      willRetry: true,
    });
    expect(settled.find((s) => s.id === fatal?.id)).toMatchObject({
      event: 'failed',
      willRetry: false,
    });
  });

  it('a thrown error fails every job of the batch, each under its own retry rule', async () => {
    const store = await h.open();
    // Size 2: the call waits for both jobs, however long the start mark of the retries: 0 one
    // takes (a store round trip before it may start; 50 ms were too few on a loaded machine).
    const { engine, calls, settled } = await batchEngine(
      h,
      store,
      { size: 2, waitMs: 5_000 },
      () => {
        throw new Error('bulk endpoint down');
      },
    );
    const [again, last] = await engine.enqueueMany([
      { type: 'index', payload: {}, options: { retries: 1 } },
      { type: 'index', payload: {}, options: { retries: 0 } },
    ]);
    await engine.start();
    await waitFor('both jobs failed', async () => settled.length === 2, SETTLED_MS);
    expect(calls).toHaveLength(1);
    expect(settled.find((s) => s.id === again?.id)).toMatchObject({
      event: 'failed',
      message: 'bulk endpoint down',
      willRetry: true,
    });
    expect(settled.find((s) => s.id === last?.id)).toMatchObject({
      event: 'failed',
      message: 'bulk endpoint down',
      willRetry: false,
    });
    expect((await store.getJob((again as Job).id))?.state).toBe('timer');
    expect((await store.getJob((last as Job).id))?.state).toBe('deadletter');
  });

  it('an answer that is not one outcome per job fails every job of the batch with a clear error', async () => {
    const store = await h.open();
    const { engine, settled } = await batchEngine(h, store, { size: 10, waitMs: 50 }, () => [
      'only one',
    ]);
    const jobs = await engine.enqueueMany([
      { type: 'index', payload: {}, options: { retries: 0 } },
      { type: 'index', payload: {}, options: { retries: 0 } },
    ]);
    await engine.start();
    await waitFor('both jobs failed', async () => settled.length === 2, SETTLED_MS);
    for (const s of settled) {
      expect(s.event).toBe('failed');
      expect(s.message).toMatch(/one outcome per job, in order; it returned 1 outcomes for 2 jobs/);
    }
    for (const job of jobs) expect((await store.getJob(job.id))?.state).toBe('deadletter');
  });

  it('a cancel of one job of a running batch aborts its signal only: it ends cancelled, the other completes', async ({
    skip,
  }) => {
    const store = await h.open();
    if (!store.cancellation) skip('SKIPPED: the store has no `cancellation`');
    let reason: unknown = null;
    let otherAborted: boolean | null = null;
    let called: Job[] = [];
    const { engine, settled } = await batchEngine(
      h,
      store,
      { size: 2, waitMs: 1_000 },
      async (jobs, ctx) => {
        called = jobs;
        const [target, other] = jobs as [Job, Job];
        const signal = ctx.signalOf(target);
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
        reason = signal.reason;
        otherAborted = ctx.signalOf(other).aborted || ctx.signal.aborted;
        return jobs.map(() => 'done');
      },
    );
    const [a, b] = await engine.enqueueMany([
      { type: 'index', payload: {} },
      { type: 'index', payload: {} },
    ]);
    await engine.start();
    await waitFor('the batch called', async () => called.length === 2, SETTLED_MS);
    expect(idsOf(called)).toEqual(idsOf([a, b] as Job[]));
    expect(await engine.admin.cancel((a as Job).id)).toBe('requested');
    await waitFor('both jobs settled', async () => settled.length === 2, SETTLED_MS);
    expect(reason).toBeInstanceOf(CancelledError);
    expect(otherAborted).toBe(false);
    expect(settled.find((s) => s.id === a?.id)?.event).toBe('cancelled');
    expect(settled.find((s) => s.id === b?.id)?.event).toBe('completed');
    if (store.history) {
      expect(await store.history.get((a as Job).id)).toMatchObject({ outcome: 'cancelled' });
      expect(await store.history.get((b as Job).id)).toMatchObject({
        outcome: 'completed',
        result: 'done',
      });
    }
  });

  it('a batch takes only the head of an exclusive scope; the next job of the scope runs in a later batch', async () => {
    const store = await h.open();
    const { engine, calls, settled } = await batchEngine(h, store, { size: 10, waitMs: 50 });
    const [s1, free, s2] = await engine.enqueueMany([
      { type: 'index', payload: {}, options: { scope: 'doc-1', exclusive: true } },
      { type: 'index', payload: {} },
      { type: 'index', payload: {}, options: { scope: 'doc-1', exclusive: true } },
    ]);
    await engine.start();
    await waitFor('all three jobs completed', async () => settled.length === 3, SETTLED_MS);
    const callOf = (job: Job | undefined) => calls.findIndex((c) => c.includes((job as Job).id));
    expect(callOf(s1)).toBe(0);
    expect(calls[0]).toContain((free as Job).id);
    expect(calls[0]).not.toContain((s2 as Job).id);
    expect(callOf(s2)).toBeGreaterThan(callOf(s1));
  });

  it('a lone job is called alone after waitMs, not held until its batch fills', async () => {
    const store = await h.open();
    const { engine, calls } = await batchEngine(h, store, { size: 10, waitMs: 30 });
    await engine.start();
    const first = await engine.enqueue('index', {});
    await waitFor('the lone job called', async () => calls.length === 1, SETTLED_MS);
    const second = await engine.enqueue('index', {});
    await waitFor('the second job called', async () => calls.length === 2, SETTLED_MS);
    expect(calls).toEqual([[first.id], [second.id]]);
  });
}
