/**
 * The restart scenario: the database server itself goes down and comes back, several times,
 * while real worker processes run jobs on it — short ones, and long ones that honour
 * `ctx.signal`. The server is the test's own (`DatabaseServer`: a temporary data directory and
 * port), so it can be crashed (`immediate`: PostgreSQL's immediate shutdown, SIGKILL for
 * MariaDB) or shut down (`fast`) without disturbing anything else; the workers connect to it
 * directly, with no proxy, and see what production sees: sessions killed, connects refused,
 * crash recovery. A last outage has both workers `stop()` while the server is down; new
 * engines then run what those left behind.
 *
 * Checks: nothing lost (each job completed once in the store's history, and reported completed
 * once), no two live runs of a job at once, long runs whose lease could not be renewed while the
 * server was down aborted, each worker starting jobs again within two leases of the server's
 * return, no worker spinning while it is down, and `stop()` returning while it is down within
 * its timeout and the engine's grace.
 */
import type { JobStore } from '@jobs/core';
import { afterEach, expect, it, onTestFailed } from 'vitest';
import { makeNewJob, sleep, waitFor } from '../harness.js';
import { describeIfAvailable } from '../prerequisites.js';
import { completions, cpuShare, liveRuns, overlappingRuns } from './runs.js';
import { budget, type ChaosSetup, describeRun, MAX_IDLE_CPU_SHARE } from './scenarios.js';
import { DatabaseServer, type DatabaseServerKind, type DatabaseStopMode } from './server.js';
import { type ChaosCpuSample, type ChaosWorker, spawnChaosWorker } from './worker.js';

export interface RestartScenarioOptions {
  /** Names the suite, e.g. `postgres`. */
  name: string;
  /** The server to run privately: `postgres` or `mariadb`. */
  server: DatabaseServerKind;
  /**
   * Makes a migrated store on the private server (`server.url()`) and says how worker
   * processes open theirs (the same module as for `runChaosScenarios`).
   */
  setup(server: DatabaseServer): Promise<ChaosSetup>;
  /**
   * What is missing to run the scenario here and how to get it (packages not built), or null.
   * Missing server binaries count too. Locally it is then skipped with one loud line; under
   * `CI=true` that is a failing test.
   */
  skip?: string | null;
  /** Lease of the workers' engines. Default 2 000. */
  leaseMs?: number;
  /** Restarts, alternately `immediate` and `fast`. Default 3. */
  rounds?: number;
  /** How long the server stays down; more than a lease, so leases lapse. Default lease + 0.5 s. */
  downMs?: number;
}

/** Odd rounds crash the server, even rounds shut it down cleanly. */
const MODES: readonly DatabaseStopMode[] = ['immediate', 'fast'];
/** Jobs per round: long ones, running when the server goes, and short ones queued behind. */
const LONG_JOBS = 2;
const SHORT_JOBS = 16;
const SHORT_MS = 200;
/**
 * What `stop()` may take beyond its timeout: the engine's fixed grace (2 s for handlers, 5 s
 * for the store in @jobs/core) plus a loaded machine's margin.
 */
const STOP_GRACE_MS = 10_000;

/**
 * Defines the restart scenario for a store in the calling vitest file.
 *
 * @example
 * runRestartScenario({
 *   name: 'postgres',
 *   server: 'postgres',
 *   setup: async (server) => {
 *     const store = new PostgresJobStore({ connectionString: server.url() });
 *     await store.migrate();
 *     return {
 *       store,
 *       worker: (request) => ({ module: fixture, args: request }),
 *       teardown: () => store.close(),
 *     };
 *   },
 * });
 */
export function runRestartScenario(options: RestartScenarioOptions): void {
  const leaseMs = options.leaseMs ?? 2_000;
  const rounds = options.rounds ?? 3;
  const downMs = options.downMs ?? leaseMs + 500;
  const longMs = Math.round(1.25 * leaseMs);
  /** stop()'s own timeout in the last phase: long handlers are aborted after it. */
  const stopTimeoutMs = Math.round(leaseMs / 2);
  const type = 'chaos-restart';

  let server: DatabaseServer | null = null;
  let setup: ChaosSetup | null = null;
  let workers: ChaosWorker[] = [];
  /** Errors the test's own store gave while probing after a restart (reported on failure). */
  let probeErrors: string[] = [];
  /** The server's log, kept by `afterEach` (which runs before `onTestFailed` reports). */
  let serverLog = '';

  const skip = options.skip ?? DatabaseServer.unavailable(options.server);
  const timeout = 30_000 + STOP_GRACE_MS + rounds * (downMs + 5 * leaseMs);

  /** Waits for `probe`, failing at once when a worker died; a store error is a `false`. */
  const until = (what: string, probe: () => Promise<boolean>, timeoutMs: number) =>
    waitFor(
      what,
      async () => {
        for (const worker of workers) worker.throwIfDead();
        try {
          return await probe();
        } catch (error) {
          probeErrors.push(`${new Date().toISOString()} ${String(error)}`);
          return false;
        }
      },
      timeoutMs,
      50,
    );
  const store = (): JobStore => (setup as ChaosSetup).store;
  const enqueue = async (count: number, payload: object): Promise<string[]> => {
    const jobs = Array.from({ length: count }, () => makeNewJob({ type, payload, retries: 10 }));
    return (await store().enqueue(jobs)).map((r) => r.job.id);
  };
  const started = (worker: ChaosWorker, ids: readonly string[], since = 0) =>
    worker.eventsOf('start').filter((e) => ids.includes(e.job) && e.at >= since);

  describeIfAvailable(skip, `chaos: ${options.name} server restarts`, {}, () => {
    afterEach(async () => {
      await Promise.all(workers.map((w) => w.kill()));
      workers = [];
      probeErrors = [];
      await setup?.teardown();
      setup = null;
      serverLog = server?.log() ?? '';
      await server?.destroy();
      server = null;
    }, 30_000);

    it(`${rounds} restarts under running jobs (alternately a crash and a clean shutdown): nothing lost, each job completed once, no two live runs at once, long runs aborted while the server is down, every worker back within two leases, no spinning meanwhile, stop() bounded while it is down`, {
      timeout,
    }, async () => {
      const left = budget(timeout);
      const mine = { workers, errors: probeErrors };
      onTestFailed(() => {
        for (const worker of mine.workers) {
          const logs = worker.logs().slice(-20).join('\n  ');
          console.error(`[restart ${options.name}] worker ${worker.spec.name} logs:\n  ${logs}`);
        }
        console.error(
          `[restart ${options.name}] test store errors:\n  ${mine.errors.join('\n  ')}`,
        );
        console.error(`[restart ${options.name}] server log:\n${serverLog}`);
      });

      server = await DatabaseServer.create(options.server);
      setup = await options.setup(server);
      const request = {
        url: server.url(),
        poolSize: 4,
        sharedPool: false,
        connectTimeoutMs: Math.ceil(leaseMs / 3),
        queryTimeoutMs: Math.ceil(leaseMs / 2),
      };
      for (const name of ['a', 'b']) {
        workers.push(spawnChaosWorker({ ...setup.worker(request), name }));
      }
      mine.workers = workers;
      await Promise.all(workers.map((w) => w.ready));
      const startEngines = (phase: string) =>
        Promise.all(
          workers.map((w) =>
            w.start({
              types: [type],
              concurrency: 3,
              prefetch: 0,
              leaseMs,
              pollIntervalMs: 250,
              owner: `restart-${w.spec.name}-${phase}`,
            }),
          ),
        );
      const finished = async (ids: readonly string[]) =>
        (await Promise.all(ids.map((id) => store().getJob(id)))).every((job) => job === null);
      await startEngines('rounds');

      const all: string[] = [];
      /** Long runs that outlived their lease's last renewal before the server went. */
      let mustAbort = 0;
      for (let round = 1; round <= rounds; round++) {
        const mode = MODES[(round - 1) % MODES.length] as DatabaseStopMode;
        const long = await enqueue(LONG_JOBS, { ms: longMs, round });
        const ids = [...long, ...(await enqueue(SHORT_JOBS, { ms: SHORT_MS, round }))];
        all.push(...ids);
        await until(
          `round ${round}: the long jobs and both workers to be running`,
          async () =>
            long.every((id) => workers.some((w) => started(w, [id]).length > 0)) &&
            workers.every((w) => started(w, ids).length > 0),
          left(),
        );
        const before = await Promise.all(workers.map((w) => w.cpu()));
        const downAt = Date.now();
        await server.stop(mode);
        await sleep(downMs);
        const after = await Promise.all(workers.map((w) => w.cpu()));
        await server.start();
        const backAt = Date.now();
        await until(`round ${round} (${mode}): every job to finish`, () => finished(ids), left());

        for (const [i, worker] of workers.entries()) {
          const share = cpuShare(before[i] as ChaosCpuSample, after[i] as ChaosCpuSample);
          expect(share, `round ${round}: CPU share of ${worker.spec.name} while down`).toBeLessThan(
            MAX_IDLE_CPU_SHARE,
          );
          // Back to work: the queued jobs are there for both as soon as the server is.
          const mine = started(worker, all, backAt);
          if (mine.length > 0) {
            const firstStart = Math.min(...mine.map((e) => e.at));
            expect(
              firstStart - backAt,
              `round ${round}: ms until ${worker.spec.name} started a job after the server returned`,
            ).toBeLessThanOrEqual(2 * leaseMs);
          } else {
            // The other worker took every job left before this one was back (a loaded machine
            // reconnects one later than the other): then it did so within two leases. A worker
            // that stays away fails the next round, which waits for both to run its jobs.
            const lastStart = Math.max(
              ...workers.flatMap((w) => started(w, ids, backAt).map((e) => e.at)),
            );
            expect(
              lastStart - backAt,
              `round ${round}: ${worker.spec.name} started nothing after the server returned; ms until the other had started every job left`,
            ).toBeLessThanOrEqual(2 * leaseMs);
          }
        }
        // A long run live when the server went, that would have ended after any lease it
        // could still hold (its last renewal was sent before `downAt`), must have been aborted.
        const cut = liveRuns(workers).filter(
          (run) =>
            long.includes(run.job) &&
            run.start <= downAt &&
            run.end > downAt &&
            run.start + longMs > downAt + leaseMs,
        );
        mustAbort += cut.length;
        expect(
          cut.filter((run) => !run.aborted).map(describeRun),
          `round ${round}: long runs that outlived their lease`,
        ).toEqual([]);
      }
      // stop() while the server is down returns within its timeout and the engine's fixed
      // grace; the jobs it leaves running (their leases lapse) run again once it is back.
      const last = [
        ...(await enqueue(LONG_JOBS, { ms: longMs, round: 'stop' })),
        ...(await enqueue(4, { ms: SHORT_MS, round: 'stop' })),
      ];
      all.push(...last);
      await until(
        'the last jobs to be running on both workers',
        async () => workers.every((w) => started(w, last).length > 0),
        left(),
      );
      await server.stop('immediate');
      const stops = await Promise.all(
        workers.map((w) =>
          Promise.race([
            w.stop(stopTimeoutMs),
            sleep(stopTimeoutMs + STOP_GRACE_MS).then(() => ({ ms: Number.POSITIVE_INFINITY })),
          ]),
        ),
      );
      await server.start();
      expect(
        stops.map((stop) => stop.ms <= stopTimeoutMs + STOP_GRACE_MS),
        `stop() returned while the server was down (ms: ${stops.map((stop) => stop.ms)})`,
      ).toEqual(workers.map(() => true));
      await startEngines('after-stop');
      await until('the jobs left by stop() to finish', () => finished(last), left());
      await Promise.all(workers.map((w) => w.stop(leaseMs)));

      const runs = liveRuns(workers).filter((run) => all.includes(run.job));
      const overlaps = overlappingRuns(runs).map(
        ([a, b]) => `job ${a.job}: ${describeRun(a)} and ${describeRun(b)}`,
      );
      expect(overlaps, 'two live runs of one job at once').toEqual([]);
      expect(mustAbort, 'long runs caught by a restart').toBeGreaterThan(0);
      // Exactly once: one history record each, completed; and never settled twice.
      const history = await Promise.all(all.map((id) => store().history?.get(id)));
      if (store().history) {
        expect(history.map((h) => h?.outcome)).toEqual(all.map(() => 'completed'));
      }
      const counts = completions(workers);
      const twice = all
        .filter((id) => (counts.get(id) ?? 0) > 1)
        .map((id) => {
          const events = workers.flatMap((w) =>
            w.eventsOf('completed').filter((e) => e.job === id),
          );
          const when = events.map((e) => `${e.worker} ${new Date(e.at).toISOString()}`);
          return `job ${id} completed by ${when.join(' and ')}`;
        });
      expect(twice, 'jobs reported completed more than once').toEqual([]);
    });
  });
}
