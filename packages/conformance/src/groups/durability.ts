import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, refOf } from '../harness.js';

/** Invariant 14: what an enqueue resolved is there for every other connection, also after close. */
export function durabilityGroup(h: Harness): void {
  it('a job whose enqueue resolved is visible to a new connection', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{ payload: { durable: 1 } }]);
    const peer = await h.peer(store);
    expect(await peer.getJob(job!.id)).toMatchObject({ id: job!.id, payload: { durable: 1 } });
  });

  it('jobs survive closing the store that wrote them and are acquirable from a new connection', async () => {
    const store = await h.open();
    const written = await enqueueJobs(store, [{ payload: 1 }, { payload: 2 }, { delayMs: 60_000 }]);
    const [held] = await acquire(store, { limit: 1 });
    await store.fail([
      {
        ...refOf(held!),
        error: { message: 'boom', stack: 's' },
        deadletter: true,
        retryDelayMs: 0,
      },
    ]);
    const peer = await h.peer(store);
    await store.close();
    const seen = await peer.listJobs({ limit: 10, offset: 0 });
    expect(seen.map((j) => [j.id, j.state])).toEqual([
      [written[0]!.id, 'deadletter'],
      [written[1]!.id, 'async'],
      [written[2]!.id, 'timer'],
    ]);
    expect(seen[0]!.lastError).toEqual({ message: 'boom', stack: 's' });
    expect((await acquire(peer)).map((j) => j.id)).toEqual([written[1]!.id]);
  });
}
