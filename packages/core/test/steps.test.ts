/**
 * `ctx.step` in the engine (the stores' side is the conformance `steps` group): names and
 * their counter, steps run side by side all recorded, clear errors on a store without steps or
 * without transactions, and the step list kept in history.
 */
import { describe, expect, it } from 'vitest';
import {
  type Job,
  type JobContext,
  type JobStore,
  JobsError,
  MAX_STEP_RESULT_BYTES,
  MAX_STEPS_BYTES,
  MemoryJobStore,
  ValidationError,
} from '../src/index.js';
import { engine, newJob, waitFor } from './helpers.js';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/** Runs one job of type `work` with `handler` to its end; returns what it threw, if anything. */
async function runOnce(
  store: JobStore,
  handler: (job: Job, ctx: JobContext) => Promise<unknown>,
): Promise<{ id: string; error: unknown }> {
  let error: unknown;
  const e = engine({
    store,
    logger: quiet,
    handlers: {
      work: async (job: Job, ctx: JobContext) => {
        try {
          return await handler(job, ctx);
        } catch (thrown) {
          error = thrown;
          throw thrown;
        }
      },
    },
  });
  await e.start();
  const job = await e.enqueue('work', {}, { retries: 0 });
  await waitFor(async () => {
    const read = await store.getJob(job.id);
    return read === null || read.state === 'deadletter';
  }, 'the job to end');
  return { id: job.id, error };
}

describe('ctx.step', () => {
  it('steps run side by side (Promise.all) are each recorded once, in the order they finished', async () => {
    const store = new MemoryJobStore();
    store.history.configure({ keep: 'all', retentionMs: 60_000 });
    const { id, error } = await runOnce(store, async (_job, ctx) => {
      const slow = ctx.step('slow', () => new Promise((r) => setTimeout(() => r('s'), 30)));
      const fast = ctx.step('fast', () => 'f');
      const again = ctx.step('fast', () => 'f2');
      return Promise.all([slow, fast, again]);
    });
    expect(error).toBeUndefined();
    const record = await store.history.get(id);
    expect(record?.result).toEqual(['s', 'f', 'f2']);
    expect(record?.steps?.map((s) => [s.name, s.result])).toEqual([
      ['fast', 'f'],
      ['fast#2', 'f2'],
      ['slow', 's'],
    ]);
    for (const step of record?.steps ?? []) {
      expect(step.at).toBeInstanceOf(Date);
      expect(step.durationMs).toBeGreaterThanOrEqual(0);
    }
  });

  it("runs stepping at once share checkpoint writes (saveMany while one is under way); each stays fenced: a lost lease's step fails alone", async () => {
    const store = new MemoryJobStore();
    const steps = store.steps;
    const save = steps.save.bind(steps);
    const writes: number[] = [];
    // A store answering after a round trip, with `saveMany` written from `save` (fenced alike).
    steps.save = async (ref, json, tx) => {
      writes.push(1);
      await new Promise((r) => setTimeout(r, 5));
      return save(ref, json, tx);
    };
    let stale: string | null = null;
    steps.saveMany = async (saves) => {
      writes.push(saves.length);
      await new Promise((r) => setTimeout(r, 5));
      const refused: string[] = [];
      for (const one of saves) {
        const token = one.ref.id === stale ? 'stale' : one.ref.token;
        if (!(await save({ id: one.ref.id, token }, one.stepsJson))) refused.push(one.ref.id);
      }
      return refused;
    };
    const lost: string[] = [];
    const e = engine({
      store,
      logger: quiet,
      concurrency: 10,
      handlers: {
        work: async (job: Job, ctx: JobContext) => {
          for (const name of ['a', 'b', 'c']) {
            // The third job's lease is lost before its second checkpoint is written.
            if (name === 'b' && (job.payload as { n: number }).n === 2) stale = job.id;
            await ctx.step(name, () => `${name}${(job.payload as { n: number }).n}`);
          }
        },
      },
    });
    e.on('lease-lost', ({ job }) => lost.push(job.id));
    await e.start();
    const jobs = [];
    for (let n = 0; n < 10; n++) jobs.push(await e.enqueue('work', { n }, { retries: 0 }));
    const others = jobs.filter((_, n) => n !== 2);
    await waitFor(async () => {
      const left = await Promise.all(others.map((job) => store.getJob(job.id)));
      return left.every((job) => job === null) && lost.length > 0;
    }, 'the other runs to end and the third to lose its lease');
    await e.stop();
    // 29 checkpoints (the lost run's second is refused): far fewer writes, none with two of one job.
    expect(writes.reduce((a, b) => a + b, 0)).toBe(29);
    expect(writes.length).toBeLessThan(29);
    expect(Math.max(...writes)).toBeGreaterThan(1);
    expect(lost).toEqual([jobs[2]?.id]);
  });

  it("refuses the step that would make the job's step list larger than MAX_STEPS_BYTES; the ones before it stay", async () => {
    const store = new MemoryJobStore();
    const chunk = 'x'.repeat(MAX_STEP_RESULT_BYTES - 2);
    const fit = Math.floor(MAX_STEPS_BYTES / MAX_STEP_RESULT_BYTES) - 1;
    const { id, error } = await runOnce(store, async (_job, ctx) => {
      for (let i = 0; i <= fit + 1; i++) await ctx.step(`part-${i}`, () => chunk);
    });
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toMatch(/step "part-\d+"/);
    expect((error as Error).message).toMatch(/MAX_STEPS_BYTES/);
    const kept = (await store.getJob(id))?.steps ?? [];
    expect(kept.length).toBeGreaterThanOrEqual(fit);
    expect(kept.length).toBeLessThanOrEqual(fit + 1);
  });

  it("refuses a name that is empty, has a '#' or a character no store keeps, before running anything", async () => {
    const store = new MemoryJobStore();
    let ran = 0;
    for (const name of ['', 'a#2', 'a\u0000b', 'x'.repeat(201)]) {
      const { id, error } = await runOnce(store, async (_job, ctx) => ctx.step(name, () => ran++));
      expect(error).toBeInstanceOf(ValidationError);
      expect((await store.getJob(id))?.steps).toEqual([]);
    }
    expect(ran).toBe(0);
  });

  it("a parked wait's checkpoint names its key and a whole-ms deadline; engine.signal refuses a name with '#' as waitFor does", async () => {
    const store = new MemoryJobStore();
    const e = engine({
      store,
      logger: quiet,
      handlers: {
        work: async (_job: Job, ctx: JobContext) =>
          ctx.waitFor('approval', { key: 'o-1', timeoutMs: 1_000.4 }),
      },
    });
    const job = await e.enqueue('work', {});
    await e.start();
    let parked: Job | null = null;
    await waitFor(async () => {
      parked = await store.getJob(job.id);
      return parked?.state === 'timer' && (parked.steps?.length ?? 0) > 0;
    }, 'the job to park');
    const [wait] = (parked as Job | null)?.steps ?? [];
    const result = wait?.result as { $waitUntil: number; $key: string };
    expect(result.$key).toBe('o-1');
    expect(Number.isInteger(result.$waitUntil)).toBe(true);
    await expect(e.signal('approval#2', { key: 'o-1' })).rejects.toBeInstanceOf(ValidationError);
    await e.stop();
  });

  it('says so clearly on a store without steps, and for transaction: true on a store without transactions', async () => {
    const plain = new MemoryJobStore();
    const noSteps = Object.assign(Object.create(plain) as MemoryJobStore, { steps: undefined });
    let ran = 0;
    const withoutSteps = await runOnce(noSteps, async (_job, ctx) => ctx.step('a', () => ran++));
    expect(withoutSteps.error).toBeInstanceOf(JobsError);
    expect((withoutSteps.error as Error).message).toMatch(/keeps no steps \(it has no `steps`\)/);
    const store = new MemoryJobStore();
    const withoutTx = await runOnce(store, async (_job, ctx) =>
      ctx.step('charge', () => ran++, { transaction: true }),
    );
    expect((withoutTx.error as Error).message).toMatch(/no transactions for steps \(step "charge"/);
    expect(ran).toBe(0);
  });

  it("a step after the run's signal was aborted (its time limit) does not run", async () => {
    const store = new MemoryJobStore();
    let ran = 0;
    const e = engine({
      store,
      logger: quiet,
      handlers: {
        work: {
          timeoutMs: 20,
          handler: async (_job: Job, ctx: JobContext) => {
            await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
            await ctx.step('late', () => ran++);
          },
        },
      },
    });
    await e.start();
    const job = await e.enqueue('work', {}, { retries: 0 });
    await waitFor(async () => (await store.getJob(job.id))?.state === 'deadletter', 'deadletter');
    expect(ran).toBe(0);
    expect((await store.getJob(job.id))?.steps).toEqual([]);
  });
});

describe('ctx.sleep', () => {
  it('a job woken a few ms before its wake time (the store rounds due times, the engine estimates its clock) counts the sleep as over: one run, not another for the last ms', async () => {
    const store = new MemoryJobStore();
    const [enqueued] = await store.enqueue([newJob({ type: 'nap', retries: 0 })]);
    const id = enqueued?.job.id as string;
    const [held] = await store.acquire({
      owner: 'earlier',
      limit: 1,
      leaseMs: 60_000,
      types: ['nap'],
      queues: null,
      tenants: null,
    });
    if (!held?.lockToken) throw new Error('nothing acquired');
    // Parked by an earlier run whose sleep ends 3 ms from now, and due already.
    const wake = Date.now() + 3;
    const list = [{ name: 'nap', result: { $sleepUntil: wake }, at: wake - 1_000, durationMs: 0 }];
    expect(await store.waits.sleep({ id, token: held.lockToken }, JSON.stringify(list), 0)).toBe(
      true,
    );
    let runs = 0;
    const e = engine({
      store,
      logger: quiet,
      handlers: {
        nap: async (_job: Job, ctx: JobContext) => {
          runs++;
          await ctx.sleep('nap', 1_000);
        },
      },
    });
    await e.start();
    await waitFor(async () => (await store.getJob(id)) === null, 'the job to complete');
    await e.stop();
    expect(runs).toBe(1);
  });
});
