/** `new JobAdmin(store)`: the admin API over a store, without an engine (what the dashboard uses). */
import { describe, expect, it } from 'vitest';
import {
  InvalidStateError,
  JobAdmin,
  MemoryJobStore,
  type NewJob,
  silentLogger,
  UnrecoverableError,
  ValidationError,
} from '../src/index.js';
import { engine, newJob, waitFor } from './helpers.js';

describe('JobAdmin without an engine', () => {
  it('retries, bulk-retries and bulk-deletes dead-letter jobs with the engine defaults', async () => {
    const store = new MemoryJobStore();
    const worker = engine({
      store,
      pollIntervalMs: 25,
      logger: silentLogger,
      handlers: {
        doomed: async () => {
          throw new UnrecoverableError('no');
        },
      },
    });
    await worker.start();
    await worker.enqueueMany([1, 2, 3, 4].map((i) => ({ type: 'doomed', payload: { i } })));
    await waitFor(
      async () => (await store.bulk.countJobs({ state: 'deadletter' })) === 4,
      'four dead-letter jobs',
    );
    await worker.stop();

    const admin = new JobAdmin(store);
    const [first] = await store.listJobs({ state: 'deadletter', limit: 1, offset: 0 });
    if (!first) throw new Error('no dead-letter job');
    // DEFAULT_RETRIES (3): written once, in core.
    expect(await admin.retry(first.id)).toMatchObject({ state: 'async', retriesLeft: 3 });
    await expect(admin.retry(first.id)).rejects.toBeInstanceOf(InvalidStateError);
    expect(await admin.retryMany({ type: 'doomed', dryRun: true })).toBe(3);
    expect(await admin.retryMany({ type: 'doomed' })).toBe(3);
    expect(await store.bulk.countJobs({ state: 'deadletter' })).toBe(0);
    expect(await admin.deleteMany({ state: 'async', type: 'doomed' })).toBe(4);
    expect(await store.bulk.countJobs({})).toBe(0);
  });

  it('canCancel says whether the store can cancel a job', () => {
    expect(new JobAdmin(new MemoryJobStore()).canCancel).toBe(true);
    const plain = new MemoryJobStore();
    Object.assign(plain, { cancellation: undefined });
    expect(new JobAdmin(plain).canCancel).toBe(false);
  });
  it('answers the reads an operator tool needs, and null (or empty) where the store has none', async () => {
    const store = new MemoryJobStore();
    const job = (over: Partial<NewJob>): NewJob => newJob({ type: 't', queue: 'q', ...over });
    await store.enqueue([job({}), job({ key: 'k' }), job({ type: 'u' })]);
    const admin = new JobAdmin(store);
    expect(await admin.countJobs({ type: 't' })).toBe(2);
    expect(await admin.countJobs({}, 2)).toBeGreaterThanOrEqual(2);
    const rows = (await admin.queueStats()) ?? [];
    expect(rows.reduce((n, r) => n + r.count, 0)).toBe(3);
    expect((await admin.queueStats({ newest: 1 }))?.map((r) => r.type)).toEqual(['u']);
    expect(await admin.listJobs({ key: 'k' })).toHaveLength(1);
    const [first] = await admin.listJobs({ limit: 1 });
    const after = await admin.listJobs({ afterId: first?.id });
    expect(after.map((j) => j.type)).toEqual(['t', 'u']);
    await expect(admin.countJobs({ type: '' })).rejects.toBeInstanceOf(ValidationError);
    expect(admin.keepsHistory).toBe(true);
    expect(await admin.scheduleRecords()).toEqual([]);
    expect(await admin.setSchedulePaused('none', true)).toBeNull();

    // A store without the optional reads: null, never a guess.
    const bare = new MemoryJobStore();
    for (const name of ['bulk', 'views', 'history'] as const) {
      Object.assign(bare, { [name]: undefined });
    }
    const plain = new JobAdmin(bare);
    expect(await plain.countJobs({})).toBeNull();
    expect(await plain.queueStats()).toBeNull();
    expect(await plain.estimateJobs()).toBeNull();
    expect(plain.keepsHistory).toBe(false);
    expect(await plain.listHistory()).toEqual({ records: [], nextCursor: null });
  });
});
