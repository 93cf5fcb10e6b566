/**
 * Durable steps (`capabilities.steps`, DESIGN invariant 22 "Steps once"): a step's checkpoint
 * is written only under the current lease's token (`saveSteps`), comes back with the job from
 * `acquire`/`getJob` and is kept in history; a completed step never runs again for that job —
 * across a retry and across an engine cut off mid-run whose job another engine takes over —
 * and a step with `transaction: true` commits its own writes with its checkpoint
 * (`saveStepsInTransaction`), so its effects apply exactly once when two owners race. Skipped
 * by name without the capability.
 */
import {
  type EngineOptions,
  type Job,
  JobEngine,
  type JobStore,
  LockLostError,
  MAX_STEP_RESULT_BYTES,
  type StoreSteps,
  silentLogger,
  ValidationError,
} from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, waitFor } from '../harness.js';
import type { HandlerTransactionHooks } from '../options.js';
import { behindSilentNetwork } from './engine.js';

const WEEK = 7 * 24 * 3_600_000;

function stepsJson(steps: { name: string; result: unknown; at: number; durationMs: number }[]) {
  return JSON.stringify(steps);
}

type Skip = (note: string) => never;

type StepsStore = JobStore & { steps: StoreSteps };
type TransactionalStepsStore = JobStore & { steps: Required<StoreSteps> };

async function openWithSteps(h: Harness, skip: Skip): Promise<StepsStore> {
  const store: JobStore = await h.open();
  if (!store.steps) skip('SKIPPED: the store has no `steps`');
  return store as StepsStore;
}

/** The store with its effect table ready, or a skip when it has no transactional steps. */
async function openWithEffects(
  h: Harness,
  skip: Skip,
): Promise<{ store: TransactionalStepsStore; fx: HandlerTransactionHooks }> {
  const store = await openWithSteps(h, skip);
  const fx = h.options.handlerTransaction;
  if (!fx || !store.steps.saveInTransaction) {
    skip(
      'SKIPPED: no `handlerTransaction` hooks or no steps.saveInTransaction (the store has no transactions for steps)',
    );
  }
  await (fx as HandlerTransactionHooks).setup(store);
  return { store: store as TransactionalStepsStore, fx: fx as HandlerTransactionHooks };
}

/** Starts an engine on `store` and stops it after the test (before the stores close). */
async function startEngine(
  h: Harness,
  store: JobStore,
  options: Omit<EngineOptions, 'store'>,
): Promise<JobEngine> {
  const engine = new JobEngine({
    store,
    logger: silentLogger,
    pollIntervalMs: 50,
    retry: { kind: 'fixed', delayMs: 10 },
    ...options,
  });
  h.defer(() => engine.stop({ timeoutMs: 1_000 }));
  await engine.start();
  return engine;
}

/** Leases `job` to `owner-a` briefly, lets the lease lapse, and leases it to `owner-b`. */
async function lapseAndReacquire(
  store: JobStore,
  job: Job,
): Promise<{ lapsed: Job; current: Job }> {
  const [lapsed] = await acquire(store, { owner: 'owner-a', leaseMs: 100, limit: 1 });
  expect(lapsed?.id).toBe(job.id);
  await waitFor('the lease to lapse and be recovered', async () =>
    (await store.recoverExpiredLeases(10)).requeued.includes(job.id),
  );
  const [current] = await acquire(store, { owner: 'owner-b', limit: 1 });
  expect(current?.id).toBe(job.id);
  return { lapsed: lapsed as Job, current: current as Job };
}

export function stepsGroup(h: Harness): void {
  it('saveSteps writes the step list under the lease; getJob and acquire read it back, history keeps it; absent steps read as []', async ({
    skip,
  }) => {
    const store = await openWithSteps(h, skip);
    store.history?.configure({ keep: 'all', retentionMs: WEEK });
    const [job] = await enqueueJobs(store, [{}]);
    const id = (job as Job).id;
    expect((await store.getJob(id))?.steps).toEqual([]);
    const [held] = await acquire(store, { leaseMs: 100 });
    const ref = refOf(held as Job);
    const at = Date.UTC(2026, 10, 28, 1);
    const steps = [
      { name: 'charge', result: { id: 'ch_1', amount: 12.5 }, at, durationMs: 7 },
      { name: 'charge#2', result: 'naïve ✓ "quoted" \n newline', at: at + 1, durationMs: 0 },
      { name: 'nothing', result: null, at: at + 2, durationMs: 1 },
    ];
    expect(await store.steps.save(ref, stepsJson(steps))).toBe(true);
    const expected = steps.map((s) => ({ ...s, at: new Date(s.at) }));
    expect((await store.getJob(id))?.steps).toEqual(expected);
    if (h.hasRaw) expect((await h.raw(store, id))?.steps).toEqual(expected);
    // The next owner gets them with the job.
    await waitFor('the lease to lapse and be recovered', async () =>
      (await store.recoverExpiredLeases(10)).requeued.includes(id),
    );
    const [again] = await acquire(store, { owner: 'owner-b' });
    expect(again?.steps).toEqual(expected);
    await store.complete([{ ...refOf(again as Job), durationMs: 1 }]);
    if (store.history) expect((await store.history.get(id))?.steps).toEqual(expected);
  });

  it("a stale owner's checkpoint is refused and never recorded: a lapsed lease, a foreign token, a finished job", async ({
    skip,
  }) => {
    const store = await openWithSteps(h, skip);
    const [job] = await enqueueJobs(store, [{ retries: 5 }]);
    const { lapsed, current } = await lapseAndReacquire(store, job as Job);
    const mine = [{ name: 'a', result: 1, at: 1, durationMs: 0 }];
    expect(await store.steps.save(refOf(lapsed), stepsJson(mine))).toBe(false);
    expect(await store.steps.save({ id: current.id, token: 'foreign' }, stepsJson(mine))).toBe(
      false,
    );
    expect((await store.getJob(current.id))?.steps).toEqual([]);
    if (h.hasRaw) expect((await h.raw(store, current.id))?.steps).toEqual([]);
    expect(await store.steps.save(refOf(current), stepsJson(mine))).toBe(true);
    // Not while the job waits (failed back to waiting), nor once it is gone.
    await store.fail([
      {
        ...refOf(current),
        error: { message: 'x', stack: null },
        deadletter: false,
        retryDelayMs: 0,
      },
    ]);
    const later = [...mine, { name: 'b', result: 2, at: 2, durationMs: 0 }];
    expect(await store.steps.save(refOf(current), stepsJson(later))).toBe(false);
    expect((await store.getJob(current.id))?.steps?.map((s) => s.name)).toEqual(['a']);
    expect(await store.steps.save({ id: '987654321', token: 't' }, stepsJson(later))).toBe(false);
  });

  it("saveMany writes several jobs' checkpoints in one call, each fenced by its own token: a stale, a foreign and a bad id are refused alone", async ({
    skip,
  }) => {
    const store = await openWithSteps(h, skip);
    const many = store.steps.saveMany;
    if (!many) return skip('SKIPPED: the store has no steps.saveMany (checkpoints one by one)');
    const saveMany = many.bind(store.steps);
    const [stale] = await enqueueJobs(store, [{ retries: 5 }]);
    const { lapsed, current } = await lapseAndReacquire(store, stale as Job);
    await enqueueJobs(store, [{}, {}, {}]);
    const held = await acquire(store, { owner: 'batch', limit: 10 });
    const others = held.filter((job) => job.id !== current.id);
    expect(others).toHaveLength(3);
    const listOf = (id: string) => [
      {
        name: `for-${id}`,
        result: { id, text: 'a "quoted", {braced} value' },
        at: 1,
        durationMs: 0,
      },
    ];
    const [a, b, c] = others as [Job, Job, Job];
    const refused = await saveMany([
      { ref: refOf(a), stepsJson: stepsJson(listOf(a.id)) },
      { ref: refOf(lapsed), stepsJson: stepsJson(listOf(lapsed.id)) },
      { ref: refOf(b), stepsJson: stepsJson(listOf(b.id)) },
      { ref: { id: c.id, token: 'foreign' }, stepsJson: stepsJson(listOf(c.id)) },
      { ref: { id: 'not-an-id', token: 't' }, stepsJson: stepsJson(listOf('x')) },
    ]);
    expect([...refused].sort()).toEqual([lapsed.id, c.id, 'not-an-id'].sort());
    const stored = async (id: string) =>
      (await store.getJob(id))?.steps?.map((step) => ({ name: step.name, result: step.result }));
    const written = (id: string) => listOf(id).map(({ name, result }) => ({ name, result }));
    for (const job of [a, b]) expect(await stored(job.id)).toEqual(written(job.id));
    for (const job of [current, c]) expect(await stored(job.id)).toEqual([]);
    // The current owner's own checkpoint still goes through.
    expect(
      await saveMany([{ ref: refOf(current), stepsJson: stepsJson(listOf(current.id)) }]),
    ).toEqual([]);
    expect(await stored(current.id)).toEqual(written(current.id));
  });

  it('a step runs once per job across a retry; the same name again gets a counter (name, name#2); the result is the stored JSON', async ({
    skip,
  }) => {
    const store = await openWithSteps(h, skip);
    let runs = 0;
    const calls = new Map<string, number>();
    const count = (name: string) => calls.set(name, (calls.get(name) ?? 0) + 1);
    const seen: unknown[] = [];
    let storedNames: string[] | undefined;
    const engine = await startEngine(h, store, {
      handlers: {
        work: async (job: Job, ctx) => {
          runs += 1;
          const a = await ctx.step('fetch', () => {
            count('fetch');
            return { at: new Date(Date.UTC(2026, 0, 1)), n: 1 };
          });
          const b = await ctx.step('poll', () => {
            count('poll');
            return calls.get('poll');
          });
          const c = await ctx.step('poll', () => {
            count('poll');
            return calls.get('poll');
          });
          if (ctx.attempt === 1) throw new Error('first attempt fails after its steps');
          storedNames = (await store.getJob(job.id))?.steps?.map((s) => s.name);
          seen.push(a, b, c);
          return 'done';
        },
      },
    });
    const job = await engine.enqueue('work', {}, { retries: 2 });
    await waitFor('the retry to complete', async () => (await store.getJob(job.id)) === null);
    expect(runs).toBe(2);
    expect(Object.fromEntries(calls)).toEqual({ fetch: 1, poll: 2 });
    expect(storedNames).toEqual(['fetch', 'poll', 'poll#2']);
    // As JSON keeps it, on the first run as on the second: a Date is its ISO text.
    expect(seen).toEqual([{ at: '2026-01-01T00:00:00.000Z', n: 1 }, 1, 2]);
  });

  it('a step whose result is over MAX_STEP_RESULT_BYTES, or not JSON, is refused naming the step; the attempt fails and nothing is recorded', async ({
    skip,
  }) => {
    const store = await openWithSteps(h, skip);
    const errors: unknown[] = [];
    const engine = await startEngine(h, store, {
      handlers: {
        work: async (job: Job, ctx) => {
          try {
            if ((job.payload as { big: boolean }).big) {
              await ctx.step('big', () => 'x'.repeat(MAX_STEP_RESULT_BYTES + 1));
            } else {
              await ctx.step('odd', () => ({ n: 10n }));
            }
          } catch (error) {
            errors.push(error);
            throw error;
          }
        },
      },
    });
    const big = await engine.enqueue('work', { big: true }, { retries: 0 });
    const odd = await engine.enqueue('work', { big: false }, { retries: 0 });
    for (const job of [big, odd]) {
      await waitFor(
        'the job to fail',
        async () => (await store.getJob(job.id))?.state === 'deadletter',
      );
      expect((await store.getJob(job.id))?.steps).toEqual([]);
    }
    expect(errors).toHaveLength(2);
    for (const error of errors) expect(error).toBeInstanceOf(ValidationError);
    const messages = errors.map((e) => (e as Error).message).sort();
    expect(messages[0]).toMatch(/step "big"/);
    expect(messages[0]).toMatch(new RegExp(`limit of ${MAX_STEP_RESULT_BYTES}`));
    expect(messages[1]).toMatch(/step "odd"/);
  });

  it('an engine cut off mid-run (its calls never answered) loses the job; another engine takes it over after the lease and runs only the unfinished steps; the first never starts another step', async ({
    skip,
  }) => {
    const store = await openWithSteps(h, skip);
    const peer = await h.peer(store);
    const network = behindSilentNetwork(store);
    const calls: string[] = [];
    const events: string[] = [];
    const a = new JobEngine({
      store: network.store,
      leaseMs: 1_200,
      logger: silentLogger,
      handlers: {
        work: async (_job: Job, ctx) => {
          await ctx.step('one', () => {
            calls.push('one by a');
            return { n: 1 };
          });
          // From here on nothing this engine sends is answered: a crashed or partitioned node.
          network.silence();
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          events.push('a aborted');
          try {
            await ctx.step('two', () => {
              calls.push('two by a');
              return 2;
            });
          } catch (error) {
            events.push(error instanceof LockLostError ? 'a: step refused' : String(error));
          }
        },
      },
    });
    h.defer(() => a.stop({ timeoutMs: 1_000 }));
    h.defer(async () => network.restore());
    await a.start();
    const job = await a.enqueue('work', {}, { retries: 3 });
    await waitFor('the first step', async () => calls.length > 0, h.timeoutMs / 3);
    let result: unknown;
    await startEngine(h, peer, {
      handlers: {
        work: async (_job: Job, ctx) => {
          const one = await ctx.step('one', () => {
            calls.push('one by b');
            return { n: -1 };
          });
          const two = await ctx.step('two', () => {
            calls.push('two by b');
            return 2;
          });
          result = { one, two };
          return result;
        },
      },
    });
    await waitFor(
      'the other engine to finish the job',
      async () => {
        await peer.recoverExpiredLeases(10);
        return (await peer.getJob(job.id)) === null;
      },
      h.timeoutMs / 2,
    );
    expect(result).toEqual({ one: { n: 1 }, two: 2 });
    expect(calls).toEqual(['one by a', 'two by b']);
    expect(events).toEqual(['a aborted', 'a: step refused']);
  });

  it('a stopped engine gives its job back with its steps; the next engine continues after them', async ({
    skip,
  }) => {
    const store = await openWithSteps(h, skip);
    const calls: string[] = [];
    let release = (): void => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const a = new JobEngine({
      store,
      logger: silentLogger,
      handlers: {
        work: async (_job: Job, ctx) => {
          await ctx.step('one', () => calls.push('one by a'));
          await gate;
          ctx.signal.throwIfAborted();
        },
      },
    });
    h.defer(() => a.stop({ timeoutMs: 1_000 }));
    await a.start();
    const job = await a.enqueue('work', {});
    await waitFor('the first step', async () => calls.length > 0, h.timeoutMs / 3);
    const stopped = a.stop({ timeoutMs: 50 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    release();
    await stopped;
    await waitFor(
      'the job to be given back',
      async () => (await store.getJob(job.id))?.state !== 'running',
    );
    await startEngine(h, store, {
      handlers: {
        work: async (_job: Job, ctx) => {
          await ctx.step('one', () => calls.push('one by b'));
          await ctx.step('two', () => calls.push('two by b'));
        },
      },
    });
    await waitFor('the job to finish', async () => (await store.getJob(job.id)) === null);
    expect(calls).toEqual(['one by a', 'two by b']);
  });

  it(
    "a transaction step commits its writes with its checkpoint; a lapsed owner's rolls back: the effect applies once",
    async ({ skip }) => {
      const { store, fx } = await openWithEffects(h, skip);
      for (let round = 0; round < h.rounds; round++) {
        const [job] = await enqueueJobs(store, [{ retries: 5 }]);
        const { lapsed, current } = await lapseAndReacquire(store, job as Job);
        const list = stepsJson([{ name: 'charge', result: round, at: 1, durationMs: 0 }]);
        expect(
          await store.steps.saveInTransaction(
            refOf(current),
            async (tx) => {
              await fx.write(tx, current.id);
              return round;
            },
            () => list,
          ),
        ).toBe(round);
        await expect(
          store.steps.saveInTransaction(
            refOf(lapsed),
            (tx) => fx.write(tx, lapsed.id),
            () => list,
          ),
        ).rejects.toBeInstanceOf(LockLostError);
        expect(await fx.count(store, current.id), `round ${round}`).toBe(1);
        expect((await store.getJob(current.id))?.steps?.map((s) => s.result)).toEqual([round]);
        // A step that throws writes neither its effect nor its checkpoint.
        await expect(
          store.steps.saveInTransaction(
            refOf(current),
            async (tx) => {
              await fx.write(tx, current.id);
              throw new Error('step failed after writing');
            },
            () => '[]',
          ),
        ).rejects.toThrow('step failed after writing');
        expect(await fx.count(store, current.id), `round ${round}`).toBe(1);
        expect((await store.getJob(current.id))?.steps).toHaveLength(1);
        await store.complete([{ ...refOf(current), durationMs: 1 }]);
      }
    },
    h.raceTimeout(),
  );

  it(
    "two owners race a transaction step: the lapsed owner's open transaction rolls back when the new owner committed; the effect applies once",
    async ({ skip }) => {
      const { store, fx } = await openWithEffects(h, skip);
      if (fx.singleWriter) {
        skip(
          'handlerTransaction.singleWriter: the database holds one write transaction at a time, so two owners cannot have theirs open at once',
        );
      }
      for (let round = 0; round < h.rounds; round++) {
        const [job] = await enqueueJobs(store, [{ retries: 5 }]);
        const id = (job as Job).id;
        const [lapsed] = await acquire(store, { owner: 'owner-a', leaseMs: 100, limit: 1 });
        let wrote = (): void => {};
        const written = new Promise<void>((resolve) => {
          wrote = resolve;
        });
        let proceed = (): void => {};
        const gate = new Promise<void>((resolve) => {
          proceed = resolve;
        });
        const list = stepsJson([{ name: 'charge', result: 'a', at: 1, durationMs: 0 }]);
        // The lapsed owner writes its effect, then stalls before its checkpoint while the lease
        // runs out and another owner runs the step.
        const late = store.steps.saveInTransaction(
          refOf(lapsed as Job),
          async (tx) => {
            await fx.write(tx, id);
            wrote();
            await gate;
          },
          () => list,
        );
        const lateOutcome = late?.then(
          () => 'committed',
          (error: unknown) => (error instanceof LockLostError ? 'lock lost' : String(error)),
        );
        await written;
        await waitFor('the lease to lapse and be recovered', async () =>
          (await store.recoverExpiredLeases(10)).requeued.includes(id),
        );
        const [current] = await acquire(store, { owner: 'owner-b', limit: 1 });
        await store.steps.saveInTransaction(
          refOf(current as Job),
          (tx) => fx.write(tx, id),
          () => stepsJson([{ name: 'charge', result: 'b', at: 2, durationMs: 0 }]),
        );
        proceed();
        expect(await lateOutcome, `round ${round}`).toBe('lock lost');
        expect(await fx.count(store, id), `round ${round}`).toBe(1);
        expect((await store.getJob(id))?.steps?.map((s) => s.result)).toEqual(['b']);
        await store.complete([{ ...refOf(current as Job), durationMs: 1 }]);
      }
    },
    h.raceTimeout(),
  );

  it('ctx.step with transaction: true in an engine: the effect and checkpoint commit once across a retry', async ({
    skip,
  }) => {
    const { store, fx } = await openWithEffects(h, skip);
    let runs = 0;
    const engine = await startEngine(h, store, {
      handlers: {
        work: async (job: Job, ctx) => {
          runs += 1;
          const charged = await ctx.step(
            'charge',
            async (tx) => {
              await fx.write(tx, job.id);
              return 'charged';
            },
            { transaction: true },
          );
          if (ctx.attempt === 1) throw new Error('fails after the charge');
          return charged;
        },
      },
    });
    const job = await engine.enqueue('work', {}, { retries: 2 });
    await waitFor('the retry to complete', async () => (await store.getJob(job.id)) === null);
    expect(runs).toBe(2);
    expect(await fx.count(store, job.id)).toBe(1);
  });

  it('a store transaction opened inside another of the same job is refused at once with a clear error (never waits for itself); the outer one commits', async ({
    skip,
  }) => {
    const { store, fx } = await openWithEffects(h, skip);
    if (!store.completeInTransaction) skip('SKIPPED: the store has no completeInTransaction');
    const refused: string[] = [];
    const refusal = async (inner: () => Promise<unknown>): Promise<void> => {
      try {
        await inner();
        refused.push('not refused');
      } catch (error) {
        refused.push(error instanceof Error ? error.message : String(error));
      }
    };
    const engine = await startEngine(h, store, {
      handlers: {
        work: async (job: Job, ctx) => {
          await ctx.step(
            'outer',
            async (tx) => {
              await fx.write(tx, job.id);
              await refusal(() => ctx.transaction(async () => null));
              await refusal(() => ctx.step('inner', async () => 1, { transaction: true }));
              return 'outer';
            },
            { transaction: true },
          );
          await ctx.transaction(async (tx) => {
            await fx.write(tx, job.id);
            await refusal(() => ctx.step('inner-2', async () => 2, { transaction: true }));
          });
          return 'done';
        },
      },
    });
    const job = await engine.enqueue('work', {}, { retries: 0 });
    await waitFor('the job to complete', async () => (await store.getJob(job.id)) === null);
    expect(refused).toHaveLength(3);
    expect(refused[0]).toContain('ctx.transaction');
    expect(refused[0]).toContain('inside ctx.step "outer" with transaction: true');
    expect(refused[1]).toContain('inside ctx.step "outer" with transaction: true');
    expect(refused[2]).toContain('inside ctx.transaction');
    expect(await fx.count(store, job.id)).toBe(2);
    if (store.history) {
      expect(await store.history.get(job.id)).toMatchObject({ outcome: 'completed' });
    }
  });
}
