import { type Job, JobEngine, type JobStore } from '@jobs/core';
import { expect, it } from 'vitest';
import { FlakyJobStore } from '../flaky-store.js';
import { type Harness, makeNewJob, waitFor } from '../harness.js';

const JOBS = 80;
// Long enough that a few failed renewals in a row do not cost a lease on a busy CI machine.
const LEASE_MS = 500;

/**
 * Enqueues job `n`, retrying injected faults. Only faults BEFORE the insert are injected here:
 * after a fault that took effect, a fast engine may already have run and deleted the job, so a
 * retry would rightly create a second one and the count of runs would be wrong.
 */
async function enqueueWithRetry(store: JobStore, n: number): Promise<Job> {
  for (let attempt = 0; ; attempt++) {
    try {
      const [result] = await store.enqueue([
        // Lost leases (faults after acquire) use up retries; give plenty so none dead-letters.
        makeNewJob({ key: `flaky-${n}`, payload: { n }, retries: 50 }),
      ]);
      return result!.job;
    } catch (error) {
      if (attempt > 50) throw error;
    }
  }
}

/**
 * Engines on a `FlakyJobStore` over the store: 20% of write and acquire calls fail, before or
 * after taking effect. The engine must still run every job, none twice, and lose none.
 */
export function faultsGroup(h: Harness): void {
  it(
    'an engine on a store failing 20% of writes runs every job exactly once and loses none',
    async () => {
      const store = await h.open();
      const [peerA, peerB] = await h.peers(store, 2);
      const runs = new Map<number, number>();
      const handler = async (job: Job<{ n: number }>) => {
        runs.set(job.payload.n, (runs.get(job.payload.n) ?? 0) + 1);
      };
      const flaky = [peerA!, peerB!].map(
        (peer, i) => new FlakyJobStore(peer, { failureRate: 0.2, seed: 11 + i }),
      );
      const engines = flaky.map(
        (f) =>
          new JobEngine({
            store: f,
            handlers: { work: handler },
            // Small batches: many store calls, so many chances for a fault.
            concurrency: 2,
            prefetch: 0,
            leaseMs: LEASE_MS,
          }),
      );
      // What the engines report: a settle that failed after taking effect, then retried, must
      // still be reported `completed` (not `lease-lost`), exactly once per job.
      const completed = new Map<number, number>();
      const leaseLost: number[] = [];
      for (const engine of engines) {
        engine.on('completed', ({ job }) => {
          const n = (job.payload as { n: number }).n;
          completed.set(n, (completed.get(n) ?? 0) + 1);
        });
        engine.on('lease-lost', ({ job }) => leaseLost.push((job.payload as { n: number }).n));
        h.defer(async () => {
          for (const f of flaky) f.enabled = false;
          await engine.stop({ timeoutMs: 1_000 });
        });
        await engine.start();
      }
      const writers = [peerA!, peerB!].map(
        (peer, i) =>
          new FlakyJobStore(peer, {
            failureRate: 0.2,
            seed: 21 + i,
            mode: 'before',
            methods: ['enqueue'],
          }),
      );
      for (let n = 0; n < JOBS; n++) await enqueueWithRetry(writers[n % 2]!, n);
      await waitFor(
        'every job to run and the store to be empty',
        async () =>
          runs.size === JOBS && (await store.listJobs({ limit: 1, offset: 0 })).length === 0,
        h.timeoutMs,
      );
      const twice = [...runs].filter(([, count]) => count > 1).map(([n]) => n);
      expect(twice, 'jobs whose handler ran more than once').toEqual([]);
      expect([...runs.keys()].sort((a, b) => a - b)).toEqual(
        Array.from({ length: JOBS }, (_, n) => n),
      );
      // Every job ran once, so every lease held: no job may be reported lost, each completed once.
      await waitFor(
        'a completed event for every job',
        async () => completed.size === JOBS,
        h.timeoutMs / 6,
      );
      expect(leaseLost, 'jobs reported lease-lost although they ran once').toEqual([]);
      expect(
        [...completed].filter(([, count]) => count !== 1),
        'jobs not reported completed exactly once',
      ).toEqual([]);
      const injected = flaky.reduce((sum, f) => sum + f.faults.before + f.faults.after, 0);
      // Proves the faults really happened (the count depends on timing, so only a floor).
      expect(injected, 'faults injected into the engines').toBeGreaterThanOrEqual(5);
      expect(
        writers[0]!.faults.before + writers[1]!.faults.before,
        'faults injected into enqueue',
      ).toBeGreaterThan(0);
    },
    h.timeout(2),
  );

  it(
    'schedules fired by engines on stores failing 20% of writes create each occurrence once',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store, 2);
      const runs = new Map<number, number>();
      const handler = async (_job: Job, ctx: { occurrence: Date | null }) => {
        const at = ctx.occurrence?.getTime() ?? -1;
        runs.set(at, (runs.get(at) ?? 0) + 1);
      };
      const flaky = peers.map(
        (peer, i) => new FlakyJobStore(peer, { failureRate: 0.2, seed: 31 + i }),
      );
      const engines = flaky.map(
        (f) => new JobEngine({ store: f, handlers: { tick: handler }, leaseMs: LEASE_MS }),
      );
      for (const engine of engines) {
        h.defer(async () => {
          for (const f of flaky) f.enabled = false;
          await engine.stop({ timeoutMs: 1_000 });
        });
        await engine.start();
      }
      // Defining is not what is tested here: do it without faults.
      for (const f of flaky) f.enabled = false;
      for (const engine of engines)
        await engine.schedule('tick', { cron: '* * * * * *', overlap: 'allow' });
      for (const f of flaky) f.enabled = true;
      await waitFor('two occurrences to run', async () => runs.size >= 2, h.timeoutMs * (2 / 3));
      for (const engine of engines) await engine.stop({ timeoutMs: 2_000 });
      const left = await store.listJobs({ schedule: 'tick', limit: 1000, offset: 0 });
      const counts = new Map(runs);
      for (const job of left) {
        const at = job.occurrence?.getTime() ?? -1;
        counts.set(at, (counts.get(at) ?? 0) + 1);
      }
      const twice = [...counts].filter(([, n]) => n > 1).map(([at]) => new Date(at).toISOString());
      expect(twice, 'occurrences created or run more than once').toEqual([]);
      expect(counts.has(-1), 'a job without occurrence').toBe(false);
    },
    h.timeout(2),
  );
}
