import { type Job, MemoryJobStore } from '@jobs/core';
import { describe, expect, it } from 'vitest';
import { Harness, makeNewJob } from '../src/harness.js';
import { type GroupName, requirementGaps, runJobStoreConformance } from '../src/index.js';

const createStore = async () => new MemoryJobStore();

describe('runJobStoreConformance options', () => {
  it('rejects a skip of a group that does not exist, naming the groups', () => {
    expect(() =>
      runJobStoreConformance({
        name: 'x',
        createStore,
        skip: { nope: 'reason' } as unknown as Partial<Record<GroupName, string>>,
      }),
    ).toThrow(/skip\.nope is not a group \(groups: lifecycle, enqueue/);
  });

  it('rejects a skip without a reason', () => {
    expect(() => runJobStoreConformance({ name: 'x', createStore, skip: { engine: ' ' } })).toThrow(
      /skip\.engine needs a reason/,
    );
  });

  it('rejects a missing name or factory and non-positive rounds', () => {
    expect(() => runJobStoreConformance({ name: '', createStore })).toThrow(/name/);
    expect(() =>
      runJobStoreConformance({ name: 'x' } as unknown as Parameters<
        typeof runJobStoreConformance
      >[0]),
    ).toThrow(/createStore/);
    expect(() => runJobStoreConformance({ name: 'x', createStore, rounds: 0 })).toThrow(/rounds/);
  });

  it('rejects a timeoutMs that is not a positive integer', () => {
    expect(() => runJobStoreConformance({ name: 'x', createStore, timeoutMs: 0 })).toThrow(
      /timeoutMs must be a positive integer/,
    );
    expect(() => runJobStoreConformance({ name: 'x', createStore, timeoutMs: 1.5 })).toThrow(
      /timeoutMs/,
    );
  });

  it('rejects readRaw and readRawJob given together, and either one that is not a function', () => {
    expect(() =>
      runJobStoreConformance({
        name: 'x',
        createStore,
        readRaw: async () => null,
        readRawJob: async () => null,
      }),
    ).toThrow(/give `readRaw` \(a SQL row\) or `readRawJob` \(a stored Job\), not both/);
    expect(() =>
      runJobStoreConformance({
        name: 'x',
        createStore,
        readRawJob: 'jobs.json' as unknown as () => Promise<Job | null>,
      }),
    ).toThrow(/`readRawJob` must be a function/);
  });

  it('rejects a requires without a capabilities object, or with methods that are not names', () => {
    const run = (requires: unknown) => () =>
      runJobStoreConformance({
        name: 'x',
        createStore,
        requires: requires as Parameters<typeof runJobStoreConformance>[0]['requires'],
      });
    expect(run({})).toThrow(/requires\.capabilities must be an object/);
    expect(run({ capabilities: { progress: true }, methods: 'completeAndAcquire' })).toThrow(
      /requires\.methods must be an array of method names/,
    );
    expect(run({ capabilities: { progress: true }, abilities: ['cancel'] })).toThrow(
      /requires\.abilities must be an array of ability names/,
    );
  });
});

describe('requirementGaps', () => {
  it('names every capability that differs and every ability or method missing, and nothing when they agree', () => {
    const store = new MemoryJobStore();
    expect(
      requirementGaps(store, {
        capabilities: { multiProcess: false, concurrentCalls: false },
        abilities: ['cancellation', 'views'],
        methods: ['completeAndAcquire'],
      }),
    ).toEqual([]);
    const plain = Object.assign(Object.create(store) as MemoryJobStore, { bulk: undefined });
    expect(
      requirementGaps(plain, {
        capabilities: { multiProcess: true, transactionalEnqueue: false, batchLimit: 500 },
        abilities: ['bulk', 'views'],
        methods: ['completeInTransaction'],
      }),
    ).toEqual([
      'capabilities.multiProcess: the test file requires true, the store declares false',
      'capabilities.batchLimit: the test file requires 500, the store declares nothing',
      'bulk: the test file requires the ability, the store has none',
      'completeInTransaction(): the test file requires it, the store has none',
    ]);
  });

  it('an ability must be there whole: each of its methods missing is named', () => {
    const store = new MemoryJobStore();
    const crippled = Object.assign(Object.create(store) as MemoryJobStore, {
      cancellation: { cancel: store.cancellation.cancel },
    });
    expect(requirementGaps(crippled, { capabilities: {}, abilities: ['cancellation'] })).toEqual([
      'cancellation.cancelHeld(): the ability is there, the method is not',
    ]);
  });
});

describe('Harness raw reads with readRawJob', () => {
  it('checks the Job the store reads around itself, and fails when it differs from getJob', async () => {
    // What the storage holds, kept apart from the store (as a file on disk would be).
    const stored = new Map<string, Job>();
    const h = new Harness<MemoryJobStore>({
      name: 'x',
      createStore,
      readRawJob: async (_store, id) => stored.get(id) ?? null,
    });
    try {
      const store = await h.open();
      const [result] = await store.enqueue([makeNewJob()]);
      const job = result!.job;
      expect(h.hasRaw).toBe(true);
      // Not stored yet: getJob finds it, the raw read does not.
      await expect(h.expectStored(store, job.id, { state: 'async' })).rejects.toThrow(
        /raw row of job/,
      );
      stored.set(job.id, job);
      await h.expectStored(store, job.id, { state: 'async' });
      expect(await h.raw(store, job.id)).toBe(job);
      // Stored with another state than getJob reports.
      stored.set(job.id, { ...job, state: 'running' });
      await expect(h.expectStored(store, job.id, { state: 'async' })).rejects.toThrow(
        /raw row of job/,
      );
    } finally {
      await h.cleanup();
    }
  });
});
