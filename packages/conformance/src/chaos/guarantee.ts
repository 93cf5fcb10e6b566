/**
 * The guarantee around a lease, with real worker processes on every store that runs in several
 * processes (DESIGN invariants 4, 16, 21): each scenario breaks a worker the way operators see
 * workers break, and checks what the store and the other worker saw.
 *
 * - kill -9 with a full default prefetch: no attempt is charged to a job whose handler never
 *   started; every `retries: 0` job runs exactly once (the ones that were running end in the
 *   dead-letter area, having run once; the prefetched ones run elsewhere as attempt 1); the
 *   takeover comes within two leases.
 * - late acquisition answers (every answer held back past the lease, as a stalled event loop
 *   or a slow network delivers it): the late worker starts nothing; the jobs run once,
 *   elsewhere, never two runs at once.
 * - SIGSTOP past the lease: another worker takes the jobs over while the first is frozen;
 *   after SIGCONT, a handler that reads `ctx.signal` before each step takes no further step.
 */
import type { JobStore } from '@jobs/core';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';
import { makeNewJob, sleep, waitFor } from '../harness.js';
import { completions, liveRuns, overlappingRuns } from './runs.js';
import type { ChaosSetup, ChaosStoreRequest } from './scenarios.js';
import { budget, describeRun } from './scenarios.js';
import { type ChaosEngineOptions, type ChaosWorker, spawnChaosWorker } from './worker.js';

export interface GuaranteeScenarioOptions {
  /** Names the suite, e.g. `postgres`. */
  name: string;
  /** The URL workers connect to (the database's own; ignored by stores without one). */
  databaseUrl: string;
  /** Makes a fresh database for each scenario (see `ChaosSetup`). */
  setup(): Promise<ChaosSetup>;
  /** A reason to skip the scenarios (no database, packages not built), or null. */
  skip?: string | null;
  /** Lease of the workers' engines. Default 2 000. */
  leaseMs?: number;
  /** Rounds of the late-answer and SIGSTOP scenarios. Default 2. */
  rounds?: number;
}

const FAST = 'guarantee-fast';
const SLOW = 'guarantee-slow';

export function runGuaranteeScenarios(options: GuaranteeScenarioOptions): void {
  const leaseMs = options.leaseMs ?? 2_000;
  const rounds = options.rounds ?? 2;
  let setup: ChaosSetup | null = null;
  let workers: ChaosWorker[] = [];

  const spawn = (name: string): ChaosWorker => {
    const request: ChaosStoreRequest = {
      url: options.databaseUrl,
      poolSize: 4,
      sharedPool: false,
      connectTimeoutMs: Math.ceil(leaseMs / 3),
      queryTimeoutMs: Math.ceil(leaseMs / 2),
    };
    const worker = spawnChaosWorker({ ...(setup as ChaosSetup).worker(request), name });
    workers.push(worker);
    return worker;
  };
  const engine = (
    types: string[],
    concurrency: number,
    owner: string,
    extra: Partial<ChaosEngineOptions> = {},
  ): ChaosEngineOptions => ({ types, concurrency, leaseMs, pollIntervalMs: 250, owner, ...extra });
  const until = (what: string, probe: () => Promise<boolean>, timeoutMs: number) =>
    waitFor(
      what,
      async () => {
        for (const worker of workers) worker.throwIfDead();
        return probe();
      },
      timeoutMs,
      50,
    );
  const store = (): JobStore => (setup as ChaosSetup).store;
  const enqueue = async (type: string, count: number, over: object = {}): Promise<string[]> => {
    const jobs = Array.from({ length: count }, () => makeNewJob({ type, ...over }));
    return (await store().enqueue(jobs)).map((r) => r.job.id);
  };
  /** No job left waiting or running (dead-letter jobs stay). */
  const settled = async (): Promise<boolean> => {
    const left = await store().listJobs({
      state: ['timer', 'async', 'blocked', 'running'],
      limit: 1,
      offset: 0,
    });
    return left.length === 0;
  };
  const startsOf = (ids: readonly string[]) => {
    const set = new Set(ids);
    return workers.flatMap((w) => w.eventsOf('start').filter((e) => set.has(e.job)));
  };
  const reportOnFailure = (): void => {
    const mine = workers;
    onTestFailed(() => {
      for (const worker of mine) {
        const logs = worker.logs().slice(-20).join('\n  ');
        console.error(`[guarantee ${options.name}] worker ${worker.spec.name} logs:\n  ${logs}`);
      }
    });
  };

  const skip = options.skip ?? null;
  describe.skipIf(skip !== null)(
    `guarantee: ${options.name}${skip ? ` — skipped: ${skip}` : ''}`,
    () => {
      afterEach(async () => {
        for (const worker of workers) worker.resume();
        await Promise.all(workers.map((w) => w.kill()));
        workers = [];
        await setup?.teardown();
        setup = null;
      }, 30_000);

      const killTimeout = 60_000 + 4 * leaseMs;
      it('kill -9 with a full default prefetch: no attempt charged to a job that never started, every retries: 0 job runs exactly once, takeover within two leases', {
        timeout: killTimeout,
      }, async () => {
        const left = budget(killTimeout);
        reportOnFailure();
        setup = await options.setup();
        // Fast jobs first (higher priority) grow the adaptive prefetch; then slow ones fill the
        // slots and the buffer and stay there.
        const fast = await enqueue(FAST, 400, { priority: 1, retries: 0, payload: { ms: 2 } });
        const slow = await enqueue(SLOW, 300, { retries: 0, payload: { ms: 5 } });
        const victim = spawn('victim');
        await victim.ready;
        await victim.start(engine([FAST, SLOW], 4, 'victim'), { blockTypes: [SLOW] });
        await until(
          'the victim to run the fast jobs and fill its slots with slow ones',
          async () => startsOf(fast).length === fast.length && startsOf(slow).length === 4,
          left(),
        );
        // Steady: no start for a while (every start it made has reached us), buffer full.
        let held = 0;
        let heldIds: string[] = [];
        await until(
          'the victim to hold a full prefetch, steadily',
          async () => {
            const before = victim.events.length;
            await sleep(500);
            const running = await store().listJobs({ state: 'running', limit: 1000, offset: 0 });
            heldIds = running.filter((j) => j.lockOwner === 'victim').map((j) => j.id);
            held = heldIds.length;
            // A full prefetch: the adaptive one holds what starts within half a second at the
            // fast jobs' pace (hundreds on a quiet machine, fewer on a loaded one).
            return victim.events.length === before && held >= 4 + 40;
          },
          left(),
        );
        const startedOnVictim = new Set(victim.eventsOf('start').map((e) => e.job));
        // The other worker is up before the crash (its start-up is not the takeover's time).
        const healthy = spawn('healthy');
        await healthy.ready;
        await healthy.start(engine([FAST, SLOW], 10, 'healthy'));
        await victim.kill();
        const killedAt = victim.killedAt as number;
        await until('every job to settle', settled, left());
        await healthy.stop(leaseMs);

        const all = [...fast, ...slow];
        const running = [...startedOnVictim].filter(
          (id) => !victim.eventsOf('end').some((e) => e.job === id),
        );
        expect(running, 'jobs running on the victim when it died').toHaveLength(4);
        // Those ran once and, with no retries left, wait in the dead-letter area.
        const dead = await store().listJobs({ state: 'deadletter', limit: 1000, offset: 0 });
        expect(dead.map((j) => j.id).sort()).toEqual([...running].sort());
        for (const job of dead) expect(job.attempts, job.id).toBe(1);
        // Every job started exactly once, across both workers.
        const starts = new Map<string, number>();
        for (const e of startsOf(all)) starts.set(e.job, (starts.get(e.job) ?? 0) + 1);
        expect(all.filter((id) => starts.get(id) !== 1)).toEqual([]);
        // The prefetched ones ran on the healthy worker as their first attempt: nothing charged.
        const takenOver = healthy.eventsOf('start');
        expect(takenOver.length).toBe(all.length - startedOnVictim.size);
        expect(takenOver.filter((e) => e.attempt !== 1)).toEqual([]);
        const counts = completions(workers);
        expect(all.filter((id) => !running.includes(id) && counts.get(id) !== 1)).toEqual([]);
        // The victim's jobs were taken over within two leases of the kill.
        const victims = new Set(heldIds);
        const firstTakeover = Math.min(
          ...takenOver.filter((e) => victims.has(e.job)).map((e) => e.at),
        );
        expect(firstTakeover - killedAt, 'takeover after the kill, in ms').toBeLessThanOrEqual(
          2 * leaseMs,
        );
        console.log(
          `[guarantee ${options.name}] kill -9 with ${held} jobs leased to the victim (4 running): ${takenOver.length} ran elsewhere as attempt 1, ${dead.length} dead-lettered after their one run; takeover ${firstTakeover - killedAt} ms after the kill (lease ${leaseMs} ms)`,
        );
      });

      const lateTimeout = 30_000 + rounds * 8 * leaseMs;
      it('late acquisition answers: a worker whose answers arrive after its lease lapsed starts nothing; every retries: 0 job runs once elsewhere, never two runs at once', {
        timeout: lateTimeout,
      }, async () => {
        const left = budget(lateTimeout);
        reportOnFailure();
        setup = await options.setup();
        const late = spawn('late');
        const healthy = spawn('healthy');
        await Promise.all([late.ready, healthy.ready]);
        // Answers come 1.6 leases late: by then the healthy worker's lease recovery (every half
        // lease) has usually taken the lapsed jobs back. No retries: a lease that recorded them
        // as started would dead-letter them unrun; each must still run once.
        await late.start(engine([FAST], 4, 'late'), {
          delayAcquireMs: Math.ceil(leaseMs * 1.6),
          stepMs: 20,
        });
        const ids: string[] = [];
        for (let round = 1; round <= rounds; round++) {
          ids.push(...(await enqueue(FAST, 8, { retries: 0, payload: { ms: 50 } })));
          // The late worker leases them first; the healthy one only gets them back later.
          await sleep(leaseMs / 4);
          if (round === 1) await healthy.start(engine([FAST], 4, 'healthy'));
          await until('the round to settle', settled, left());
        }
        await late.stop(leaseMs);
        await healthy.stop(leaseMs);
        expect(late.eventsOf('start'), 'starts of a lapsed lease').toEqual([]);
        expect(late.eventsOf('step')).toEqual([]);
        const counts = completions(workers);
        expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
        const overlaps = overlappingRuns(liveRuns(workers)).map(
          ([a, b]) => `job ${a.job}: ${describeRun(a)} and ${describeRun(b)}`,
        );
        expect(overlaps).toEqual([]);
      });

      const stopTimeout = 30_000 + rounds * 10 * leaseMs;
      it('SIGSTOP past the lease: another worker takes the jobs over during the freeze, and after SIGCONT a handler that reads ctx.signal before each step takes no further step', {
        timeout: stopTimeout,
      }, async () => {
        const left = budget(stopTimeout);
        reportOnFailure();
        setup = await options.setup();
        for (let round = 1; round <= rounds; round++) {
          const frozen = spawn(`frozen-${round}`);
          const healthy = spawn(`healthy-${round}`);
          await Promise.all([frozen.ready, healthy.ready]);
          const ids = await enqueue(FAST, 4, { retries: 5, payload: { ms: 50 } });
          await frozen.start(engine([FAST], 4, `frozen-${round}`), { stepMs: 20 });
          await until(
            'the frozen worker to start every job',
            async () => frozen.eventsOf('start').length === ids.length,
            left(),
          );
          await healthy.start(engine([FAST], 4, `healthy-${round}`));
          frozen.pause();
          const frozenAt = Date.now();
          await until('the healthy worker to take every job over', settled, left());
          const takenAt = new Map(healthy.eventsOf('start').map((e) => [e.job, e.at]));
          // Frozen past the takeover for sure, then resumed: its pending timers fire first.
          await sleep(Math.max(0, frozenAt + 2 * leaseMs - Date.now()));
          frozen.resume();
          await sleep(leaseMs / 2);
          await frozen.stop(leaseMs);
          await healthy.stop(leaseMs);

          expect([...takenAt.keys()].sort()).toEqual([...ids].sort());
          const late = frozen
            .eventsOf('step')
            .filter((step) => step.at >= (takenAt.get(step.job) ?? Number.POSITIVE_INFINITY));
          expect(
            late.map((s) => `job ${s.job} stepped at ${s.at}, taken over at ${takenAt.get(s.job)}`),
            'steps after another worker took the job',
          ).toEqual([]);
          const aborted = frozen.eventsOf('end').filter((e) => e.aborted);
          expect(aborted).toHaveLength(ids.length);
          const counts = completions(workers);
          expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
        }
      });
    },
  );
}
