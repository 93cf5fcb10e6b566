import type { Job, JobStore, KeyMode, NewJob } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, type Harness, makeNewJob, refOf, storeNow } from '../harness.js';

/** Skips a test on a store without key modes (`capabilities.keyModes`). */
function skipWithoutKeyModes(store: JobStore, ctx: { skip(note: string): void }): void {
  if (!store.capabilities.keyModes) ctx.skip('the store has no capabilities.keyModes');
}

async function enqueueKeyed(
  store: JobStore,
  key: string,
  keyMode: KeyMode,
  job: Partial<NewJob> = {},
): Promise<{ job: Job; created: boolean }> {
  const [result] = await store.enqueue([makeNewJob({ key, keyMode, ...job })]);
  return result!;
}

/** Invariant 11 with key modes: `keep`, `replace` and `debounce` of a held key, race-free. */
export function keyModesGroup(h: Harness): void {
  it('keep returns the holder unchanged', async (ctx) => {
    const store = await h.open();
    skipWithoutKeyModes(store, ctx);
    const first = await enqueueKeyed(store, 'k', 'keep', { payload: 1, delayMs: 60_000 });
    const second = await enqueueKeyed(store, 'k', 'keep', { payload: 2 });
    expect(second.created).toBe(false);
    expect(second.job).toEqual(first.job);
  });

  it('replace gives a waiting holder the new payload and due time', async (ctx) => {
    const store = await h.open();
    skipWithoutKeyModes(store, ctx);
    const first = await enqueueKeyed(store, 'k', 'keep', { payload: 1, delayMs: 60_000 });
    expect(first.job.state).toBe('timer');
    const before = await storeNow(store);
    const replaced = await enqueueKeyed(store, 'k', 'replace', { payload: { n: 2 } });
    expect(replaced.created).toBe(false);
    expect(replaced.job.id).toBe(first.job.id);
    expect(replaced.job.payload).toEqual({ n: 2 });
    expect(replaced.job.state).toBe('async');
    expect(replaced.job.dueAt.getTime()).toBeLessThan(first.job.dueAt.getTime());
    expect(replaced.job.dueAt.getTime()).toBeGreaterThanOrEqual(before - 1);
    expect(await store.getJob(first.job.id)).toEqual(replaced.job);
    const [got] = await acquire(store);
    expect(got!.payload).toEqual({ n: 2 });
  });

  it('debounce pushes a waiting holder out, never in, and keeps the newest payload', async (ctx) => {
    const store = await h.open();
    skipWithoutKeyModes(store, ctx);
    const first = await enqueueKeyed(store, 'k', 'debounce', { payload: 1, delayMs: 30_000 });
    expect(first.created).toBe(true);
    const later = await enqueueKeyed(store, 'k', 'debounce', { payload: 2, delayMs: 90_000 });
    expect(later.job.id).toBe(first.job.id);
    expect(later.job.dueAt.getTime()).toBeGreaterThanOrEqual(first.job.dueAt.getTime() + 59_000);
    const sooner = await enqueueKeyed(store, 'k', 'debounce', { payload: 3 });
    expect(sooner.job.payload).toBe(3);
    expect(sooner.job.dueAt).toEqual(later.job.dueAt);
    expect(sooner.job.state).toBe('timer');
    expect(await acquire(store)).toEqual([]);
  });

  it('replace and debounce return a running holder unchanged and queue one follow-up with the latest change, enqueued when the holder finishes', async (ctx) => {
    const store = await h.open();
    skipWithoutKeyModes(store, ctx);
    await enqueueKeyed(store, 'k', 'keep', { payload: 1 });
    const [running] = await acquire(store);
    for (const [mode, payload] of [
      ['replace', 8],
      ['debounce', 9],
    ] as const) {
      const result = await enqueueKeyed(store, 'k', mode, { payload, delayMs: 5_000 });
      expect(result.created).toBe(false);
      expect(result.job).toEqual(running);
    }
    // Nothing beside the running holder while it runs.
    expect(await store.listJobs({ key: 'k', limit: 10, offset: 0 })).toHaveLength(1);
    const before = await storeNow(store);
    await store.complete([refOf(running as Job)]);
    const [next] = await store.listJobs({ key: 'k', limit: 10, offset: 0 });
    expect(next).toMatchObject({ state: 'timer', payload: 9, attempts: 0 });
    expect(next?.id).not.toBe((running as Job).id);
    // Due 5 s after the last change.
    expect(next?.dueAt.getTime()).toBeGreaterThanOrEqual(before + 4_000);
    // One follow-up: it holds the key now; a change replaces it as any waiting holder.
    const fresh = await enqueueKeyed(store, 'k', 'replace', { payload: 2 });
    expect(fresh).toMatchObject({ created: false, job: { id: next?.id, payload: 2 } });
  });

  it('a follow-up is dropped when its holder waits again and takes the change itself; a holder that ends without the store after-step gets its follow-up from the recovery pass', async (ctx) => {
    const store = await h.open();
    skipWithoutKeyModes(store, ctx);
    await enqueueKeyed(store, 'retry', 'keep', { payload: 1 });
    const [first] = await acquire(store);
    await enqueueKeyed(store, 'retry', 'replace', { payload: 2 });
    // The run fails and the holder waits again: a change then goes to the holder itself.
    const error = { message: 'boom', stack: null };
    await store.fail([{ ...refOf(first as Job), error, deadletter: false, retryDelayMs: 0 }]);
    const changed = await enqueueKeyed(store, 'retry', 'replace', { payload: 3 });
    expect(changed.job).toMatchObject({ id: (first as Job).id, payload: 3 });
    const [again] = await acquire(store, { types: ['work'] });
    expect(again).toMatchObject({ id: (first as Job).id, payload: 3 });
    await store.complete([refOf(again as Job)]);
    expect(await store.listJobs({ key: 'retry', limit: 10, offset: 0 })).toEqual([]);

    // A holder completed through another connection (which did not lease it, so it does not
    // know a follow-up may wait): the next recovery pass enqueues the follow-up.
    await enqueueKeyed(store, 'orphan', 'keep', { payload: 1 });
    const [held] = await acquire(store);
    await enqueueKeyed(store, 'orphan', 'debounce', { payload: 7 });
    const peer = await h.peer(store);
    await peer.complete([refOf(held as Job)]);
    await store.recoverExpiredLeases(10);
    expect(await store.listJobs({ key: 'orphan', limit: 10, offset: 0 })).toMatchObject([
      { payload: 7, state: 'async' },
    ]);
  });

  it('deleting a holder that waits again enqueues the change queued while it ran, at once (not at the next recovery pass)', async (ctx) => {
    const store = await h.open();
    skipWithoutKeyModes(store, ctx);
    await enqueueKeyed(store, 'gone', 'keep', { payload: 1 });
    const [held] = (await acquire(store)) as [Job];
    await enqueueKeyed(store, 'gone', 'replace', { payload: 2 });
    const error = { message: 'boom', stack: null };
    await store.fail([{ ...refOf(held), error, deadletter: false, retryDelayMs: 60_000 }]);
    expect(await store.deleteJob(held.id)).toBe(true);
    expect(await store.listJobs({ key: 'gone', limit: 10, offset: 0 })).toMatchObject([
      { payload: 2, state: 'async' },
    ]);
  });

  for (const mode of ['replace', 'debounce'] as const) {
    it(
      `racing ${mode} enqueuers on other connections share one job and the last write wins (many rounds)`,
      async (ctx) => {
        const store = await h.open();
        skipWithoutKeyModes(store, ctx);
        const peers = await h.peers(store);
        for (let round = 0; round < h.rounds; round++) {
          const key = `race-${round}`;
          const results = (
            await Promise.all(
              peers.map((peer, i) =>
                peer.enqueue([
                  makeNewJob({
                    key,
                    keyMode: mode,
                    payload: { peer: i },
                    delayMs: 10_000 + ((i * 7_919 + round) % 5) * 1_000,
                  }),
                ]),
              ),
            )
          ).flat();
          const id = results[0]!.job.id;
          expect(
            results.map((r) => r.job.id),
            `round ${round}`,
          ).toEqual(results.map(() => id));
          expect(
            results.filter((r) => r.created),
            `round ${round}`,
          ).toHaveLength(1);
          const stored = (await store.getJob(id))!;
          const sent = peers.map((_, i) => i);
          expect(sent).toContain((stored.payload as { peer: number }).peer);
          if (mode === 'debounce') {
            // Only ever pushed out: the stored due time is the latest any enqueuer saw.
            const latest = Math.max(...results.map((r) => r.job.dueAt.getTime()));
            expect(stored.dueAt.getTime(), `round ${round}`).toBe(latest);
          }
          const listed = await store.listJobs({ state: 'timer', limit: 1000, offset: 0 });
          expect(listed.filter((j) => j.key === key).map((j) => j.id)).toEqual([id]);
        }
      },
      h.raceTimeout(),
    );
  }

  it(
    'replace racing an acquirer never changes the job the acquirer holds (many rounds)',
    async (ctx) => {
      const store = await h.open();
      skipWithoutKeyModes(store, ctx);
      const [acquirer, ...enqueuers] = await h.peers(store);
      for (let round = 0; round < h.rounds; round++) {
        const key = `held-${round}`;
        await enqueueKeyed(store, key, 'keep', { payload: { v: 0 } });
        const [got, ...results] = await Promise.all([
          acquire(acquirer!, { owner: 'acq', limit: 10 }),
          ...enqueuers.map((peer, i) =>
            peer.enqueue([makeNewJob({ key, keyMode: 'replace', payload: { v: i + 1 } })]),
          ),
        ]);
        // The acquirer may have skipped the row while an update held it: it takes it now.
        const held =
          (got as Job[]).find((j) => j.key === key) ??
          (await acquire(acquirer!, { owner: 'acq', limit: 10 })).find((j) => j.key === key);
        if (!held) throw new Error(`round ${round}: the job was never acquired`);
        // What the acquirer read is what stays stored while it holds the job.
        expect((await store.getJob(held.id))!.payload, `round ${round}`).toEqual(held.payload);
        for (const result of (results as { job: Job }[][]).flat()) {
          expect(result.job.id, `round ${round}`).toBe(held.id);
        }
        await acquirer!.complete([refOf(held)]);
        // A replace that met the holder running became its follow-up: run it too, so nothing
        // of this round is left for the next (or for another test on this store).
        for (let left = 0; left < 3; left++) {
          const [next] = await store.listJobs({ key, limit: 1, offset: 0 });
          if (!next) break;
          const [followup] = (await acquire(acquirer!, { owner: 'acq', limit: 10 })).filter(
            (j) => j.key === key,
          );
          if (followup) await acquirer!.complete([refOf(followup)]);
        }
        expect(await store.listJobs({ key, limit: 1, offset: 0 }), `round ${round}`).toEqual([]);
      }
    },
    h.raceTimeout(),
  );
}
