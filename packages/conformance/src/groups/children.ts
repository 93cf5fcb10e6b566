/**
 * Child jobs (`ctx.run`, on the abilities `steps` and `waits`): a child's result reaches its
 * parent and is memoised across a retry of the parent (the child enqueued and run once); a
 * fan-out of 100 children with a step beside them parks the parent once and resumes it once;
 * a dead-lettered or cancelled child is a `ChildJobError` in the parent; cancelling a parent,
 * parked or running, cancels its unfinished children; a wake-up lost with the process that settled the
 * child (the child completed through the store, around any engine) still resumes the parent
 * after `childRecheckMs`; a child completed in `ctx.transaction` gives its parent what its
 * handler returns however long after the commit it returns (null only for nothing), and a
 * `ChildJobError` (`lost`), never null, when its handler never returns (and what it writes when
 * it returns after all lands before its engine's `stop()` returns). Real engines, short
 * waits. Skipped by name without `steps`/`waits` (and `cancellation`, `history` or
 * `completeInTransaction` for the tests that need them).
 */
import {
  ChildJobError,
  type HistoryKeep,
  type Job,
  type JobContext,
  type JobStore,
  type StoreSteps,
  type StoreWaits,
  UnrecoverableError,
} from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, type Harness, refOf, waitFor } from '../harness.js';
import { startEngine } from './waits.js';

type Skip = (note: string) => never;
type WorkflowStore = JobStore & { steps: StoreSteps; waits: StoreWaits };

/** A child type no engine of these tests runs: it stays waiting until the test acts. */
const ELSEWHERE = 'child-elsewhere';

async function openWithChildren(h: Harness, skip: Skip): Promise<WorkflowStore> {
  const store: JobStore = await h.open();
  if (!store.steps || !store.waits) skip('SKIPPED: the store has no `steps` and `waits`');
  return store as WorkflowStore;
}

/** `openWithChildren`, for children completed in `ctx.transaction` (marked in history). */
async function openForTransactionChildren(h: Harness, skip: Skip): Promise<WorkflowStore> {
  const store = await openWithChildren(h, skip);
  if (!store.completeInTransaction) skip('SKIPPED: the store has no `completeInTransaction`');
  if (!store.history) skip('SKIPPED: the store has no `history` (the completion is marked there)');
  return store;
}

/** A promise that resolves when `release` is called. */
function gate(): { promise: Promise<void>; release: () => void } {
  let release: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { promise, release };
}

/** The id of the child a parked parent waits for under checkpoint `name`. */
async function parkedChild(store: JobStore, parentId: string, name: string): Promise<string> {
  return waitFor(`job ${parentId} to park for its child "${name}"`, async () => {
    const parent = await store.getJob(parentId);
    if (parent?.state !== 'timer') return undefined;
    const step = parent.steps?.find((s) => s.name === name);
    const childId = (step?.result as { $child?: string } | undefined)?.$child;
    return typeof childId === 'string' ? childId : undefined;
  });
}

/** Waits for job `id` to finish (leave the live table), then asserts that it did. */
async function expectFinished(store: JobStore, id: string, timeoutMs = 10_000): Promise<void> {
  const gone = async () => (await store.getJob(id)) === null;
  await waitFor(`job ${id} to finish`, gone, timeoutMs).catch(() => undefined);
  expect(await store.getJob(id), `job ${id} finished in ${timeoutMs} ms`).toBeNull();
}

/**
 * A parent parked for one child no engine runs, with `childRecheckMs: 200`; the child is then
 * acquired by a "settler" outside every engine, which the test completes as it likes.
 */
async function parentOfSettledChild(
  h: Harness,
  store: WorkflowStore,
  keep: HistoryKeep,
): Promise<{ parentId: string; child: Job; results: unknown[] }> {
  const results: unknown[] = [];
  const engine = await startEngine(h, store, {
    childRecheckMs: 200,
    history: { keep },
    handlers: {
      parent: async (_job: Job, ctx: JobContext) => {
        results.push(await ctx.run('far', ELSEWHERE, null));
      },
    },
  });
  const parent = await engine.enqueue('parent', null);
  const childId = await parkedChild(store, parent.id, 'far');
  // Polled: an engine's acquisition may hold the row for a moment (SKIP LOCKED passes it by).
  const child = await waitFor(
    'the settler to acquire the child',
    async () => (await acquire(store, { owner: 'settler', types: [ELSEWHERE] }))[0],
  );
  expect(child.id).toBe(childId);
  return { parentId: parent.id, child, results };
}

export function childrenGroup(h: Harness): void {
  it("ctx.run returns the child's result and memoises it: a parent that fails after it gets the stored result on its retry; the child is enqueued and run once", async ({
    skip,
  }) => {
    const store = await openWithChildren(h, skip);
    const childRuns: unknown[] = [];
    const results: unknown[] = [];
    const engine = await startEngine(h, store, {
      handlers: {
        double: async (job: Job<{ n: number }>) => {
          childRuns.push(job.payload);
          return { doubled: job.payload.n * 2 };
        },
        parent: async (_job: Job, ctx: JobContext) => {
          const got = await ctx.run('double', 'double', { n: 21 }, { priority: 5 });
          if (ctx.attempt === 1) throw new Error('fails after its child');
          results.push(got);
          return got;
        },
      },
    });
    const enqueued: Job[] = [];
    engine.on('enqueued', ({ job }) => {
      if (job.type === 'double') enqueued.push(job);
    });
    const parent = await engine.enqueue('parent', null, { retries: 2 });
    await expectFinished(store, parent.id);
    expect(results).toEqual([{ doubled: 42 }]);
    expect(childRuns).toEqual([{ n: 21 }]);
    expect(enqueued.map((job) => job.priority)).toEqual([5]);
  });

  it('100 children fanned out with Promise.all beside a step: every child runs once, the parent parks once, resumes once and completes once with every result in order', async ({
    skip,
  }) => {
    const store = await openWithChildren(h, skip);
    let parentRuns = 0;
    let stepRuns = 0;
    const childRuns = new Map<number, number>();
    const results: unknown[] = [];
    const completed: string[] = [];
    const engine = await startEngine(h, store, {
      handlers: {
        part: async (job: Job<{ i: number }>) => {
          childRuns.set(job.payload.i, (childRuns.get(job.payload.i) ?? 0) + 1);
          return job.payload.i * 10;
        },
        parent: async (_job: Job, ctx: JobContext) => {
          parentRuns += 1;
          const [parts, note] = await Promise.all([
            Promise.all(
              Array.from({ length: 100 }, (_, i) => ctx.run<number>('part', 'part', { i })),
            ),
            ctx.step('note', () => {
              stepRuns += 1;
              return 'noted';
            }),
          ]);
          results.push(parts, note);
          return parts.length;
        },
      },
    });
    engine.on('completed', ({ job }) => {
      if (job.type === 'parent') completed.push(job.id);
    });
    const parent = await engine.enqueue('parent', null);
    await expectFinished(store, parent.id, 20_000);
    expect(results).toEqual([Array.from({ length: 100 }, (_, i) => i * 10), 'noted']);
    expect([...childRuns.values()]).toEqual(Array.from({ length: 100 }, () => 1));
    expect(stepRuns).toBe(1);
    // The store shows the parent finished as its settle commits; the engine's event follows.
    await waitFor("the parent's completed event", async () => completed.length > 0);
    expect(completed).toEqual([parent.id]);
    // Parked once, resumed once. A store without transactional steps (enqueue, then the
    // checkpoint) may find every child done before it parks: then it never parks.
    if (store.steps.saveInTransaction && store.capabilities.transactionalEnqueue) {
      expect(parentRuns).toBe(2);
    } else {
      expect(parentRuns).toBeGreaterThanOrEqual(1);
      expect(parentRuns).toBeLessThanOrEqual(2);
    }
  });

  it('a child that ends in the dead-letter area is a ChildJobError in its parent, with the child id, the outcome and its last error', async ({
    skip,
  }) => {
    const store = await openWithChildren(h, skip);
    const caught: unknown[] = [];
    const engine = await startEngine(h, store, {
      handlers: {
        label: async () => {
          throw new UnrecoverableError('no label printer');
        },
        parent: async (_job: Job, ctx: JobContext) => {
          try {
            await ctx.run('label', 'label', { id: 1 });
          } catch (error) {
            // Only the child's failure: the run's end at the park passes through.
            if (!(error instanceof ChildJobError)) throw error;
            caught.push(error);
            return 'handled';
          }
          return 'unexpected';
        },
      },
    });
    const parent = await engine.enqueue('parent', null);
    await expectFinished(store, parent.id);
    expect(caught).toHaveLength(1);
    const error = caught[0] as ChildJobError;
    expect(error).toBeInstanceOf(ChildJobError);
    expect(error.outcome).toBe('deadletter');
    expect(error.lastError?.message).toContain('no label printer');
    expect((await store.getJob(error.childId))?.state).toBe('deadletter');
  });

  it('a cancelled child is a ChildJobError (cancelled) in its parked parent, which resumes at once', async ({
    skip,
  }) => {
    const store = await openWithChildren(h, skip);
    if (!store.cancellation) skip('SKIPPED: the store has no `cancellation`');
    const caught: unknown[] = [];
    const engine = await startEngine(h, store, {
      handlers: {
        parent: async (_job: Job, ctx: JobContext) => {
          try {
            await ctx.run('slow', ELSEWHERE, null);
          } catch (error) {
            if (!(error instanceof ChildJobError)) throw error;
            caught.push(error);
          }
        },
      },
    });
    const parent = await engine.enqueue('parent', null);
    const childId = await parkedChild(store, parent.id, 'slow');
    expect(await engine.admin.cancel(childId)).toBe('cancelled');
    await expectFinished(store, parent.id);
    expect(caught).toHaveLength(1);
    expect(caught[0]).toBeInstanceOf(ChildJobError);
    expect(caught[0]).toMatchObject({ childId, outcome: 'cancelled' });
  });

  it('cancelling a parked parent cancels its unfinished children', async ({ skip }) => {
    const store = await openWithChildren(h, skip);
    if (!store.cancellation) skip('SKIPPED: the store has no `cancellation`');
    const engine = await startEngine(h, store, {
      handlers: {
        parent: async (_job: Job, ctx: JobContext) => {
          await Promise.all([ctx.run('a', ELSEWHERE, 'a'), ctx.run('b', ELSEWHERE, 'b')]);
        },
      },
    });
    const parent = await engine.enqueue('parent', null);
    const a = await parkedChild(store, parent.id, 'a');
    const b = await parkedChild(store, parent.id, 'b');
    expect((await store.getJob(a))?.state).toBe('async');
    expect(await engine.admin.cancel(parent.id)).toBe('cancelled');
    expect(await store.getJob(parent.id)).toBeNull();
    expect(await store.getJob(a)).toBeNull();
    expect(await store.getJob(b)).toBeNull();
    if (store.history) {
      expect(await engine.admin.getJob(a)).toMatchObject({ outcome: 'cancelled' });
    }
  });

  it('cancelling a running parent cancels the children it enqueued, and the parent ends cancelled', async ({
    skip,
  }) => {
    const store = await openWithChildren(h, skip);
    if (!store.cancellation) skip('SKIPPED: the store has no `cancellation`');
    const engine = await startEngine(h, store, {
      // Long enough that a loaded machine's late renewal does not lose the lease first (recovery
      // would then end the job cancelled without this engine's event); the cancel is still seen
      // at the next renewal, a third of it.
      leaseMs: 1_000,
      handlers: {
        parent: async (_job: Job, ctx: JobContext) => {
          // The step keeps the run going (the parent parks only after it) until the cancel.
          const held = ctx.step(
            'hold',
            () =>
              new Promise((_resolve, reject) => {
                ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
              }),
          );
          await Promise.all([ctx.run('a', ELSEWHERE, 'a'), held]);
        },
      },
    });
    const cancelled: string[] = [];
    engine.on('cancelled', ({ job }) => cancelled.push(job.id));
    const parent = await engine.enqueue('parent', null);
    const childId = await waitFor('the child to be enqueued', async () => {
      const step = (await store.getJob(parent.id))?.steps?.find((s) => s.name === 'a');
      return (step?.result as { $child?: string } | undefined)?.$child;
    });
    expect((await store.getJob(parent.id))?.state).toBe('running');
    expect(await engine.admin.cancel(parent.id)).toBe('requested');
    expect(await store.getJob(childId)).toBeNull();
    await expectFinished(store, parent.id);
    // It ended cancelled: by this engine at its next renewal (its `cancelled` event), or, when a
    // loaded machine's renewal came so late that the lease lapsed, by recovery, which ends a
    // cancel-requested job cancelled too (the cancellation group checks the event itself).
    if (store.history) {
      expect(await engine.admin.getJob(parent.id)).toMatchObject({ outcome: 'cancelled' });
    } else {
      expect(cancelled).toEqual([parent.id]);
    }
  });

  it('a lost wake-up still resumes the parent: a child completed through the store, around every engine, reaches its parent after childRecheckMs', async ({
    skip,
  }) => {
    const store = await openWithChildren(h, skip);
    if (!store.history)
      skip('SKIPPED: the store has no `history` (the parent reads the result there)');
    const { parentId, child, results } = await parentOfSettledChild(h, store, 'all');
    // A settler that dies before it wakes the parent: the child completes, nobody is told.
    const resultJson = JSON.stringify({ label: 'L-1' });
    const done = await store.complete([{ ...refOf(child), durationMs: 1, resultJson }]);
    expect(done.lost).toEqual([]);
    await expectFinished(store, parentId);
    expect(results).toEqual([{ label: 'L-1' }]);
  });

  it('with history off, a result stored before the child completed reaches the parent, whose wake-up was lost', async ({
    skip,
  }) => {
    const store = await openWithChildren(h, skip);
    const { parentId, child, results } = await parentOfSettledChild(h, store, 'none');
    // What a child's engine writes before the completion (the `$child` signal), then the
    // completion; the process dies before the wake-up.
    const outcome = JSON.stringify({ outcome: 'completed', result: { label: 'L-2' } });
    await store.waits.signal('$child', child.id, outcome);
    expect((await store.complete([{ ...refOf(child), durationMs: 1 }])).lost).toEqual([]);
    await expectFinished(store, parentId);
    expect(results).toEqual([{ label: 'L-2' }]);
  });

  it("a child completed in ctx.transaction gives its parent what its handler returns, though it returns after the parent's recheck; one that returns nothing gives null", async ({
    skip,
  }) => {
    const store = await openForTransactionChildren(h, skip);
    const { promise: returns, release } = gate();
    let parentRuns = 0;
    const results: unknown[] = [];
    const engine = await startEngine(h, store, {
      childRecheckMs: 200,
      handlers: {
        slow: async (_job: Job, ctx: JobContext) => {
          await ctx.transaction(async () => undefined);
          await returns;
          return { label: 'L-3' };
        },
        none: async (_job: Job, ctx: JobContext) => {
          await ctx.transaction(async () => undefined);
        },
        parent: async (_job: Job, ctx: JobContext) => {
          parentRuns++;
          results.push(
            await Promise.all([ctx.run('slow', 'slow', null), ctx.run('none', 'none', null)]),
          );
        },
      },
    });
    // Deferred after the engine's stop, so run before it: the handler returns, the engine stops.
    h.defer(async () => release());
    const parent = await engine.enqueue('parent', null);
    // Woken by the child that returned nothing, then again by its recheck: the slow child was
    // looked at, completed, without its result (or, unfixed, the parent finished with null).
    await waitFor('the parent to recheck its slow child', async () =>
      parentRuns >= 3 || (await store.getJob(parent.id)) === null ? true : undefined,
    );
    release();
    await expectFinished(store, parent.id);
    expect(results).toEqual([[{ label: 'L-3' }, null]]);
  });

  it('a child completed in ctx.transaction whose handler never returns (its process died with the result): ctx.run throws ChildJobError "lost", not null', async ({
    skip,
  }) => {
    const store = await openForTransactionChildren(h, skip);
    const { promise: never, release } = gate();
    const outcomes: unknown[] = [];
    const engine = await startEngine(h, store, {
      // The parent waits a lease after the child's completion for its result.
      leaseMs: 1_000,
      childRecheckMs: 200,
      handlers: {
        stuck: async (_job: Job, ctx: JobContext) => {
          await ctx.transaction(async () => undefined);
          await never;
          return { label: 'L-4' };
        },
        parent: async (_job: Job, ctx: JobContext) => {
          try {
            outcomes.push(await ctx.run('stuck', 'stuck', null));
          } catch (error) {
            if (!(error instanceof ChildJobError)) throw error;
            outcomes.push(error);
          }
        },
      },
    });
    // Deferred after the engine's stop, so run before it: the handler returns, the engine stops.
    h.defer(async () => release());
    const parent = await engine.enqueue('parent', null);
    await expectFinished(store, parent.id);
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toBeInstanceOf(ChildJobError);
    expect(outcomes[0]).toMatchObject({ outcome: 'lost' });
    // The handler returns after all, while its engine stops: what follows (its history record
    // made true, its result sent to no one) is written before stop() returns, not after the
    // caller closed or emptied the store.
    release();
    await engine.stop({ timeoutMs: 10_000 });
    const record = await store.history?.get((outcomes[0] as ChildJobError).childId);
    expect(record).toMatchObject({ outcome: 'completed', result: { label: 'L-4' } });
  });
}
