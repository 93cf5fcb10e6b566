import type { Job, QueueStatsRow } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf, storeNow } from '../harness.js';

const byGroup = (a: QueueStatsRow, b: QueueStatsRow): number =>
  `${a.queue}/${a.type}/${a.state}`.localeCompare(`${b.queue}/${b.type}/${b.state}`);

/** What `queueStats` must return for these jobs, counting as due those due by `now`. */
function expectedStats(jobs: readonly Job[], now: number): QueueStatsRow[] {
  const groups = new Map<string, QueueStatsRow>();
  for (const job of jobs) {
    const key = `${job.queue}/${job.type}/${job.state}`;
    const due = job.dueAt.getTime() <= now ? 1 : 0;
    const row = groups.get(key);
    if (!row) {
      groups.set(key, {
        queue: job.queue,
        type: job.type,
        state: job.state,
        count: 1,
        due,
        oldestDueAt: job.dueAt,
      });
    } else {
      row.count += 1;
      row.due += due;
      if (job.dueAt < row.oldestDueAt) row.oldestDueAt = job.dueAt;
    }
  }
  return [...groups.values()].sort(byGroup);
}

/** The optional reads behind operators' views (`jobsctl status`, queue-depth metrics). */
export function operatorViewsGroup(h: Harness): void {
  it('queueStats (when the store has it) counts jobs by queue, type and state, with due counts and the oldest due time', async (ctx) => {
    const store = await h.open();
    const views = store.views;
    if (!views) return ctx.skip('the store has no `views` (optional)');
    expect(await views.queueStats()).toEqual([]);
    // Whole seconds well away from now, so no store's time precision or clock step matters.
    const now = Math.floor((await storeNow(store)) / 1000) * 1000;
    const past = new Date(now - 120_000);
    const older = new Date(now - 180_000);
    await enqueueJobs(store, [
      { type: 'a', queue: 'q1', dueAt: past },
      { type: 'a', queue: 'q1', dueAt: older },
      { type: 'a', queue: 'q1', delayMs: 3_600_000 },
      { type: 'a', queue: 'q2', dueAt: past },
      { type: 'a', queue: 'q3', dueAt: past },
      { type: 'b', queue: 'q1', dueAt: past },
      { type: 'b', queue: 'q1', dueAt: older },
    ]);
    const held = await acquire(store, { types: ['b'], limit: 2 });
    expect(held).toHaveLength(2);
    const error = { message: 'gave up', stack: null };
    await store.fail([{ ...refOf(held[0]!), error, deadletter: true, retryDelayMs: 0 }]);
    expect(await store.suspend({ queue: 'q3' })).toBe(1);

    const jobs = await store.listJobs({ limit: 100, offset: 0 });
    const stats = (await views.queueStats()).sort(byGroup);
    expect(stats).toEqual(expectedStats(jobs, now));
    // The expectation itself covers every state and both sides of "due".
    expect(
      stats.map((row) => `${row.queue}/${row.type}/${row.state}:${row.count}/${row.due}`),
    ).toEqual([
      'q1/a/async:2/2',
      'q1/a/timer:1/0',
      'q1/b/deadletter:1/1',
      'q1/b/running:1/1',
      'q2/a/async:1/1',
      'q3/a/suspended:1/1',
    ]);
    expect(stats[0]!.oldestDueAt.getTime()).toBe(older.getTime());
  });
}
