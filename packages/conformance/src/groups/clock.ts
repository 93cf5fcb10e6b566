import { expect, it } from 'vitest';
import { acquire, acquiredAt, enqueueJobs, type Harness, storeNow } from '../harness.js';

/** Invariant 12: due times and leases are compared on the store's clock, with ms precision. */
export function clockGroup(h: Harness): void {
  it('now() agrees with this machine’s clock within a few seconds and moves forward', async () => {
    const store = await h.open();
    const first = await storeNow(store);
    expect(Math.abs(first - Date.now())).toBeLessThan(5_000);
    await new Promise((r) => setTimeout(r, 20));
    expect(await storeNow(store)).toBeGreaterThan(first);
  });

  it('peers on separate connections read the same clock', async () => {
    const store = await h.open();
    const peer = await h.peer(store);
    const a = await storeNow(store);
    const b = await storeNow(peer);
    const c = await storeNow(store);
    expect(b).toBeGreaterThanOrEqual(a);
    expect(b).toBeLessThanOrEqual(c);
  });

  it('times are stored with millisecond precision', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const odd = [now + 60_001, now + 60_999, now + 61_457];
    const jobs = await enqueueJobs(
      store,
      odd.map((t) => ({ dueAt: new Date(t), occurrence: new Date(t - 7) })),
    );
    for (const [i, job] of jobs.entries()) {
      const stored = await store.getJob(job.id);
      expect(stored!.dueAt.getTime()).toBe(odd[i]);
      expect(stored!.occurrence!.getTime()).toBe(odd[i]! - 7);
      if (h.hasRaw) expect((await h.raw(store, job.id))!.dueAt.getTime()).toBe(odd[i]);
    }
  });

  it('due times decades away (year 2100) and long past (1980) are stored exactly', async () => {
    const store = await h.open();
    const far = new Date(Date.UTC(2100, 5, 15, 12, 30, 45, 678));
    const past = new Date(Date.UTC(1980, 0, 2, 3, 4, 5, 6));
    const [future, old] = await enqueueJobs(store, [{ dueAt: far }, { dueAt: past }]);
    expect((await store.getJob(future!.id))!.dueAt).toEqual(far);
    expect((await store.getJob(old!.id))!.dueAt).toEqual(past);
    expect((await acquire(store)).map((j) => j.id)).toEqual([old!.id]);
  });

  it('a new job without dueAt is due at the store’s now, and its lease starts at the store’s now', async () => {
    const store = await h.open();
    const before = await storeNow(store);
    const [job] = await enqueueJobs(store, [{}]);
    const [held] = await acquire(store, { leaseMs: 45_000 });
    const after = await storeNow(store);
    expect(job!.dueAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(job!.dueAt.getTime()).toBeLessThanOrEqual(after);
    expect(acquiredAt(held!, 45_000)).toBeGreaterThanOrEqual(job!.dueAt.getTime());
    expect(acquiredAt(held!, 45_000)).toBeLessThanOrEqual(after);
  });

  it('a job due one minute from the store’s now is a timer and not acquired', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const [job] = await enqueueJobs(store, [{ dueAt: new Date(now + 60_000) }]);
    expect(job!.state).toBe('timer');
    expect(await acquire(store)).toEqual([]);
  });
}
