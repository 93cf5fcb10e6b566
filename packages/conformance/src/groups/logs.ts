/**
 * Job logs and time limits (`capabilities.logs`, `capabilities.timeLimits`): the lines a
 * renewal writes are the job's log, read back by `getJob` and kept in history; a job's own time
 * limit is stored with it. Skipped by name without the capability.
 */
import type { Job, JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf } from '../harness.js';

const WEEK = 7 * 24 * 3_600_000;

function logsJson(lines: { at: number; message: string }[]): string {
  return JSON.stringify(lines);
}

export function logsGroup(h: Harness): void {
  it('a renewal writes the whole log; getJob reads it back, history keeps it; absent logs read as []', async ({
    skip,
  }) => {
    const store: JobStore = await h.open();
    if (!store.capabilities.logs) skip('SKIPPED: the store has no capabilities.logs');
    store.history?.configure({ keep: 'all', retentionMs: WEEK });
    const [job] = await enqueueJobs(store, [{}]);
    expect((await store.getJob((job as Job).id))?.logs).toEqual([]);
    const [held] = await acquire(store);
    const ref = refOf(held as Job);
    const at = Date.UTC(2026, 10, 27, 12);
    const first = [{ at, message: 'fetched 3 rows' }];
    expect(
      await store.renewLeases('owner-a', 30_000, [{ ...ref, logsJson: logsJson(first) }]),
    ).toEqual({ lost: [] });
    // Unchanged by a renewal without logs.
    await store.renewLeases('owner-a', 30_000, [ref]);
    const both = [...first, { at: at + 1, message: 'naïve ✓ "quoted" \n newline' }];
    await store.renewLeases('owner-a', 30_000, [{ ...ref, logsJson: logsJson(both) }]);
    const read = await store.getJob(ref.id);
    expect(read?.logs).toEqual(both.map((l) => ({ at: new Date(l.at), message: l.message })));
    // A stale token writes nothing.
    await store.renewLeases('owner-a', 30_000, [
      { id: ref.id, token: 'stale', logsJson: logsJson([]) },
    ]);
    expect((await store.getJob(ref.id))?.logs).toHaveLength(2);
    await store.complete([{ ...ref, durationMs: 1 }]);
    if (store.history) {
      expect((await store.history.get(ref.id))?.logs?.map((l) => l.message)).toEqual(
        both.map((l) => l.message),
      );
    }
  });

  it("a job's own time limit is stored with it (timeoutMs), null when not given", async ({
    skip,
  }) => {
    const store: JobStore = await h.open();
    if (!store.capabilities.timeLimits) skip('SKIPPED: the store has no capabilities.timeLimits');
    const [limited, plain] = await enqueueJobs(store, [{ timeoutMs: 90_000 }, {}]);
    expect(limited?.timeoutMs).toBe(90_000);
    expect((await store.getJob((limited as Job).id))?.timeoutMs).toBe(90_000);
    expect((await store.getJob((plain as Job).id))?.timeoutMs).toBeNull();
    const held = await acquire(store);
    expect(held.find((j) => j.id === (limited as Job).id)?.timeoutMs).toBe(90_000);
  });

  it('amendHistory gives a completed record the final result and duration', async ({ skip }) => {
    const store: JobStore = await h.open();
    if (!store.history) skip('SKIPPED: the store has no `history`');
    store.history?.configure({ keep: 'all', retentionMs: WEEK });
    await enqueueJobs(store, [{}]);
    const [held] = await acquire(store);
    await store.complete([{ ...refOf(held as Job), resultJson: null, durationMs: 0 }]);
    expect(await store.history?.amend((held as Job).id, '{"done":true}', 1_234)).toBe(true);
    expect(await store.history?.get((held as Job).id)).toMatchObject({
      result: { done: true },
      durationMs: 1_234,
    });
    expect(await store.history?.amend('987654321', null, 1)).toBe(false);
  });
}
