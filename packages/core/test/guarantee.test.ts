/**
 * The guarantee around a lease, on the memory store: a handler starts only after the store
 * records its start and only while its local deadline is ahead; a crash charges only jobs that
 * started; a late acquisition answer starts nothing; a resumed handler sees its abort on its
 * next read of `ctx.signal`; a job of a type this engine does not run is given back, never
 * called.
 */
import { describe, expect, it } from 'vitest';
import {
  type AcquireRequest,
  type EnqueueResult,
  type Job,
  type JobContext,
  type JobStore,
  LockLostError,
  MemoryJobStore,
  type NewJob,
} from '../src/index.js';
import { engine, newJob, sleep, waitFor } from './helpers.js';

/** A store whose calls can be cut off (each rejects) and whose acquisitions can answer late. */
function faultyStore(store: MemoryJobStore) {
  const state = { cut: false, acquireDelayMs: 0, renewalsFail: false, lateAnswers: 0 };
  const proxy = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function' || name === 'subscribe') return value;
      return async (...args: unknown[]) => {
        if (state.cut || (state.renewalsFail && name === 'renewLeases')) {
          throw new Error('cut off');
        }
        const result = await value.apply(target, args);
        if ((name === 'acquire' || name === 'completeAndAcquire') && state.acquireDelayMs > 0) {
          await sleep(state.acquireDelayMs);
          const jobs = Array.isArray(result) ? result : (result as { jobs?: unknown[] }).jobs;
          if ((jobs?.length ?? 0) > 0) state.lateAnswers++;
        }
        return result;
      };
    },
  }) as JobStore;
  return { store: proxy, state };
}

async function enqueueOne(store: JobStore, job: NewJob): Promise<Job> {
  const [result] = await store.enqueue([job]);
  return (result as EnqueueResult).job;
}

/** Blocks the event loop for `ms` (a long synchronous step, or a process that was stopped). */
function freeze(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // busy
  }
}

describe('start marks', () => {
  it('a handler starts only after the store recorded its start; prefetched jobs are not recorded', async () => {
    const store = new MemoryJobStore();
    await store.enqueue(Array.from({ length: 6 }, () => newJob()));
    const seenAtStart: (Date | null)[] = [];
    let waitingUnrecorded = -1;
    const e = engine({
      store,
      concurrency: 1,
      prefetch: 5,
      handlers: {
        work: async (job: Job) => {
          seenAtStart.push((await store.getJob(job.id))?.startedAt ?? null);
          if (waitingUnrecorded < 0) {
            const running = await store.listJobs({ state: 'running', limit: 10, offset: 0 });
            waitingUnrecorded = running.filter((j) => j.startedAt === null).length;
          }
          await sleep(20);
        },
      },
    });
    await e.start();
    await waitFor(() => seenAtStart.length === 6, 'six runs');
    expect(seenAtStart.every((d) => d instanceof Date)).toBe(true);
    // While the first ran, the five others were held (prefetched) and not recorded as started.
    expect(waitingUnrecorded).toBe(5);
  });

  it('a crash charges only the jobs that started: prefetched retries: 0 jobs run later, once, as attempt 1', async () => {
    const memory = new MemoryJobStore();
    const { store, state } = faultyStore(memory);
    await memory.enqueue(Array.from({ length: 8 }, () => newJob({ retries: 0 })));
    const startedByA: string[] = [];
    const a = engine({
      store,
      concurrency: 2,
      prefetch: 6,
      leaseMs: 300,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      handlers: {
        work: async (job: Job, ctx: JobContext) => {
          startedByA.push(job.id);
          // Runs until its process dies (here: until A's own deadline aborts it).
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        },
      },
    });
    await a.start();
    await waitFor(() => startedByA.length === 2, 'A to start two jobs');
    await waitFor(
      async () => (await memory.listJobs({ state: 'running', limit: 10, offset: 0 })).length === 8,
      'A to hold every job',
    );
    // A's process dies: nothing it sends reaches the store any more.
    state.cut = true;
    const runsByB = new Map<string, number[]>();
    const b = engine({
      store: memory,
      concurrency: 4,
      leaseMs: 300,
      handlers: {
        work: async (job: Job, ctx: JobContext) => {
          runsByB.set(job.id, [...(runsByB.get(job.id) ?? []), ctx.attempt]);
        },
      },
    });
    await b.start();
    await waitFor(() => runsByB.size === 6, 'B to run the six that never started', 5_000);
    await sleep(400);
    // The two that started on A ran once and went to the dead-letter area (no retries left).
    const dead = await memory.listJobs({ state: 'deadletter', limit: 10, offset: 0 });
    expect(dead.map((j) => j.id).sort()).toEqual([...startedByA].sort());
    for (const job of dead) expect(job.attempts).toBe(1);
    // The six that never started ran exactly once, as their first attempt.
    for (const [id, attempts] of runsByB) {
      expect(startedByA).not.toContain(id);
      expect(attempts).toEqual([1]);
    }
    // (A's writes land again, so its stop() after the test has nothing left to retry.)
    state.cut = false;
  });

  it('recovers a cancel-requested job whose owner died as cancelled, never retried', async () => {
    const memory = new MemoryJobStore();
    memory.history.configure({ keep: 'all', retentionMs: 60_000 });
    const { store, state } = faultyStore(memory);
    const job = await enqueueOne(memory, newJob({ retries: 0 }));
    let started = false;
    const a = engine({
      store,
      leaseMs: 300,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      handlers: {
        work: async (_job: Job, ctx: JobContext) => {
          started = true;
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        },
      },
    });
    await a.start();
    await waitFor(() => started, 'the job to start');
    state.cut = true;
    expect(await memory.cancellation.cancel(job.id)).toBe('requested');
    const ran: string[] = [];
    const b = engine({
      store: memory,
      leaseMs: 300,
      handlers: { work: async (j) => void ran.push(j.id) },
    });
    await b.start();
    await waitFor(async () => (await memory.history.get(job.id)) !== null, 'the job to end');
    expect(await memory.history.get(job.id)).toMatchObject({ outcome: 'cancelled' });
    expect(ran).toEqual([]);
  });
});

describe('the local deadline', () => {
  it('a late acquisition answer starts nothing: the jobs go back unstarted, their attempt given back', async () => {
    const memory = new MemoryJobStore();
    const { store, state } = faultyStore(memory);
    const job = await enqueueOne(memory, newJob());
    state.acquireDelayMs = 400; // past the 300 ms lease
    const ran: string[] = [];
    const lost: string[] = [];
    const released: string[] = [];
    const a = engine({
      store,
      leaseMs: 300,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      handlers: { work: async (j) => void ran.push(j.id) },
    });
    a.on('lease-lost', ({ job: j }) => lost.push(j.id));
    a.on('released', ({ jobs }) => released.push(...jobs.map((j) => j.id)));
    await a.start();
    // The engine gives the jobs back itself (`released`), or finds its lease taken over
    // (`lease-lost`); or its own lease recovery, run between the lease's end and the late
    // answer (a loaded machine), gave them back first and the release found them gone.
    await waitFor(
      async () =>
        released.length > 0 ||
        lost.length > 0 ||
        (state.lateAnswers > 0 && (await memory.getJob(job.id))?.state === 'async'),
      'the late answer to be handled',
    );
    expect(ran).toEqual([]);
    await a.stop({ timeoutMs: 1_000 });
    const stored = await memory.getJob(job.id);
    // Given back (fenced by its token: nobody else had taken it) with no attempt counted.
    expect(stored).toMatchObject({ state: 'async', attempts: 0, retriesLeft: 3 });
  });

  it('a handler resumed after a freeze past its deadline finds ctx.signal aborted before its next step, even when its own timer runs first', async () => {
    const memory = new MemoryJobStore();
    const { store, state } = faultyStore(memory);
    await memory.enqueue([newJob()]);
    const steps: number[] = [];
    let reason: unknown;
    let runs = 0;
    const e = engine({
      store,
      leaseMs: 300,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      handlers: {
        work: async (_job: Job, ctx: JobContext) => {
          // Only the first run: the job runs again once its lapsed lease was recovered.
          if (++runs > 1) return;
          const { signal } = ctx;
          // A step every 5 ms, checking the signal before each (the contract's pattern).
          for (let i = 0; i < 400; i++) {
            if (signal.aborted) {
              reason = signal.reason;
              return;
            }
            steps.push(i);
            if (i === 3) {
              // The process freezes past the lease (as a SIGSTOP or a stopped VM would), and
              // nothing it sends lands meanwhile (another owner may have taken the job). Its
              // next timer is armed before the freeze: after it, that timer is due at once.
              // (Armed, then frozen in the same turn: a timer to freeze later could run after
              // the step's own on a loaded machine, and step 4 then came before the freeze.)
              state.renewalsFail = true;
              const next = sleep(5);
              freeze(450);
              await next;
              continue;
            }
            await sleep(5);
          }
        },
      },
    });
    await e.start();
    await waitFor(() => reason !== undefined, 'the handler to see its abort', 5_000);
    expect(reason).toBeInstanceOf(LockLostError);
    // Four steps before the freeze, none after it.
    expect(steps).toEqual([0, 1, 2, 3]);
  });
});

describe('types this engine does not run', () => {
  it('a job of another type handed to the engine is given back, never called', async () => {
    const memory = new MemoryJobStore();
    // A store that compares names loosely (as MySQL's PAD SPACE collation did): `w ` for `w`.
    const loose = new Proxy(memory, {
      get(target, name, receiver) {
        if (name === 'acquire') {
          return (request: AcquireRequest) =>
            target.acquire({ ...request, types: [...request.types, 'w '] });
        }
        const value = Reflect.get(target, name, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as JobStore;
    const other = await enqueueOne(memory, newJob({ type: 'w ' }));
    const warnings: string[] = [];
    const called: string[] = [];
    const e = engine({
      store: loose,
      pollIntervalMs: 60_000,
      logger: { debug() {}, info() {}, warn: (m: string) => warnings.push(m), error() {} },
      handlers: { w: async (j) => void called.push(j.type) },
    });
    await e.start();
    await waitFor(
      async () => (await memory.getJob(other.id))?.state === 'timer',
      'the job to be given back',
    );
    await sleep(100);
    expect(called).toEqual([]);
    expect(warnings.filter((w) => w.includes('"w "'))).toHaveLength(1);
    // Back waiting, its attempt not counted, due again only after a poll interval (no hot loop).
    const back = await memory.getJob(other.id);
    expect(back).toMatchObject({ state: 'timer', attempts: 0 });
    expect((back?.dueAt.getTime() ?? 0) - Date.now()).toBeGreaterThan(50_000);
  });
});

describe('debounce keeps the last change', () => {
  it('a change made while the holder runs is run once after it, with the latest payload; never two at once', async () => {
    const store = new MemoryJobStore();
    const runs: { rev: number; start: number; end: number }[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const e = engine({
      store,
      handlers: {
        reindex: async (job: Job) => {
          const start = Date.now();
          if (runs.length === 0) await gate; // the first run is still going while changes arrive
          runs.push({ rev: (job.payload as { rev: number }).rev, start, end: Date.now() });
        },
      },
    });
    await e.start();
    const change = (rev: number) =>
      e.enqueue('reindex', { rev }, { key: 'reindex:doc-1', keyMode: 'debounce', delayMs: 50 });
    await change(1);
    await waitFor(
      async () => (await store.listJobs({ state: 'running', limit: 1, offset: 0 })).length === 1,
      'the first run to start',
    );
    await change(2);
    await change(3);
    release();
    await waitFor(() => runs.length === 2, 'the follow-up to run');
    await sleep(200);
    expect(runs.map((r) => r.rev)).toEqual([1, 3]);
    expect((runs[1] as { start: number }).start).toBeGreaterThanOrEqual(
      (runs[0] as { end: number }).end,
    );
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });
});
