/**
 * `ctx.run` in the engine (the stores' side is the conformance `children` group): bad input is
 * a `ValidationError` naming the field, before anything is enqueued; a child name shared with a
 * step is refused; a child's result over what a signal carries fails the child for good; the
 * `childRecheckMs` option is checked; a child completed with its result still to come (as
 * `ctx.transaction` completes one) gives its parent that result when it comes after a recheck,
 * and a `ChildJobError` (`lost`) when it never comes — never null.
 */
import { describe, expect, it } from 'vitest';
import { RESULT_PENDING_JSON } from '../src/engine/settlement.js';
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
 * A parent (`leaseMs` 1 s, `childRecheckMs` 100) parked for a child no engine runs, which the
 * test then completes through the store as `ctx.transaction` does: its history result pending.
 * Returns the engine, the parent's id, its runs so far, what `ctx.run` gave it, the child's id.
 */
async function parentOfPendingChild(store: MemoryJobStore) {
  const seen = { runs: 0, outcomes: [] as unknown[] };
  const e = engine({
    store,
    logger: quiet,
    pollIntervalMs: 50,
    leaseMs: 1_000,
    childRecheckMs: 100,
    handlers: {
      parent: async (_job: Job, ctx: JobContext) => {
        seen.runs++;
        try {
          seen.outcomes.push(await ctx.run('far', 'elsewhere', null));
        } catch (error) {
          if (!(error instanceof ChildJobError)) throw error;
          seen.outcomes.push(error);
        }
      },
    },
  });
  await e.start();
  const parent = await e.enqueue('parent', {}, { retries: 0 });
  await waitFor(
    async () => (await store.getJob(parent.id))?.state === 'timer',
    'the parent to park',
  );
  const [child] = await store.acquire({
    owner: 'settler',
    limit: 1,
    leaseMs: 60_000,
    types: ['elsewhere'],
    queues: null,
    tenants: null,
  });
  if (!child?.lockToken) throw new Error('the settler acquired no child');
  const done = await store.complete([
    { id: child.id, token: child.lockToken, durationMs: 1, resultJson: RESULT_PENDING_JSON },
  ]);
  expect(done.lost).toEqual([]);
  return { engine: e, parentId: parent.id, childId: child.id, seen, runsAtCompletion: seen.runs };
}

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

  it('a child completed with its result still to come gives its parent that result when it comes after a recheck, not null', async () => {
    const store = new MemoryJobStore();
    const { parentId, childId, seen, runsAtCompletion } = await parentOfPendingChild(store);
    // Two more runs: the parent looked at the completed child at least once and parked again.
    await waitFor(
      async () => seen.runs >= runsAtCompletion + 2 || (await store.getJob(parentId)) === null,
      'the parent to recheck its child',
    );
    await store.waits?.signal('$child', childId, '{"outcome":"completed","result":{"n":7}}');
    await waitFor(async () => (await store.getJob(parentId)) === null, 'the parent to end');
    expect(seen.outcomes).toEqual([{ n: 7 }]);
  });

  it('a child completed with its result still to come that never comes: ctx.run throws ChildJobError "lost" a lease later, not null', async () => {
    const store = new MemoryJobStore();
    const { parentId, seen } = await parentOfPendingChild(store);
    await waitFor(async () => (await store.getJob(parentId)) === null, 'the parent to end');
    expect(seen.outcomes).toHaveLength(1);
    expect(seen.outcomes[0]).toBeInstanceOf(ChildJobError);
    expect((seen.outcomes[0] as ChildJobError).outcome).toBe('lost');
    expect((seen.outcomes[0] as ChildJobError).message).toMatch(/result was lost with its process/);
  });

  it('engine.result of a child completed with its result still to come waits for the result, never returning the marker', async () => {
    const store = new MemoryJobStore();
    const { engine: e, childId } = await parentOfPendingChild(store);
    await expect(e.result(childId, { timeoutMs: 50 })).rejects.toThrow(
      /its handler not returned yet/,
    );
    // What the child's engine writes once the handler returned.
    expect(await store.history?.amend(childId, '{"n":8}', 5)).toBe(true);
    expect(await e.result(childId, { timeoutMs: 5_000 })).toEqual({ n: 8 });
  });
});
