import { MemoryJobStore } from '@jobs/core';
import { describe, expect, it } from 'vitest';
import { type GroupName, runJobStoreConformance } from '../src/index.js';

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
});
