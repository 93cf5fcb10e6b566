/**
 * Batch handlers (`handlers: { t: { batch: { size, waitMs }, handler: (jobs, ctx) => outcomes } }`)
 * on the memory store: batches respect their size and the slots, each job settles as a single
 * run would (partial failures, a thrown error, a wrong-length answer, a cancel of one job, run
 * hooks), exclusive scopes hold, a lone job is not held back, and the options are checked.
 */
import { describe, expect, it } from 'vitest';
import {
  type BatchContext,
  CancelledError,
  type HandlersOf,
  type Job,
  type JobEngine,
  type Logger,
  MemoryJobStore,
  silentLogger,
  UnrecoverableError,
  ValidationError,
} from '../src/index.js';
import { engine, waitFor } from './helpers.js';

// Leases of at least 1 s where a renewal must land: the machine may be loaded.
const LEASE_MS = 1_200;

/** A batch handler that records each call's job ids and answers with `answer`. */
function recorder(
  answer: (jobs: Job[], ctx: BatchContext) => unknown = (jobs) => jobs.map(() => 'ok'),
) {
  const calls: string[][] = [];
  const handler = async (jobs: Job[], ctx: BatchContext) => {
    calls.push(jobs.map((job) => job.id));
    return (await answer(jobs, ctx)) as unknown[];
  };
  return { calls, handler };
}

async function finished(e: JobEngine, id: string) {
  return e.admin.getJob(id);
}

describe('batch handlers: options', () => {
  const store = new MemoryJobStore();
  const make = (batch: unknown) =>
    engine({
      store,
      logger: silentLogger,
      handlers: { index: { batch, handler: async (jobs: Job[]) => jobs } } as never,
    });

  it('size must be a whole number from 1 to 1000, waitMs from 0 to 60000, naming the field', () => {
    for (const size of [0, 1001, 1.5, '10', undefined]) {
      expect(() => make({ size })).toThrow(ValidationError);
      expect(() => make({ size })).toThrow(/handlers\.index\.batch\.size/);
    }
    for (const waitMs of [-1, 60_001, 0.5, '20']) {
      expect(() => make({ size: 10, waitMs })).toThrow(/handlers\.index\.batch\.waitMs/);
    }
    expect(() => make({ size: 1000, waitMs: 60_000 })).not.toThrow();
    expect(() => make({ size: 1, waitMs: 0 })).not.toThrow();
  });

  it('batch must be an object of known options', () => {
    expect(() => make(10)).toThrow(/handlers\.index\.batch: must be an object/);
    expect(() => make(null)).toThrow(/handlers\.index\.batch: must be an object/);
    expect(() => make({ size: 10, max: 3 })).toThrow(/handlers\.index\.batch\.max: unknown option/);
  });

  it('a batch size over concurrency is allowed with a warning: each job of a batch takes a slot', () => {
    const warnings: string[] = [];
    const logger: Logger = {
      debug() {},
      info() {},
      warn: (message) => void warnings.push(message),
      error() {},
    };
    engine({
      store,
      concurrency: 4,
      logger,
      handlers: { index: { batch: { size: 10 }, handler: async (jobs: Job[]) => jobs } },
    });
    expect(warnings.join('\n')).toMatch(/handlers\.index\.batch\.size is 10, over concurrency 4/);
  });

  it('types: a typed job map marks batch types, whose handler parameters are typed', () => {
    type Jobs = {
      mail: { payload: { to: string }; result: number };
      index: { payload: { doc: string }; result: boolean; batch: true };
    };
    const handlers: HandlersOf<Jobs> = {
      mail: { retries: 1, handler: async (job, ctx) => job.payload.to.length + ctx.attempt },
      index: {
        batch: { size: 2 },
        handler: async (jobs, ctx) =>
          jobs.map((job) => !ctx.signalOf(job).aborted && job.payload.doc !== ''),
      },
    };
    expect(Object.keys(handlers)).toEqual(['mail', 'index']);
  });
});

describe('batch handlers: running', () => {
  it('gives each call at most size jobs, in acquisition order, and each job its own result', async () => {
    const store = new MemoryJobStore();
    const { calls, handler } = recorder((jobs) =>
      jobs.map((job) => (job.payload as { n: number }).n * 10),
    );
    const e = engine({
      store,
      concurrency: 10,
      handlers: { index: { batch: { size: 3, waitMs: 50 }, handler } },
    });
    const jobs = await e.enqueueMany(
      Array.from({ length: 7 }, (_, n) => ({ type: 'index', payload: { n } })),
    );
    const completed: string[] = [];
    e.on('completed', ({ job }) => completed.push(job.id));
    await e.start();
    await waitFor(() => completed.length === 7, 'all 7 jobs completed');
    expect(Math.max(...calls.map((c) => c.length))).toBe(3);
    expect(calls.flat().sort()).toEqual(jobs.map((j) => j.id).sort());
    expect(calls.flat()).toEqual(jobs.map((j) => j.id));
    for (const [n, job] of jobs.entries()) {
      expect(await finished(e, job.id)).toMatchObject({
        outcome: 'completed',
        result: n * 10,
        attempts: 1,
      });
    }
  });

  it('a batch holds at most concurrency jobs (each takes a slot), and is called at once when no slot is left', async () => {
    const store = new MemoryJobStore();
    const { calls, handler } = recorder();
    const e = engine({
      store,
      concurrency: 2,
      logger: silentLogger,
      // A wait no test outlives: the batches are called because no slot is free.
      handlers: { index: { batch: { size: 5, waitMs: 60_000 }, handler } },
    });
    await e.enqueueMany(Array.from({ length: 4 }, () => ({ type: 'index', payload: {} })));
    await e.start();
    await waitFor(() => calls.flat().length === 4, 'all 4 jobs called');
    expect(calls.map((c) => c.length)).toEqual([2, 2]);
  });

  it('a lone job is called alone after waitMs, not held until the batch fills', async () => {
    const store = new MemoryJobStore();
    const { calls, handler } = recorder();
    const e = engine({
      store,
      logger: silentLogger,
      handlers: { index: { batch: { size: 100, waitMs: 30 }, handler } },
    });
    await e.start();
    const [first] = await e.enqueueMany([{ type: 'index', payload: {} }]);
    await waitFor(() => calls.length === 1, 'the lone job called');
    const [second] = await e.enqueueMany([{ type: 'index', payload: {} }]);
    await waitFor(() => calls.length === 2, 'the second job called');
    expect(calls).toEqual([[first?.id], [second?.id]]);
  });

  it('stop() calls a batch being filled at once: its started jobs complete, never orphaned', async () => {
    const store = new MemoryJobStore();
    const { calls, handler } = recorder();
    const e = engine({
      store,
      logger: silentLogger,
      // A wait no test outlives: only stop() can call this batch.
      handlers: { index: { batch: { size: 10, waitMs: 60_000 }, handler } },
    });
    const [job] = await e.enqueueMany([{ type: 'index', payload: {} }]);
    await e.start();
    await waitFor(() => e.snapshot().executing === 1, 'the job joined its batch');
    expect(calls).toEqual([]);
    await e.stop({ timeoutMs: 10_000 });
    expect(calls).toEqual([[job?.id]]);
    expect(await finished(e, job?.id as string)).toMatchObject({ outcome: 'completed' });
  });

  it('outcomes settle per job: a result completes, an Error fails under its retry rule, an UnrecoverableError dead-letters', async () => {
    const store = new MemoryJobStore();
    const { handler } = recorder((jobs) =>
      jobs.map((job) => {
        const kind = (job.payload as { kind: string }).kind;
        if (kind === 'fail') return new Error('flaky remote');
        if (kind === 'fatal') return new UnrecoverableError('bad document');
        return { indexed: true };
      }),
    );
    const e = engine({ store, handlers: { index: { batch: { size: 10, waitMs: 50 }, handler } } });
    const events: string[] = [];
    e.on('completed', ({ job }) => events.push(`completed:${job.id}`));
    e.on('failed', ({ job, willRetry }) => events.push(`failed:${job.id}:${willRetry}`));
    e.on('deadlettered', ({ job }) => events.push(`deadlettered:${job.id}`));
    const [ok, fail, fatal] = await e.enqueueMany([
      { type: 'index', payload: { kind: 'ok' } },
      { type: 'index', payload: { kind: 'fail' }, options: { retries: 2 } },
      { type: 'index', payload: { kind: 'fatal' }, options: { retries: 2 } },
    ]);
    await e.start();
    await waitFor(() => events.length === 4, 'three jobs settled');
    expect(events.sort()).toEqual(
      [
        `completed:${ok?.id}`,
        `failed:${fail?.id}:true`,
        `failed:${fatal?.id}:false`,
        `deadlettered:${fatal?.id}`,
      ].sort(),
    );
    expect(await finished(e, ok?.id as string)).toMatchObject({
      outcome: 'completed',
      result: { indexed: true },
    });
    const retried = await store.getJob(fail?.id as string);
    expect(retried).toMatchObject({ state: 'timer', attempts: 1, retriesLeft: 1 });
    expect(retried?.lastError?.message).toBe('flaky remote');
    const dead = await store.getJob(fatal?.id as string);
    expect(dead).toMatchObject({ state: 'deadletter' });
    expect(dead?.lastError?.message).toBe('bad document');
  });

  it('a thrown error fails every job of the batch, each under its own retry rule', async () => {
    const store = new MemoryJobStore();
    const { calls, handler } = recorder(() => {
      throw new Error('bulk endpoint down');
    });
    const e = engine({ store, handlers: { index: { batch: { size: 10, waitMs: 50 }, handler } } });
    const failed: { id: string; willRetry: boolean; message: string }[] = [];
    e.on('failed', ({ job, willRetry, error }) =>
      failed.push({ id: job.id, willRetry, message: error.message }),
    );
    const [again, last] = await e.enqueueMany([
      { type: 'index', payload: {}, options: { retries: 1 } },
      { type: 'index', payload: {}, options: { retries: 0 } },
    ]);
    await e.start();
    await waitFor(() => failed.length === 2, 'both jobs failed');
    expect(calls).toHaveLength(1);
    expect(failed.sort((a, b) => a.id.localeCompare(b.id))).toEqual(
      [
        { id: again?.id, willRetry: true, message: 'bulk endpoint down' },
        { id: last?.id, willRetry: false, message: 'bulk endpoint down' },
      ].sort((a, b) => String(a.id).localeCompare(String(b.id))),
    );
    expect((await store.getJob(again?.id as string))?.state).toBe('timer');
    expect((await store.getJob(last?.id as string))?.state).toBe('deadletter');
  });

  it('an answer of the wrong length fails every job of the batch with a clear error', async () => {
    const store = new MemoryJobStore();
    const { handler } = recorder(() => ['only one']);
    const e = engine({ store, handlers: { index: { batch: { size: 10, waitMs: 50 }, handler } } });
    const messages: string[] = [];
    e.on('failed', ({ error }) => messages.push(error.message));
    await e.enqueueMany([
      { type: 'index', payload: {}, options: { retries: 0 } },
      { type: 'index', payload: {}, options: { retries: 0 } },
    ]);
    await e.start();
    await waitFor(() => messages.length === 2, 'both jobs failed');
    expect(messages[0]).toMatch(
      /handlers\.index: a batch handler must return an array of one outcome per job, in order; it returned 1 outcomes for 2 jobs/,
    );
    expect(messages[1]).toBe(messages[0]);
  });

  it('a cancel of one job aborts its own signal only; it ends cancelled, the others complete', async () => {
    const store = new MemoryJobStore();
    let cancelReason: unknown = null;
    let otherAborted: boolean | null = null;
    let called: Job[] = [];
    const { handler } = recorder(async (jobs, ctx) => {
      called = jobs;
      const [target, other] = jobs as [Job, Job];
      const signal = ctx.signalOf(target);
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      cancelReason = signal.reason;
      otherAborted = ctx.signalOf(other).aborted || ctx.signal.aborted;
      return jobs.map(() => 'done');
    });
    const e = engine({
      store,
      leaseMs: LEASE_MS,
      handlers: { index: { batch: { size: 2, waitMs: 1_000 }, handler } },
    });
    const cancelled: string[] = [];
    const completed: string[] = [];
    e.on('cancelled', ({ job }) => cancelled.push(job.id));
    e.on('completed', ({ job }) => completed.push(job.id));
    const [a, b] = await e.enqueueMany([
      { type: 'index', payload: {} },
      { type: 'index', payload: {} },
    ]);
    await e.start();
    await waitFor(() => called.length === 2, 'the batch called');
    expect(await e.admin.cancel(a?.id as string)).toBe('requested');
    await waitFor(() => cancelled.length + completed.length === 2, 'both jobs settled');
    expect(cancelReason).toBeInstanceOf(CancelledError);
    expect(otherAborted).toBe(false);
    expect(cancelled).toEqual([a?.id]);
    expect(completed).toEqual([b?.id]);
    expect(await finished(e, a?.id as string)).toMatchObject({ outcome: 'cancelled' });
    expect(await finished(e, b?.id as string)).toMatchObject({
      outcome: 'completed',
      result: 'done',
    });
  });

  it('a job cancelled while its batch fills is left out of the call and ends cancelled', async () => {
    const store = new MemoryJobStore();
    const { calls, handler } = recorder();
    const e = engine({
      store,
      leaseMs: LEASE_MS,
      logger: silentLogger,
      // A wait no test outlives: stop() calls the batch, after the cancel reached the engine.
      handlers: { index: { batch: { size: 10, waitMs: 60_000 }, handler } },
    });
    const cancelled: string[] = [];
    const completed: string[] = [];
    e.on('cancelled', ({ job }) => cancelled.push(job.id));
    e.on('completed', ({ job }) => completed.push(job.id));
    const [a, b] = await e.enqueueMany([
      { type: 'index', payload: {} },
      { type: 'index', payload: {} },
    ]);
    await e.start();
    await waitFor(() => e.snapshot().executing === 2, 'both jobs joined their batch');
    expect(await e.admin.cancel(a?.id as string)).toBe('requested');
    const leaseAtCancel = (await store.getJob(a?.id as string))?.lockExpiresAt?.getTime() ?? 0;
    await waitFor(
      async () =>
        ((await store.getJob(a?.id as string))?.lockExpiresAt?.getTime() ?? 0) > leaseAtCancel,
      'a renewal after the cancel request',
    );
    await e.stop({ timeoutMs: 10_000 });
    expect(calls).toEqual([[b?.id]]);
    expect(cancelled).toEqual([a?.id]);
    expect(completed).toEqual([b?.id]);
    expect(await finished(e, a?.id as string)).toMatchObject({ outcome: 'cancelled' });
  });

  it('takes only the head of an exclusive scope into a batch; the next starts after it settled', async () => {
    const store = new MemoryJobStore();
    const { calls, handler } = recorder();
    const e = engine({ store, handlers: { index: { batch: { size: 10, waitMs: 50 }, handler } } });
    const [s1, free, s2] = await e.enqueueMany([
      { type: 'index', payload: {}, options: { scope: 'doc-1', exclusive: true } },
      { type: 'index', payload: {} },
      { type: 'index', payload: {}, options: { scope: 'doc-1', exclusive: true } },
    ]);
    await e.start();
    await waitFor(() => calls.flat().length === 3, 'all three jobs called');
    const callOf = (id: string | undefined) => calls.findIndex((c) => c.includes(id as string));
    expect(callOf(s1?.id)).toBeLessThan(callOf(s2?.id));
    expect(calls[0]).toEqual([s1?.id, free?.id]);
  });

  it("each job keeps its own time limit: ctx.signal aborts once every job's has, and each attempt fails with a JobTimeoutError", async () => {
    const store = new MemoryJobStore();
    const reasons: unknown[] = [];
    const { handler } = recorder(async (jobs, ctx) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
      for (const job of jobs) reasons.push(ctx.signalOf(job).reason);
      return jobs.map(() => 'too late');
    });
    const e = engine({
      store,
      handlers: { index: { batch: { size: 2, waitMs: 50 }, timeoutMs: 50, handler } },
    });
    const failed: { id: string; message: string }[] = [];
    e.on('failed', ({ job, error }) => failed.push({ id: job.id, message: error.message }));
    const jobs = await e.enqueueMany([
      { type: 'index', payload: {}, options: { retries: 0 } },
      { type: 'index', payload: {}, options: { retries: 0, timeoutMs: 80 } },
    ]);
    await e.start();
    await waitFor(() => failed.length === 2, 'both jobs failed');
    expect(reasons.map((r) => (r as Error).name)).toEqual(['JobTimeoutError', 'JobTimeoutError']);
    expect(failed.map((f) => f.id).sort()).toEqual(jobs.map((j) => j.id).sort());
    const limitOf = (id: string) => failed.find((f) => f.id === id)?.message;
    expect(limitOf(jobs[0]?.id as string)).toMatch(/ran longer than its time limit of 50 ms/);
    expect(limitOf(jobs[1]?.id as string)).toMatch(/ran longer than its time limit of 80 ms/);
  });

  it('run hooks wrap each job of a batch as they wrap a single run', async () => {
    const store = new MemoryJobStore();
    const { calls, handler } = recorder((jobs) => jobs.map((job) => job.id));
    const e = engine({ store, handlers: { index: { batch: { size: 10, waitMs: 50 }, handler } } });
    const wrapped: string[] = [];
    e.use({
      run: async (job, next) => {
        wrapped.push(job.id);
        return `hooked:${String(await next())}`;
      },
    });
    const [a, b] = await e.enqueueMany([
      { type: 'index', payload: {} },
      { type: 'index', payload: {} },
    ]);
    const completed: string[] = [];
    e.on('completed', ({ job }) => completed.push(job.id));
    await e.start();
    await waitFor(() => completed.length === 2, 'both jobs completed');
    expect(calls).toEqual([[a?.id, b?.id]]);
    expect(wrapped.sort()).toEqual([a?.id, b?.id].sort());
    expect(await finished(e, a?.id as string)).toMatchObject({ result: `hooked:${a?.id}` });
  });

  it('each job of a waiting batch keeps its lease: renewals cover it past one lease', async () => {
    const store = new MemoryJobStore();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { calls, handler } = recorder(async (jobs) => {
      await gate;
      return jobs.map(() => 'late');
    });
    const e = engine({
      store,
      leaseMs: 1_000,
      handlers: { index: { batch: { size: 2, waitMs: 0 }, handler } },
    });
    const lost: string[] = [];
    e.on('lease-lost', ({ job }) => lost.push(job.id));
    const [a, b] = await e.enqueueMany([
      { type: 'index', payload: {} },
      { type: 'index', payload: {} },
    ]);
    await e.start();
    await waitFor(() => calls.flat().length === 2, 'both jobs called');
    const renewedPast = async (id: string, from: Date | null) => {
      const job = await store.getJob(id);
      return (
        job !== null &&
        from !== null &&
        (job.lockExpiresAt?.getTime() ?? 0) > from.getTime() + 1_000
      );
    };
    const startA = (await store.getJob(a?.id as string))?.lockExpiresAt ?? null;
    const startB = (await store.getJob(b?.id as string))?.lockExpiresAt ?? null;
    await waitFor(
      async () =>
        (await renewedPast(a?.id as string, startA)) &&
        (await renewedPast(b?.id as string, startB)),
      'both leases renewed beyond their first expiry',
    );
    release();
    const completed: string[] = [];
    e.on('completed', ({ job }) => completed.push(job.id));
    await waitFor(() => completed.length === 2, 'both jobs completed');
    expect(lost).toEqual([]);
  });
});
