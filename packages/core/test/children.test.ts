/**
 * `ctx.run` in the engine (the stores' side is the conformance `children` group): bad input is
 * a `ValidationError` naming the field, before anything is enqueued; a child name shared with a
 * step is refused; a child's result over what a signal carries fails the child for good; the
 * `childRecheckMs` option is checked.
 */
import { describe, expect, it } from 'vitest';
import {
  ChildJobError,
  type Job,
  type JobContext,
  JobEngine,
  type JobStore,
  JobsError,
  MemoryJobStore,
  ValidationError,
} from '../src/index.js';
import { engine, waitFor } from './helpers.js';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * Runs one `parent` job with `handler` (and `child` jobs with `child`) to its end; returns what
 * its last run threw or returned.
 */
async function runParent(
  store: JobStore,
  handler: (job: Job, ctx: JobContext) => Promise<unknown>,
  child: (job: Job) => Promise<unknown> = async () => null,
): Promise<{ error: unknown; result: unknown }> {
  let error: unknown;
  let result: unknown;
  const e = engine({
    store,
    logger: quiet,
    pollIntervalMs: 50,
    handlers: {
      child,
      parent: async (job: Job, ctx: JobContext) => {
        // What the last run threw (an earlier run ends at the park with an interrupt).
        error = undefined;
        try {
          result = await handler(job, ctx);
          return result;
        } catch (thrown) {
          error = thrown;
          throw thrown;
        }
      },
    },
  });
  await e.start();
  const job = await e.enqueue('parent', {}, { retries: 0 });
  await waitFor(async () => {
    const read = await store.getJob(job.id);
    return read === null || read.state === 'deadletter';
  }, 'the parent to end');
  return { error, result };
}

describe('ctx.run', () => {
  it.each([
    ['key', { key: 'k' }],
    ['keyMode', { keyMode: 'replace' }],
    ['tx', { tx: {} }],
    ['priority', { priority: 1.5 }],
    ['delayMs', { delayMs: -1 }],
  ])(
    'refuses option %s with a ValidationError naming it, enqueuing nothing',
    async (field, options) => {
      const store = new MemoryJobStore();
      const { error } = await runParent(store, (_job, ctx) =>
        ctx.run('c', 'child', null, options as never),
      );
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).field).toBe(field);
      expect(await store.listJobs({ type: 'child', limit: 10, offset: 0 })).toEqual([]);
    },
  );

  it('refuses a bad name and an unstorable payload; a name a step used gets the next counter', async () => {
    const bad = await runParent(new MemoryJobStore(), (_job, ctx) => ctx.run('a#b', 'child', null));
    expect((bad.error as ValidationError).field).toBe('name');
    const payload = await runParent(new MemoryJobStore(), (_job, ctx) =>
      ctx.run('c', 'child', { n: Number.NaN }),
    );
    expect(payload.error).toBeInstanceOf(ValidationError);
    const shared = await runParent(new MemoryJobStore(), async (_job, ctx) => {
      await ctx.step('label', () => 'a step');
      return ctx.run('label', 'child', null);
    });
    // `label` then `label#2`: counters are shared, so the child is a new checkpoint, not a clash.
    expect(shared.error).toBeUndefined();
    expect(shared.result).toBeNull();
  });

  it('a child whose result is more than a signal carries fails for good; the parent gets a ChildJobError saying why', async () => {
    const { error, result } = await runParent(
      new MemoryJobStore(),
      async (_job, ctx) => {
        try {
          return await ctx.run('big', 'child', null);
        } catch (thrown) {
          if (!(thrown instanceof ChildJobError)) throw thrown;
          return thrown;
        }
      },
      async () => 'x'.repeat(70_000),
    );
    expect(error).toBeUndefined();
    expect(result).toBeInstanceOf(ChildJobError);
    expect((result as ChildJobError).outcome).toBe('deadletter');
    expect((result as ChildJobError).lastError?.message).toMatch(
      /more than its parent can receive/,
    );
  });

  it('childRecheckMs is checked', () => {
    for (const bad of [0, 1.5, -5, 'x']) {
      expect(
        () => new JobEngine({ store: new MemoryJobStore(), childRecheckMs: bad as number }),
      ).toThrow(JobsError);
    }
  });
});
