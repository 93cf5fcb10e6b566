/**
 * The chaos scenarios, written once for every store that talks to its database over a
 * network (DESIGN "Faults", invariants 3 and 16). Real worker processes run engines on the
 * store's built package, some through a `ChaosProxy`, one straight to the database, and the
 * test breaks the network between them:
 *
 * - a black hole under long jobs that honour `ctx.signal`: the cut-off worker aborts each
 *   handler before the healthy worker starts it, and its `stop()` returns while still cut off;
 * - a 10 s outage (refused and cut connections, as a restart looks): every job completes;
 * - pool exhaustion (handlers holding the store's pooled connections in transactions longer
 *   than a lease): no lease is lost, nothing deadlocks;
 * - kill -9 of a worker: its jobs run elsewhere, once;
 * - long transactions beside the queue (`ChaosSetup.holdSnapshot`): a session idle in a
 *   REPEATABLE READ transaction and an analytics reader re-reading in one, opened before the
 *   first job, while workers drain waves of jobs: every job completes once, and both readers
 *   stay in their transactions, unblocked, seeing no job (the bench's `long-tx` measures the
 *   throughput beside such a transaction over minutes).
 *
 * Each checks: nothing lost, each job completed once, no two live runs of a job at once (the
 * cut-off and killed workers' included), `stop()` returns, recovery within two leases, and a
 * worker whose database is away does not spin. Waits take their time from the test's own
 * timeout; the only times compared are lease-sized bounds the engine promises.
 */
import type { JobStore } from '@jobs/core';
import { afterEach, expect, it, onTestFailed } from 'vitest';
import { makeNewJob, sleep, waitFor } from '../harness.js';
import type { ProcessPeerSpec } from '../options.js';
import { describeIfAvailable } from '../prerequisites.js';
import { ChaosProxy } from './proxy.js';
import { completions, cpuShare, type LiveRun, liveRuns, overlappingRuns } from './runs.js';
import { type ChaosEngineOptions, type ChaosWorker, spawnChaosWorker } from './worker.js';

/** What a worker process's store connects with. */
export interface ChaosStoreRequest {
  /** The database URL: the proxy's or the database's own. */
  url: string;
  /** Pool size of the worker's store. */
  poolSize: number;
  /** The store's `connectTimeoutMs` and `queryTimeoutMs`. */
  connectTimeoutMs: number;
  queryTimeoutMs: number;
  /**
   * Handlers take connections from the store's pool (`slowTransaction`): give the store a
   * pool the worker shares with them, where the store cannot hand out its own.
   */
  sharedPool: boolean;
}

/** The database under test, made fresh for the scenarios. */
export interface ChaosSetup {
  /** A migrated store in the test process, on the tables the workers use: for enqueue and reads. */
  store: JobStore;
  /**
   * The module a worker process opens its store with (plain `node`, built packages), and its
   * args: a module exporting `createStore(args)` and `slowTransaction(store, ms, signal)`,
   * which holds one of the store's pooled connections in a transaction for `ms`.
   */
  worker(request: ChaosStoreRequest): ProcessPeerSpec;
  /** Closes the store and drops what `setup` made. */
  teardown(): Promise<void>;
  /**
   * Opens a session of its own that begins a REPEATABLE READ transaction, reads the jobs and
   * history tables in it and stays there: a forgotten `BEGIN` in a console, or an analytics
   * reader (it holds back the server's cleanup of old row versions, and a read lock on both
   * tables' definitions). Absent: the long-transaction scenario is skipped, saying so.
   */
  holdSnapshot?(): Promise<HeldSnapshot>;
}

/** A session inside a long REPEATABLE READ transaction (`ChaosSetup.holdSnapshot`). */
export interface HeldSnapshot {
  /** Rows of the jobs and history tables its snapshot sees, read again inside the transaction. */
  rows(): Promise<number>;
  /** True while the server says the session is still inside that transaction. */
  open(): Promise<boolean>;
  /** Ends the transaction and closes the session. */
  release(): Promise<void>;
}

export interface ChaosScenarioOptions {
  /** Names the suite, e.g. `postgres`. */
  name: string;
  /** The database's URL; proxied workers get `proxy.url(databaseUrl)`. */
  databaseUrl: string;
  /** Makes a fresh schema or database; called before each scenario. */
  setup(): Promise<ChaosSetup>;
  /**
   * What is missing to run the scenarios here and how to get it (no database, packages not
   * built), or null. Locally they are then skipped with one loud line; under `CI=true` that is
   * a failing test.
   */
  skip?: string | null;
  /**
   * Lease of the workers' engines. Default 3 000: scenarios take seconds, not minutes, and the
   * engine's margin (a tenth of the lease) stays well above a loaded machine's timer delays.
   */
  leaseMs?: number;
  /** Rounds of the black-hole and kill scenarios. Default 2. */
  rounds?: number;
}

/** CPU a worker whose database is away may use, as a share of one core: waiting, not spinning. */
export const MAX_IDLE_CPU_SHARE = 0.3;
/** The outage of the restart-like scenario (the 10 s). */
const OUTAGE_MS = 10_000;
/** Jobs handed from one worker to another per round (black hole, kill -9). */
const HANDOVER_JOBS = 4;
/** Jobs drained beside the long transactions, in waves enqueued while the workers run. */
const LONG_TX_WAVES = 4;
const LONG_TX_WAVE_JOBS = 150;

/** Milliseconds left of a test that started now with `timeoutMs`, less a second for cleanup. */
export function budget(timeoutMs: number): () => number {
  const end = Date.now() + timeoutMs - 1_000;
  return () => Math.max(1, end - Date.now());
}

export const describeRun = (run: LiveRun): string =>
  `${run.worker} ${new Date(run.start).toISOString()}..${Number.isFinite(run.end) ? new Date(run.end).toISOString() : 'running'}${run.aborted ? ' (aborted)' : ''}`;

/**
 * Defines the chaos scenarios for a store in the calling vitest file.
 *
 * @example
 * runChaosScenarios({
 *   name: 'postgres',
 *   databaseUrl: PG_URL,
 *   setup: async () => {
 *     const schema = randomSchema();
 *     const store = new PostgresJobStore({ connectionString: PG_URL, schema });
 *     await store.migrate();
 *     return {
 *       store,
 *       worker: (request) => ({ module: fixture, args: { ...request, schema } }),
 *       teardown: async () => { await store.close(); await dropSchema(schema); },
 *     };
 *   },
 * });
 */
export function runChaosScenarios(options: ChaosScenarioOptions): void {
  const leaseMs = options.leaseMs ?? 3_000;
  const rounds = options.rounds ?? 2;
  /** Short deadlines: a call on a silent network fails well within a lease. */
  const deadlines = {
    connectTimeoutMs: Math.ceil(leaseMs / 3),
    queryTimeoutMs: Math.ceil(leaseMs / 2),
  };
  const engine = (type: string, concurrency: number, owner: string): ChaosEngineOptions => ({
    types: [type],
    concurrency,
    prefetch: 0,
    leaseMs,
    pollIntervalMs: 250,
    owner,
  });

  let setup: ChaosSetup | null = null;
  let workers: ChaosWorker[] = [];
  let proxies: ChaosProxy[] = [];

  /** Waits for `probe`, failing at once when a worker died on its own. */
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
  const prepare = async (): Promise<ChaosSetup> => {
    setup = await options.setup();
    return setup;
  };
  const spawn = (name: string, url: string, over: Partial<ChaosStoreRequest> = {}) => {
    const request = { url, poolSize: 4, sharedPool: false, ...deadlines, ...over };
    const spec = (setup as ChaosSetup).worker(request);
    const worker = spawnChaosWorker({ ...spec, name });
    workers.push(worker);
    return worker;
  };
  const proxy = async (): Promise<ChaosProxy> => {
    const started = await ChaosProxy.start({ target: options.databaseUrl });
    proxies.push(started);
    return started;
  };
  const enqueue = async (type: string, count: number, payload: object = {}): Promise<string[]> => {
    const store = (setup as ChaosSetup).store;
    const jobs = Array.from({ length: count }, () => makeNewJob({ type, payload, retries: 10 }));
    return (await store.enqueue(jobs)).map((r) => r.job.id);
  };
  /** Every job done: none left in the live table (none failed to the dead-letter area). */
  const allDone = async (ids: readonly string[]): Promise<boolean> => {
    const store = (setup as ChaosSetup).store;
    const left = await Promise.all(ids.map((id) => store.getJob(id)));
    return left.every((job) => job === null);
  };
  const startsOf = (worker: ChaosWorker, ids: readonly string[]): string[] =>
    worker
      .eventsOf('start')
      .map((e) => e.job)
      .filter((id) => ids.includes(id));
  /** Each of `ids` completed exactly once, across every worker. */
  const expectCompletedOnce = (ids: readonly string[]): void => {
    const counts = completions(workers);
    expect(ids.map((id) => counts.get(id) ?? 0)).toEqual(ids.map(() => 1));
  };
  const expectNoOverlap = (ids: readonly string[]): LiveRun[] => {
    const runs = liveRuns(workers).filter((r) => ids.includes(r.job));
    const overlaps = overlappingRuns(runs).map(
      ([a, b]) => `job ${a.job}: ${describeRun(a)} and ${describeRun(b)}`,
    );
    expect(overlaps, 'two live runs of one job at once').toEqual([]);
    return runs;
  };
  /**
   * Hands `HANDOVER_JOBS` new jobs to `first`, whose handlers run until aborted, then starts
   * `second` (idle until the leases lapse: nothing else is due). Returns the job ids.
   */
  const handOver = async (
    type: string,
    round: number,
    first: ChaosWorker,
    second: ChaosWorker,
    left: () => number,
  ): Promise<string[]> => {
    const ids = await enqueue(type, HANDOVER_JOBS, { round });
    const plan = { runMs: 'until-aborted' } as const;
    await first.start(engine(type, HANDOVER_JOBS, `${first.spec.name}-${round}`), plan);
    await until(
      `${first.spec.name} to start every job`,
      async () => startsOf(first, ids).length === HANDOVER_JOBS,
      left(),
    );
    await second.start(engine(type, HANDOVER_JOBS, `${second.spec.name}-${round}`), {
      runMs: 100,
    });
    return ids;
  };
  /**
   * After a handover: no overlap, each job completed once, and `second` started every job
   * (and finished it) within two leases of `faultAt`. Returns the runs.
   */
  const expectTakenOver = (ids: readonly string[], second: string, faultAt: number) => {
    const runs = expectNoOverlap(ids);
    expectCompletedOnce(ids);
    const taken = runs.filter((r) => r.worker === second);
    expect(taken.map((r) => r.aborted)).toEqual(ids.map(() => false));
    const takeover = Math.max(...taken.map((r) => r.start)) - faultAt;
    expect(takeover, 'takeover after the fault, in ms').toBeLessThanOrEqual(2 * leaseMs);
    return runs;
  };
  const reportOnFailure = (): void => {
    // This test's workers: the list is replaced by `afterEach`, which runs before this hook.
    const mine = workers;
    onTestFailed(() => {
      for (const worker of mine) {
        const logs = worker.logs().slice(-20).join('\n  ');
        console.error(`[chaos ${options.name}] worker ${worker.spec.name} logs:\n  ${logs}`);
      }
    });
  };

  describeIfAvailable(options.skip ?? null, `chaos: ${options.name}`, {}, () => {
    afterEach(async () => {
      await Promise.all(workers.map((w) => w.kill()));
      await Promise.all(proxies.map((p) => p.close()));
      workers = [];
      proxies = [];
      await setup?.teardown();
      setup = null;
    }, 30_000);

    const holeTimeout = 10_000 + rounds * 10 * leaseMs;
    it('long jobs across a black hole: the cut-off worker aborts each handler before the healthy worker starts it, and its stop() and its store’s close() return while still cut off', {
      timeout: holeTimeout,
    }, async () => {
      const left = budget(holeTimeout);
      reportOnFailure();
      const { databaseUrl } = options;
      await prepare();
      const network = await proxy();
      const cutOff = spawn('cut-off', network.url(databaseUrl));
      const healthy = spawn('healthy', databaseUrl);
      await Promise.all([cutOff.ready, healthy.ready]);
      for (let round = 1; round <= rounds; round++) {
        const ids = await handOver('chaos-hole', round, cutOff, healthy, left);
        const before = await cutOff.cpu();
        const holeAt = Date.now();
        network.blackHole();
        await until('the jobs to complete elsewhere', () => allDone(ids), left());
        const after = await cutOff.cpu();
        // Bounded while the network is still silent (the test's timeout is the bound).
        await cutOff.stop(leaseMs);
        await network.pass();
        await healthy.stop(leaseMs);

        const runs = expectTakenOver(ids, 'healthy', holeAt);
        const cutOffRuns = runs.filter((r) => r.worker === 'cut-off');
        expect(cutOffRuns.map((r) => r.aborted)).toEqual(ids.map(() => true));
        expect(cpuShare(before, after)).toBeLessThan(MAX_IDLE_CPU_SHARE);
      }
      // Closing the store returns on a silent network too: the worker process exits.
      network.blackHole();
      await cutOff.close();
    });

    const outageTimeout = 30_000 + OUTAGE_MS;
    it('a 10 s outage (connections refused and cut, as a restart looks): nothing lost, every job completes once, recovery within two leases, no spinning meanwhile', {
      timeout: outageTimeout,
    }, async () => {
      const left = budget(outageTimeout);
      reportOnFailure();
      await prepare();
      const network = await proxy();
      const url = network.url(options.databaseUrl);
      const pair = [spawn('a', url), spawn('b', url)];
      await Promise.all(pair.map((w) => w.ready));
      const ids = await enqueue('chaos-outage', 24, { ms: 300 });
      await Promise.all(pair.map((w, i) => w.start(engine('chaos-outage', 3, `outage-${i}`))));
      await until(
        'jobs to flow before the outage',
        async () => completions(pair).size >= 6,
        left(),
      );
      const before = await Promise.all(pair.map((w) => w.cpu()));
      await network.refuse();
      network.cut();
      await sleep(OUTAGE_MS);
      const after = await Promise.all(pair.map((w) => w.cpu()));
      await network.pass();
      const backAt = Date.now();
      await until('every job to complete', () => allDone(ids), left());
      for (const worker of pair) await worker.stop(leaseMs);

      expectNoOverlap(ids);
      expectCompletedOnce(ids);
      const firstStartAfter = Math.min(
        ...pair.flatMap((w) => w.eventsOf('start').map((e) => e.at)).filter((at) => at >= backAt),
      );
      expect(firstStartAfter - backAt).toBeLessThanOrEqual(2 * leaseMs);
      for (const [i, worker] of pair.entries()) {
        const share = cpuShare(
          before[i] as { cpuMs: number; at: number },
          after[i] as { cpuMs: number; at: number },
        );
        expect(share, `CPU share of worker ${worker.spec.name} during the outage`).toBeLessThan(
          MAX_IDLE_CPU_SHARE,
        );
      }
    });

    const poolTimeout = 30_000;
    it('pool exhaustion: handlers holding the pool in transactions longer than a lease lose no lease and nothing deadlocks', {
      timeout: poolTimeout,
    }, async () => {
      const left = budget(poolTimeout);
      reportOnFailure();
      await prepare();
      // Two connections for three handlers and the engine: renewals queued behind them
      // would lose every lease; they have a connection of their own. Waiting for the pool,
      // or a handler's long statement, is not a fault here: the deadlines allow them.
      const worker = spawn('tiny-pool', options.databaseUrl, {
        poolSize: 2,
        sharedPool: true,
        connectTimeoutMs: 10 * leaseMs,
        queryTimeoutMs: 10 * leaseMs,
      });
      await worker.ready;
      const ids = await enqueue('chaos-pool', 3);
      await worker.start(engine('chaos-pool', 3, 'tiny-pool'), {
        work: 'transaction',
        runMs: leaseMs,
      });
      await until(
        'every job to complete',
        async () => {
          // A lost lease will not mend: say so now rather than at the timeout.
          const lost = worker.eventsOf('end').filter((e) => e.aborted);
          if (lost.length > 0) throw new Error(`leases lost under pool exhaustion: ${lost.length}`);
          return allDone(ids);
        },
        left(),
      );
      await worker.stop(leaseMs);

      const runs = expectNoOverlap(ids);
      expect(
        runs.filter((r) => r.aborted),
        'runs whose lease was lost',
      ).toEqual([]);
      expectCompletedOnce(ids);
    });

    const longTxTimeout = 60_000;
    it('long transactions beside the queue (one idle in its transaction, one analytics reader re-reading): workers drain every job once, and neither reader is blocked, ended or sees a job', {
      timeout: longTxTimeout,
    }, async (ctx) => {
      const left = budget(longTxTimeout);
      reportOnFailure();
      const { holdSnapshot } = await prepare();
      if (!holdSnapshot) ctx.skip('no holdSnapshot in the chaos setup');
      const hold = holdSnapshot as () => Promise<HeldSnapshot>;
      // Both open before any job exists: their snapshots must see none, however many pass.
      const idle = await hold();
      const analytics = await hold();
      let reading = true;
      let reads = 0;
      const reader = (async () => {
        while (reading) {
          expect(await analytics.rows(), 'rows the analytics snapshot sees').toBe(0);
          reads++;
          await sleep(100);
        }
      })();
      try {
        const pair = [spawn('a', options.databaseUrl), spawn('b', options.databaseUrl)];
        await Promise.all(pair.map((w) => w.ready));
        await Promise.all(pair.map((w, i) => w.start(engine('chaos-long-tx', 5, `long-tx-${i}`))));
        const ids: string[] = [];
        for (let wave = 0; wave < LONG_TX_WAVES; wave++) {
          ids.push(...(await enqueue('chaos-long-tx', LONG_TX_WAVE_JOBS, { wave })));
          await until(
            `wave ${wave + 1} to complete`,
            async () => completions(pair).size >= ids.length,
            left(),
          );
        }
        await until('every job to complete', () => allDone(ids), left());
        for (const worker of pair) await worker.stop(leaseMs);

        expectNoOverlap(ids);
        expectCompletedOnce(ids);
      } finally {
        reading = false;
        await reader;
      }
      expect(reads, 'reads of the analytics reader during the drain').toBeGreaterThan(1);
      for (const session of [idle, analytics]) {
        expect(await session.open(), 'the session is still in its transaction').toBe(true);
        expect(await session.rows(), 'rows its snapshot sees at the end').toBe(0);
        await session.release();
      }
    });

    const killTimeout = 10_000 + rounds * 10 * leaseMs;
    it('kill -9 of a worker: its jobs run elsewhere once, after its death and within two leases', {
      timeout: killTimeout,
    }, async () => {
      const left = budget(killTimeout);
      reportOnFailure();
      await prepare();
      const healthy = spawn('healthy', options.databaseUrl);
      const victims = Array.from({ length: rounds }, (_, i) =>
        spawn(`victim-${i + 1}`, options.databaseUrl),
      );
      await Promise.all([healthy.ready, ...victims.map((v) => v.ready)]);
      for (let round = 1; round <= rounds; round++) {
        const victim = victims[round - 1] as ChaosWorker;
        const ids = await handOver('chaos-kill', round, victim, healthy, left);
        await victim.kill();
        await until('the jobs to complete elsewhere', () => allDone(ids), left());
        await healthy.stop(leaseMs);

        expectTakenOver(ids, 'healthy', victim.killedAt as number);
      }
    });
  });
}
