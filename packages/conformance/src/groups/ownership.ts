import type { Job, JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, seededRandom, sleep, WORK } from '../harness.js';
import { spawnAcquirePeer } from '../process-peer.js';

const POOL = 120;

/**
 * Acquires from `peer` until `pool` jobs were handed out in total (across everyone) or the
 * deadline passes. Every acquired job stays held (long lease), so it must never come back.
 */
async function drain(
  peer: JobStore,
  owner: string,
  seen: { total: number; pool: number },
  deadline: number,
  random: () => number,
): Promise<Job[]> {
  const got: Job[] = [];
  while (seen.total < seen.pool && Date.now() < deadline) {
    const jobs = await acquire(peer, {
      owner,
      limit: 1 + Math.floor(random() * 8),
      leaseMs: 60_000,
    });
    seen.total += jobs.length;
    got.push(...jobs);
    if (jobs.length === 0) await sleep(1);
  }
  return got;
}

function expectEachOnce(got: readonly string[], expected: readonly string[], label: string): void {
  const counts = new Map<string, number>();
  for (const id of got) counts.set(id, (counts.get(id) ?? 0) + 1);
  const twice = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
  expect(twice, `${label}: job ids handed out more than once`).toEqual([]);
  expect([...counts.keys()].sort(), `${label}: job ids handed out`).toEqual([...expected].sort());
}

/** Invariant 1: concurrent acquirers on separate connections never both hold a job. */
export function ownershipGroup(h: Harness): void {
  it(
    'acquire never hands the same job to two owners (peers racing over a shared pool, many rounds)',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      // One deadline for all rounds, inside the test's time limit: a round that never drains its
      // pool fails on the ids handed out, not on vitest's timeout.
      const deadline = Date.now() + h.raceTimeout(2) * 0.75;
      for (let round = 0; round < h.rounds; round++) {
        const random = seededRandom(round + 1);
        const pool = await enqueueJobs(
          store,
          Array.from({ length: POOL }, (_, i) => ({ priority: i % 3, payload: { round, i } })),
        );
        const seen = { total: 0, pool: POOL };
        const results = await Promise.all(
          peers.map((peer, i) => drain(peer, `peer-${i}`, seen, deadline, random)),
        );
        const got = results.flat();
        expectEachOnce(
          got.map((j) => j.id),
          pool.map((j) => j.id),
          `round ${round}`,
        );
        // Each holder's token is what the store has.
        for (const job of got.slice(0, 5)) {
          expect((await store.getJob(job.id))?.lockToken, `round ${round}`).toBe(job.lockToken);
        }
        await store.complete(got.map((j) => ({ id: j.id, token: j.lockToken! })));
      }
      expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
    },
    h.raceTimeout(2),
  );

  it(
    'acquire never hands the same job to two owners while the pool is being filled',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      const [writer, ...acquirers] = peers.length > 1 ? peers : [store, store];
      const deadline = Date.now() + h.raceTimeout() * 0.75;
      for (let round = 0; round < Math.max(1, Math.floor(h.rounds / 2)); round++) {
        const random = seededRandom(1000 + round);
        const seen = { total: 0, pool: POOL };
        const enqueued: Job[] = [];
        const filling = (async () => {
          for (let i = 0; i < POOL; i += 10) {
            enqueued.push(
              ...(await enqueueJobs(
                writer!,
                Array.from({ length: 10 }, () => ({})),
              )),
            );
          }
        })();
        const results = await Promise.all(
          acquirers.map((peer, i) => drain(peer, `peer-${i}`, seen, deadline, random)),
        );
        await filling;
        const got = results.flat();
        expectEachOnce(
          got.map((j) => j.id),
          enqueued.map((j) => j.id),
          `round ${round}`,
        );
        await store.complete(got.map((j) => ({ id: j.id, token: j.lockToken! })));
      }
    },
    h.raceTimeout(),
  );

  it('peers acquiring and settling at once (complete, fail, release) never error and finish every job once', async () => {
    const store = await h.open();
    const peers = await h.peers(store);
    const pool = await enqueueJobs(
      store,
      Array.from({ length: POOL * 2 }, (_, i) => ({ priority: i % 4, retries: 1 })),
    );
    const completed = new Map<string, number>();
    const deadline = Date.now() + h.timeout() * 0.75;
    await Promise.all(
      peers.map(async (peer, i) => {
        const random = seededRandom(500 + i);
        let idle = 0;
        // Finished jobs carried into the next acquisition, when the store can do both at once.
        let carried: Job[] = [];
        const settleCarried = async (): Promise<void> => {
          if (carried.length === 0) return;
          const { lost } = await peer.complete(
            carried.map((j) => ({ id: j.id, token: j.lockToken! })),
          );
          expect(lost).toEqual([]);
          carried = [];
        };
        while (idle < 5 && Date.now() < deadline) {
          const request = {
            owner: `peer-${i}`,
            limit: 1 + Math.floor(random() * 10),
            leaseMs: 30_000,
            types: ['work'],
            queues: null,
            tenants: null,
          };
          let jobs: Job[];
          if (carried.length > 0 && peer.completeAndAcquire) {
            const result = await peer.completeAndAcquire(
              carried.map((j) => ({ id: j.id, token: j.lockToken! })),
              request,
            );
            expect(result.lost).toEqual([]);
            carried = [];
            jobs = result.jobs;
          } else {
            await settleCarried();
            jobs = await peer.acquire(request);
          }
          if (jobs.length === 0) {
            idle += 1;
            await sleep(5);
            continue;
          }
          idle = 0;
          const done: Job[] = [];
          const failed: Job[] = [];
          const released: Job[] = [];
          for (const job of jobs) {
            const r = random();
            if (r < 0.6) done.push(job);
            else if (r < 0.8) failed.push(job);
            else released.push(job);
          }
          // Half of the completions ride on the next acquisition (completeAndAcquire).
          const now = random() < 0.5 ? done : [];
          carried = now === done ? [] : done;
          const [c, f, r] = await Promise.all([
            peer.complete(now.map((j) => ({ id: j.id, token: j.lockToken! }))),
            peer.fail(
              failed.map((j) => ({
                id: j.id,
                token: j.lockToken!,
                error: { message: 'x', stack: null },
                deadletter: j.retriesLeft === 0,
                retryDelayMs: 0,
              })),
            ),
            peer.release(released.map((j) => ({ id: j.id, token: j.lockToken! }))),
          ]);
          expect([...c.lost, ...f.lost, ...r.lost]).toEqual([]);
          for (const job of done) completed.set(job.id, (completed.get(job.id) ?? 0) + 1);
        }
        await settleCarried();
      }),
    );
    const left = await store.listJobs({ limit: 1000, offset: 0 });
    // Every job was completed once or ended in deadletter after its one retry; nothing else.
    expect(left.filter((j) => j.state !== 'deadletter')).toEqual([]);
    expect([...completed.values()].filter((n) => n > 1)).toEqual([]);
    expect(completed.size + left.length).toBe(pool.length);
  });

  it(
    'acquire never hands the same job to two owners across processes',
    async (ctx) => {
      const store = await h.open();
      const spec = h.processPeerOrSkip(store, ctx);
      const peers = await h.peers(store, 2);
      const rounds = Math.max(1, Math.floor(h.rounds / 5));
      for (let round = 0; round < rounds; round++) {
        const pool = await enqueueJobs(
          store,
          Array.from({ length: POOL * 2 }, () => ({})),
        );
        const children = Array.from({ length: h.processCount }, (_, i) =>
          spawnAcquirePeer(spec, {
            owner: `process-${round}-${i}`,
            types: [WORK],
            limit: 5,
            leaseMs: 60_000,
            idlePolls: 3,
          }),
        );
        await Promise.all(children.map((c) => c.ready));
        for (const child of children) child.go();
        const seen = { total: 0, pool: Number.POSITIVE_INFINITY };
        // In-process peers race the children until the pool looks empty to them.
        const random = seededRandom(round + 7);
        const local = await Promise.all(
          peers.map(async (peer, i) => {
            const got: Job[] = [];
            let idle = 0;
            while (idle < 5) {
              const jobs = await acquire(peer, {
                owner: `local-${i}`,
                limit: 1 + Math.floor(random() * 5),
                leaseMs: 60_000,
              });
              seen.total += jobs.length;
              got.push(...jobs);
              idle = jobs.length === 0 ? idle + 1 : 0;
              if (jobs.length === 0) await sleep(5);
            }
            return got;
          }),
        );
        const remote = await Promise.all(children.map((c) => c.result));
        const leftover = await acquire(store, { owner: 'drain', limit: 1000, leaseMs: 60_000 });
        const ids = [
          ...local.flat().map((j) => j.id),
          ...remote.flat(),
          ...leftover.map((j) => j.id),
        ];
        expectEachOnce(
          ids,
          pool.map((j) => j.id),
          `round ${round}`,
        );
        // No cleanup: this round's jobs stay running under 60 s leases, so the next round's
        // acquirers never see them (deleting a running job would be a cancel request, or
        // refused by a store without cancellation).
      }
    },
    h.raceTimeout(2),
  );
}
