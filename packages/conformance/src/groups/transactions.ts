import { type Job, JobEngine, type JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, type Harness, makeNewJob, sleep, waitFor } from '../harness.js';

/** Invariant 13: a job enqueued inside a transaction commits and rolls back with it. */
export function transactionsGroup(h: Harness): void {
  const hooks = (): NonNullable<Harness['options']['transaction']> => {
    const tx = h.options.transaction;
    if (!tx) throw new Error('transactions group needs options.transaction');
    return tx;
  };

  it('the store declares transactionalEnqueue', async () => {
    const store = await h.open();
    expect(store.capabilities.transactionalEnqueue).toBe(true);
  });

  it('a job enqueued in a transaction that rolls back never exists', async () => {
    const store = await h.open();
    const tx = await hooks().begin(store);
    let id: string;
    try {
      const [result] = await store.enqueue([makeNewJob({ key: 'rolled-back' })], { tx });
      id = result!.job.id;
    } catch (error) {
      await hooks().rollback(tx);
      throw error;
    }
    await hooks().rollback(tx);
    await h.expectStored(store, id, null);
    expect(await acquire(store)).toEqual([]);
    // The key it would have held is free.
    const [again] = await store.enqueue([makeNewJob({ key: 'rolled-back' })]);
    expect(again!.created).toBe(true);
  });

  it('a job enqueued in a transaction exists once it commits, and not for others before', async () => {
    const store = await h.open();
    const observer: JobStore | null = h.hasPeers ? await h.peer(store) : null;
    const tx = await hooks().begin(store);
    let id: string;
    try {
      const [result] = await store.enqueue([makeNewJob(), makeNewJob()], { tx });
      id = result!.job.id;
      if (observer) expect(await observer.getJob(id), 'visible before commit').toBeNull();
    } catch (error) {
      await hooks().rollback(tx);
      throw error;
    }
    await hooks().commit(tx);
    await h.expectStored(store, id, { state: 'async' });
    expect(await acquire(store)).toHaveLength(2);
  });

  it('a running engine never runs a job whose enqueue transaction rolled back, and runs a committed one', async () => {
    const store = await h.open();
    const ran: unknown[] = [];
    const engine = new JobEngine({
      store,
      handlers: { work: async (job: Job) => void ran.push(job.payload) },
      leaseMs: 5_000,
    });
    h.defer(() => engine.stop({ timeoutMs: 1_000 }));
    await engine.start();

    const rolledBack = await hooks().begin(store);
    try {
      await engine.enqueue('work', 'rolled back', { tx: rolledBack });
    } finally {
      await hooks().rollback(rolledBack);
    }
    const committed = await hooks().begin(store);
    try {
      await engine.enqueue('work', 'committed', { tx: committed });
    } catch (error) {
      await hooks().rollback(committed);
      throw error;
    }
    await hooks().commit(committed);
    await waitFor('the committed job to run', async () => ran.length > 0, h.timeoutMs / 2);
    // The rolled-back job was enqueued first: had it ever been visible, the engine would have
    // run it by now (same priority, earlier id). A short grace period catches a late run.
    await sleep(100);
    expect(ran).toEqual(['committed']);
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
  });
}
