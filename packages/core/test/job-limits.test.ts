/**
 * Per-job and per-type time limits, `ctx.log` lines kept with the job and in history,
 * `engine.result` of failed jobs, and `start()` on a store whose schema is missing.
 */
import { describe, expect, it } from 'vitest';
import {
  type Job,
  type JobContext,
  JobFailedError,
  JobTimeoutError,
  MemoryJobStore,
  ValidationError,
} from '../src/index.js';
import { engine, sleep, waitFor } from './helpers.js';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

describe('time limits', () => {
  it("a run over its type's timeoutMs is aborted and fails with a JobTimeoutError, then retries", async () => {
    const store = new MemoryJobStore();
    const reasons: unknown[] = [];
    let runs = 0;
    const e = engine({
      store,
      logger: quiet,
      retry: { kind: 'fixed', delayMs: 10 },
      handlers: {
        slow: {
          timeoutMs: 100,
          handler: async (_job: Job, ctx: JobContext) => {
            runs += 1;
            if (runs > 1) return 'fast enough';
            await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
            reasons.push(ctx.signal.reason);
            return 'ignored: the attempt already timed out';
          },
        },
      },
    });
    const failures: unknown[] = [];
    e.on('failed', ({ error }) => failures.push(error));
    await e.start();
    const job = await e.enqueue('slow', {}, { retries: 1 });
    await waitFor(async () => (await store.getJob(job.id)) === null, 'the retry to complete');
    expect(reasons[0]).toBeInstanceOf(JobTimeoutError);
    expect(failures).toHaveLength(1);
    expect((failures[0] as { message: string }).message).toMatch(/time limit of 100 ms/);
    expect(runs).toBe(2);
  });

  it("a job's own timeoutMs wins over its type's, and is kept with the job", async () => {
    const store = new MemoryJobStore();
    const e = engine({
      store,
      logger: quiet,
      handlers: {
        work: {
          timeoutMs: 60_000,
          handler: async (_job: Job, ctx: JobContext) => {
            await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          },
        },
      },
    });
    const job = await e.enqueue('work', {}, { timeoutMs: 50, retries: 0 });
    expect((await store.getJob(job.id))?.timeoutMs).toBe(50);
    await e.start();
    await waitFor(async () => (await store.getJob(job.id))?.state === 'deadletter', 'deadletter');
    expect((await store.getJob(job.id))?.lastError?.message).toMatch(/time limit of 50 ms/);
    await expect(e.enqueue('work', {}, { timeoutMs: 0 })).rejects.toBeInstanceOf(ValidationError);
  });
});

describe('ctx.log', () => {
  it('keeps the lines with the job, across its runs, and in history; each line capped', async () => {
    const store = new MemoryJobStore();
    store.history.configure({ keep: 'all', retentionMs: 60_000 });
    const logged: string[] = [];
    let runs = 0;
    const e = engine({
      store,
      leaseMs: 300,
      retry: { kind: 'fixed', delayMs: 10 },
      logger: { ...quiet, info: (m: string) => logged.push(m) },
      handlers: {
        work: async (_job: Job, ctx: JobContext) => {
          runs += 1;
          ctx.log(`run ${runs} started`);
          ctx.log.warn('a warning');
          if (runs === 1) throw new Error('first run fails');
          ctx.log('x'.repeat(5_000));
          return 'ok';
        },
      },
    });
    await e.start();
    const job = await e.enqueue('work', {});
    await waitFor(async () => (await store.history.get(job.id)) !== null, 'the job to finish');
    const record = await store.history.get(job.id);
    const lines = record?.logs?.map((l) => l.message) ?? [];
    expect(lines.slice(0, 5)).toEqual([
      'run 1 started',
      'warn: a warning',
      'run 2 started',
      'warn: a warning',
      `${'x'.repeat(999)}…`,
    ]);
    expect(record?.logs?.every((l) => l.at instanceof Date)).toBe(true);
    expect(logged).toContain('run 2 started');
  });
});

describe('engine.result', () => {
  it('throws a JobFailedError for a dead-lettered job, and times out on one still waiting', async () => {
    const store = new MemoryJobStore();
    const e = engine({
      store,
      logger: quiet,
      handlers: {
        fails: async () => {
          throw new Error('no luck');
        },
      },
    });
    await e.start();
    const job = await e.enqueue('fails', {}, { retries: 0 });
    const failed = await e.result(job, { timeoutMs: 5_000 }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(JobFailedError);
    expect(failed).toMatchObject({ outcome: 'deadletter', error: { message: 'no luck' } });
    const later = await e.enqueue('fails', {}, { delayMs: 60_000 });
    await expect(e.result(later, { timeoutMs: 50 })).rejects.toMatchObject({ code: 'TIMEOUT' });
  });
});

describe('start() on a store whose schema is missing', () => {
  it('fails at once with what verifySchema says, and runs nothing', async () => {
    const store = new MemoryJobStore();
    Object.assign(store, {
      verifySchema: async () => {
        throw new Error('the database has no @jobs tables yet: run migrations first');
      },
    });
    const ran: string[] = [];
    const e = engine({ store, handlers: { work: async (j: Job) => void ran.push(j.id) } });
    await store.enqueue([
      {
        type: 'work',
        payload: {},
        dueAt: null,
        delayMs: 0,
        priority: 0,
        retries: 0,
        scope: null,
        exclusive: false,
        key: null,
        tenantId: null,
        queue: 'default',
        retryPolicy: null,
        schedule: null,
        occurrence: null,
        shard: null,
      },
    ]);
    await expect(e.start()).rejects.toThrow(/run migrations first/);
    await sleep(50);
    expect(ran).toEqual([]);
  });
});
