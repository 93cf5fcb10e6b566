/**
 * External workers over HTTP (`@jobs/http`) against native handlers on the same store:
 * - throughput: jobs/s of remote no-op workers (4 loops, each acquiring batches of 100 over
 *   loopback HTTP, each batch's completions riding on the loop's next acquire, `complete` in
 *   `POST /acquire`: one request per batch) ÷ one engine (concurrency 50)
 *   draining the same number of no-op jobs (`drainRate`), on fresh tables each run; the issue's
 *   target is ≥ 0.5×;
 * - pickup: how long a long-polling remote worker takes from `engine.enqueue` resolving to its
 *   acquire answering with the job, p50 and p99 (target p50 ≤ 10 ms on PostgreSQL).
 * The remote loops run twice per round: in a child process of their own (`process`, the main
 * figure: a real external worker is another process, often in another language, so its JSON and
 * HTTP work is not the server's), and in the bench process itself (`same process`: the client's
 * `fetch`, JSON encoding and decoding share the server's one thread, as before). The child is
 * forked and has loaded the client before the clock starts; it is told the server's address and
 * reports how many completions the server acknowledged.
 * The sides alternate within a round so drift on a shared machine hits each.
 *
 * `pnpm bench external [--quick] [sqlite] [postgres] [mysql]` (default: SQLite and PostgreSQL).
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { JobEngine, type JobStore, silentLogger } from '@jobs/core';
import { createWorkerApi } from '@jobs/http';
import { type AcquiredJob, createWorkerClient } from '@jobs/http/client';
import { type DrainTarget, drainRate, drainTargets, median } from './drain-targets.js';

const TOKEN = 'bench-token-0123456789abcdef';
const BATCH = 100;
const LOOPS = 4;
/** Set in the forked child that runs the remote loops (`process` side). */
const CHILD_ENV = 'JOBS_BENCH_EXTERNAL_LOOPS';

/**
 * The remote workers: `LOOPS` loops, each acquiring up to `BATCH` jobs per request with the
 * completions of its previous batch riding on it, until an acquire finds nothing. Returns how
 * many completions the server acknowledged (a refused one throws).
 */
async function remoteLoops(url: string): Promise<number> {
  const client = createWorkerClient({ url, token: TOKEN });
  let done = 0;
  await Promise.all(
    Array.from({ length: LOOPS }, async (_, n) => {
      let held: AcquiredJob[] = [];
      for (;;) {
        const { jobs: batch, results } = await client.completeAndAcquire(held, {
          types: ['noop'],
          max: BATCH,
          leaseMs: 30_000,
          worker: `w${n}`,
        });
        if (results.some((r) => r.outcome !== 'completed'))
          throw new Error('http: a completion was refused');
        done += held.length;
        if (batch.length === 0) return;
        held = batch;
      }
    }),
  );
  return done;
}

type ChildMessage = { ready?: true; done?: number; error?: string };

/**
 * A forked child process that runs the remote loops on request (`run(url)`: their count and the
 * elapsed ms). One child serves every round, so its code is as warm as the bench process's.
 */
function workerProcess() {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [CHILD_ENV]: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit');
  const message = (): Promise<ChildMessage> =>
    Promise.race([
      once(child, 'message').then(([m]) => m as ChildMessage),
      exited.then(([code]) => {
        throw new Error(`http: the worker process exited (${String(code)})`);
      }),
    ]);
  const loaded = message();
  return {
    /** Resolves once the child has loaded the client. */
    ready: async (): Promise<void> => {
      await loaded;
    },
    async run(url: string): Promise<{ done: number; ms: number }> {
      await loaded;
      const started = performance.now();
      child.send({ url });
      const answer = await message();
      const ms = performance.now() - started;
      if (answer.error !== undefined) throw new Error(answer.error);
      return { done: answer.done as number, ms };
    },
    async close(): Promise<void> {
      if (child.exitCode === null) child.kill();
      await exited.catch(() => {});
    },
  };
}
type WorkerProcess = ReturnType<typeof workerProcess>;

if (process.env[CHILD_ENV] === '1' && process.send) {
  // The forked child: for each server address it is sent, run the loops and report.
  process.on('message', (message: { url: string }) => {
    remoteLoops(message.url).then(
      (done) => process.send?.({ done }),
      (error: unknown) =>
        process.send?.({ error: error instanceof Error ? error.message : String(error) }),
    );
  });
  process.send({ ready: true });
}

async function serve(store: JobStore) {
  const api = createWorkerApi({
    store,
    clients: [{ token: TOKEN, types: ['noop'], maxAcquire: BATCH }],
    logger: silentLogger,
  });
  const server = createServer(api.handler);
  // Keep-alive sockets: a worker's calls reuse one connection, as a real client's do.
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    client: createWorkerClient({ url, token: TOKEN }),
    close: async () => {
      api.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Jobs/s of remote no-op workers draining `jobs` jobs over HTTP: their loops in `child` (a
 * worker process), or in this process when null.
 */
async function httpRate(
  target: DrainTarget,
  jobs: number,
  child: WorkerProcess | null,
): Promise<number> {
  const { store, cleanup } = await target.open();
  const served = await serve(store);
  try {
    const engine = new JobEngine({ store, logger: silentLogger });
    for (let i = 0; i < jobs; i += 1000) {
      await engine.enqueueMany(
        Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({
          type: 'noop',
          payload: { i: i + k },
        })),
      );
    }
    let done: number;
    let ms: number;
    if (child !== null) ({ done, ms } = await child.run(served.url));
    else {
      const started = performance.now();
      done = await remoteLoops(served.url);
      ms = performance.now() - started;
    }
    if (done !== jobs) throw new Error(`http: ${done} of ${jobs} jobs done`);
    return (jobs / ms) * 1000;
  } finally {
    await served.close();
    await store.close();
    await cleanup();
  }
}

/** Pickup latencies (ms) of a long-polling remote worker, one job at a time. */
async function pickups(target: DrainTarget, samples: number): Promise<number[]> {
  const { store, cleanup } = await target.open();
  const served = await serve(store);
  const engine = new JobEngine({ store, logger: silentLogger });
  const latencies: number[] = [];
  try {
    for (let n = 0; n < samples; n++) {
      const waiting = served.client.acquire({ types: ['noop'], waitMs: 10_000, leaseMs: 30_000 });
      // Let the acquire reach its wait before the job comes.
      await new Promise((resolve) => setTimeout(resolve, 20));
      await engine.enqueue('noop', { n });
      const enqueued = performance.now();
      const [job] = await waiting;
      latencies.push(performance.now() - enqueued);
      if (!job) throw new Error('pickup: the long-poll ended without the job');
      await served.client.complete(job);
    }
    return latencies;
  } finally {
    await served.close();
    await store.close();
    await cleanup();
  }
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
};

export async function runExternalWorkersBench(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const JOBS = quick ? 2_000 : 10_000;
  const ROUNDS = quick ? 1 : 3;
  const SAMPLES = quick ? 20 : 100;
  const named = argv.filter((arg) => !arg.startsWith('-'));
  const targets = drainTargets('external', true).filter((target) =>
    named.length === 0 ? target.name !== 'mysql' : named.includes(target.name),
  );
  const rows: string[] = [];
  for (const target of targets) {
    const rates = { native: [] as number[], process: [] as number[], same: [] as number[] };
    const child = workerProcess();
    try {
      await child.ready(); // its start-up competes with no measured run
      for (let round = 0; round < ROUNDS; round++) {
        const sides = ['native', 'process', 'same'] as const;
        // Each round starts with another side, so drift hits each.
        const order = sides.map(
          (_, i) => sides[(i + round) % sides.length] as (typeof sides)[number],
        );
        for (const side of order) {
          rates[side].push(
            side === 'native'
              ? await drainRate(target, JOBS, { engine: { handlers: { noop: async () => {} } } })
              : await httpRate(target, JOBS, side === 'process' ? child : null),
          );
        }
      }
      const latencies = await pickups(target, SAMPLES);
      const native = median(rates.native);
      const runs = (side: keyof typeof rates) => rates[side].map((r) => r.toFixed(0)).join(', ');
      const ratio = (side: 'process' | 'same', label: string) => {
        const http = median(rates[side]);
        return `${target.name.padEnd(9)} http (${label}) ${http.toFixed(0).padStart(6)} jobs/s ÷ native ${native.toFixed(0).padStart(6)} jobs/s = ${(http / native).toFixed(2)}×   (runs: http ${runs(side)}; native ${runs('native')})`;
      };
      const lines = [
        ratio('process', 'worker process'),
        ratio('same', 'same process  '),
        `${target.name.padEnd(9)} pickup p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`,
      ];
      for (const line of lines) console.log(line);
      rows.push(...lines);
    } catch (error) {
      const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
      console.log(`[bench] external ${target.name}: skipped (${message})`);
    } finally {
      await child.close();
    }
  }
  console.log(
    '\n==================== external workers (HTTP, batch 100, no-op) ====================',
  );
  for (const row of rows) console.log(row);
}
