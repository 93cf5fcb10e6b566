import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, storeNow, WORK, waitFor } from '../harness.js';

/** Invariant 7 (suspension half): suspended jobs are never acquired; activate restores them. */
export function suspensionGroup(h: Harness): void {
  it('suspend moves matching waiting jobs to suspended, remembering timer or async', async () => {
    const store = await h.open();
    const [asyncJob, timerJob, other] = await enqueueJobs(store, [
      { scope: 's' },
      { scope: 's', delayMs: 60_000 },
      { scope: 'other' },
    ]);
    expect(await store.suspend({ scope: 's' })).toBe(2);
    await h.expectStored(store, asyncJob!.id, { state: 'suspended', suspendedFrom: 'async' });
    await h.expectStored(store, timerJob!.id, { state: 'suspended', suspendedFrom: 'timer' });
    await h.expectStored(store, other!.id, { state: 'async', suspendedFrom: null });
  });

  it('suspended jobs are never acquired, and nextDueAt ignores them', async () => {
    const store = await h.open();
    await enqueueJobs(store, [{ type: 'x' }, { type: 'x' }]);
    expect(await store.suspend({ type: 'x' })).toBe(2);
    expect(await acquire(store, { types: ['x'] })).toEqual([]);
    expect(await store.nextDueAt({ types: ['x'], queues: null, tenants: null })).toBeNull();
  });

  it('activate restores each suspended job to the state it came from', async () => {
    const store = await h.open();
    const [asyncJob, timerJob] = await enqueueJobs(store, [{}, { delayMs: 60_000 }]);
    await store.suspend({});
    expect(await store.activate({})).toBe(2);
    await h.expectStored(store, asyncJob!.id, { state: 'async', suspendedFrom: null });
    await h.expectStored(store, timerJob!.id, { state: 'timer', suspendedFrom: null });
    expect((await acquire(store)).map((j) => j.id)).toEqual([asyncJob!.id]);
  });

  it('a timer that became due while suspended is acquirable once activated', async () => {
    const store = await h.open();
    const [timer] = await enqueueJobs(store, [{ delayMs: 150 }]);
    await store.suspend({});
    await waitFor(
      'the due time to pass',
      async () => (await storeNow(store)) > timer!.dueAt.getTime(),
    );
    expect(await acquire(store)).toEqual([]);
    await store.activate({});
    expect((await acquire(store)).map((j) => j.id)).toEqual([timer!.id]);
  });

  it('suspend and activate match by type, scope, tenant, queue and schedule (all given must match)', async () => {
    const store = await h.open();
    const jobs = await enqueueJobs(store, [
      { type: 'a', tenantId: 't1' },
      { type: 'a', tenantId: 't2' },
      { type: 'b', tenantId: 't1', queue: 'q' },
      { schedule: 'nightly' },
    ]);
    expect(await store.suspend({ type: 'a', tenantId: 't1' })).toBe(1);
    expect(await store.suspend({ queue: 'q' })).toBe(1);
    expect(await store.suspend({ schedule: 'nightly' })).toBe(1);
    expect((await store.getJob(jobs[1]!.id))!.state).toBe('async');
    expect(await store.activate({ tenantId: 't1' })).toBe(2);
    expect((await store.getJob(jobs[3]!.id))!.state).toBe('suspended');
    expect(await store.activate({ schedule: 'nightly' })).toBe(1);
  });

  it('suspend leaves running and deadletter jobs alone; activate leaves non-suspended jobs alone', async () => {
    const store = await h.open();
    const [running, dead, waiting] = await enqueueJobs(store, [{}, {}, { delayMs: 60_000 }]);
    const held = await acquire(store);
    const deadHeld = held.find((j) => j.id === dead!.id)!;
    await store.fail([
      {
        ...refOf(deadHeld),
        error: { message: 'x', stack: null },
        deadletter: true,
        retryDelayMs: 0,
      },
    ]);
    expect(await store.suspend({ type: WORK })).toBe(1);
    await h.expectStored(store, running!.id, { state: 'running' });
    await h.expectStored(store, dead!.id, { state: 'deadletter' });
    await h.expectStored(store, waiting!.id, { state: 'suspended' });
    expect(await store.activate({ type: WORK })).toBe(1);
    await h.expectStored(store, running!.id, { state: 'running' });
    await h.expectStored(store, dead!.id, { state: 'deadletter' });
  });

  it('a suspended job can still be deleted, and an empty match returns 0', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{}]);
    expect(await store.suspend({ type: 'nothing' })).toBe(0);
    expect(await store.activate({})).toBe(0);
    await store.suspend({});
    expect(await store.deleteJob(job!.id)).toBe(true);
  });
}
