import { type Job, JobEngine, type JobStore, LockLostError, silentLogger } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, waitFor } from '../harness.js';
import type { HandlerTransactionHooks } from '../options.js';

/** The store with its effect table ready, and the hooks. */
async function openWithEffects(
  h: Harness,
): Promise<{ store: JobStore; fx: HandlerTransactionHooks }> {
  const store = await h.open();
  const fx = h.options.handlerTransaction as HandlerTransactionHooks;
  await fx.setup(store);
  return { store, fx };
}

/** Leases `job` to `owner-a` briefly, lets the lease lapse, and leases it to `owner-b`. */
async function lapseAndReacquire(
  store: JobStore,
  job: Job,
): Promise<{ lapsed: Job; current: Job }> {
  const leaseMs = 100;
  const [lapsed] = await acquire(store, { owner: 'owner-a', leaseMs, limit: 1 });
  expect(lapsed?.id).toBe(job.id);
  await waitFor('the lease to lapse and be recovered', async () =>
    (await store.recoverExpiredLeases(10)).requeued.includes(job.id),
  );
  const [current] = await acquire(store, { owner: 'owner-b', limit: 1 });
  expect(current?.id).toBe(job.id);
  return { lapsed: lapsed as Job, current: current as Job };
}

/**
 * `ctx.transaction` (`JobStore.completeInTransaction`): a handler's writes and the job's
 * completion commit together, fenced by the lease token, so a job's effects apply exactly
 * once even when it runs twice.
 */
export function handlerTransactionGroup(h: Harness): void {
  it("ctx.transaction commits the handler's writes and the job's completion together", async () => {
    const { store, fx } = await openWithEffects(h);
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      handlers: {
        work: async (job, ctx) => {
          await ctx.transaction((tx) => fx.write(tx, job.id));
        },
      },
    });
    h.defer(() => engine.stop({ timeoutMs: 1_000 }));
    const job = await engine.enqueue('work', {});
    await engine.start();
    await waitFor(
      'the job to complete',
      async () => (await store.getJob(job.id)) === null,
      h.timeout(0.5),
    );
    expect(await fx.count(store, job.id)).toBe(1);
  });

  it("history keeps what a ctx.transaction job's handler returned and how long it ran, not the moment its transaction committed", async ({
    skip,
  }) => {
    const { store, fx } = await openWithEffects(h);
    if (!store.history) skip('SKIPPED: the store keeps no history (no `history`)');
    store.history?.configure({ keep: 'all', retentionMs: 7 * 24 * 3_600_000 });
    const engine = new JobEngine({
      store,
      logger: silentLogger,
      history: { keep: 'all' },
      handlers: {
        work: async (job, ctx) => {
          await ctx.transaction((tx) => fx.write(tx, job.id));
          await new Promise((resolve) => setTimeout(resolve, 150));
          return { sent: true };
        },
      },
    });
    h.defer(() => engine.stop({ timeoutMs: 1_000 }));
    const job = await engine.enqueue('work', {});
    await engine.start();
    await waitFor(
      'the history record to say what the handler returned',
      async () => {
        const result = (await store.history?.get(job.id))?.result;
        return result !== null && result !== undefined;
      },
      h.timeout(0.5),
    );
    const record = await store.history?.get(job.id);
    expect(record).toMatchObject({ outcome: 'completed', result: { sent: true } });
    expect(record?.durationMs).toBeGreaterThanOrEqual(140);
    expect(await fx.count(store, job.id)).toBe(1);
  });

  it('a handler that throws inside ctx.transaction leaves no effect, and the job fails as usual', async () => {
    const { store, fx } = await openWithEffects(h);
    const [job] = await enqueueJobs(store, [{ retries: 0 }]);
    const [held] = await acquire(store, { limit: 1 });
    await expect(
      store.completeInTransaction?.(refOf(held as Job), async (tx) => {
        await fx.write(tx, (job as Job).id);
        throw new Error('handler failed after writing');
      }),
    ).rejects.toThrow('handler failed after writing');
    expect(await fx.count(store, (job as Job).id)).toBe(0);
    expect((await store.getJob((job as Job).id))?.state).toBe('running');
  });

  it(
    "a lapsed owner's ctx.transaction commits nothing once another owner holds the job: the effect applies once",
    async () => {
      const { store, fx } = await openWithEffects(h);
      for (let round = 0; round < h.rounds; round++) {
        const [job] = await enqueueJobs(store, [{ retries: 5 }]);
        const { lapsed, current } = await lapseAndReacquire(store, job as Job);
        await store.completeInTransaction?.(refOf(current), (tx) => fx.write(tx, current.id));
        await expect(
          store.completeInTransaction?.(refOf(lapsed), (tx) => fx.write(tx, lapsed.id)),
        ).rejects.toBeInstanceOf(LockLostError);
        expect(await fx.count(store, current.id), `round ${round}`).toBe(1);
        expect(await store.getJob(current.id)).toBeNull();
      }
    },
    h.raceTimeout(),
  );

  it(
    'a lapsed owner whose transaction is open while the new owner commits rolls back: the effect applies once',
    async (ctx) => {
      const { store, fx } = await openWithEffects(h);
      if (fx.singleWriter) {
        ctx.skip(
          'handlerTransaction.singleWriter: the database holds one write transaction at a time, so two owners cannot have theirs open at once',
        );
      }
      for (let round = 0; round < h.rounds; round++) {
        const [job] = await enqueueJobs(store, [{ retries: 5 }]);
        const leaseMs = 100;
        const [lapsed] = await acquire(store, { owner: 'owner-a', leaseMs, limit: 1 });
        let wrote = (): void => {};
        const written = new Promise<void>((resolve) => {
          wrote = resolve;
        });
        let proceed = (): void => {};
        const gate = new Promise<void>((resolve) => {
          proceed = resolve;
        });
        // The lapsed owner writes its effect, then stalls before its completion (a GC pause,
        // a slow network) while the lease runs out and another owner runs the job to the end.
        const late = store.completeInTransaction?.(refOf(lapsed as Job), async (tx) => {
          await fx.write(tx, (job as Job).id);
          wrote();
          await gate;
        });
        const lateOutcome = late?.then(
          () => 'committed',
          (error: unknown) => (error instanceof LockLostError ? 'lock lost' : String(error)),
        );
        await written;
        await waitFor('the lease to lapse and be recovered', async () =>
          (await store.recoverExpiredLeases(10)).requeued.includes((job as Job).id),
        );
        const [current] = await acquire(store, { owner: 'owner-b', limit: 1 });
        await store.completeInTransaction?.(refOf(current as Job), (tx) =>
          fx.write(tx, (job as Job).id),
        );
        proceed();
        expect(await lateOutcome, `round ${round}`).toBe('lock lost');
        expect(await fx.count(store, (job as Job).id), `round ${round}`).toBe(1);
      }
    },
    h.raceTimeout(),
  );
}
