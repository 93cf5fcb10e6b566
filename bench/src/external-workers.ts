/**
 * External workers over HTTP (`@jobs/http`) against native handlers on the same store:
 * - throughput: jobs/s of remote no-op workers (4 loops, each acquiring batches of 100 over
 *   loopback HTTP and completing each batch with one `POST /complete`) ÷ one engine (concurrency 50)
 *   draining the same number of no-op jobs (`drainRate`), on fresh tables each run; the issue's
 *   target is ≥ 0.5×;
 * - pickup: how long a long-polling remote worker takes from `engine.enqueue` resolving to its
 *   acquire answering with the job, p50 and p99 (target p50 ≤ 10 ms on PostgreSQL).
 * The two sides alternate within a round so drift on a shared machine hits both.
 *
 * `pnpm bench external [--quick] [sqlite] [postgres] [mysql]` (default: SQLite and PostgreSQL).
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { JobEngine, type JobStore, silentLogger } from '@jobs/core';
import { createWorkerApi } from '@jobs/http';
import { type AcquiredJob, createWorkerClient } from '@jobs/http/client';
import { type DrainTarget, drainRate, drainTargets, median } from './drain-targets.js';

const TOKEN = 'bench-token-0123456789abcdef';
const BATCH = 100;
const LOOPS = 4;

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
    client: createWorkerClient({ url, token: TOKEN }),
    close: async () => {
      api.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Jobs/s of remote no-op workers draining `jobs` jobs over HTTP. */
async function httpRate(target: DrainTarget, jobs: number): Promise<number> {
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
    let done = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: LOOPS }, async (_, n) => {
        for (;;) {
          const batch: AcquiredJob[] = await served.client.acquire({
            types: ['noop'],
            max: BATCH,
            leaseMs: 30_000,
            worker: `w${n}`,
          });
          if (batch.length === 0) return;
          const results = await served.client.completeMany(batch);
          if (results.some((r) => r.outcome !== 'completed'))
            throw new Error('http: a completion was refused');
          done += batch.length;
        }
      }),
    );
    const ms = performance.now() - started;
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
    const rates = { native: [] as number[], http: [] as number[] };
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const order =
          round % 2 === 0 ? (['native', 'http'] as const) : (['http', 'native'] as const);
        for (const side of order) {
          rates[side].push(
            side === 'http'
              ? await httpRate(target, JOBS)
              : await drainRate(target, JOBS, { engine: { handlers: { noop: async () => {} } } }),
          );
        }
      }
      const latencies = await pickups(target, SAMPLES);
      const native = median(rates.native);
      const http = median(rates.http);
      const line = `${target.name.padEnd(9)} http ${http.toFixed(0).padStart(6)} jobs/s ÷ native ${native.toFixed(0).padStart(6)} jobs/s = ${(http / native).toFixed(2)}×   pickup p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms   (runs: http ${rates.http.map((r) => r.toFixed(0)).join(', ')}; native ${rates.native.map((r) => r.toFixed(0)).join(', ')})`;
      console.log(line);
      rows.push(line);
    } catch (error) {
      const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
      console.log(`[bench] external ${target.name}: skipped (${message})`);
    }
  }
  console.log(
    '\n==================== external workers (HTTP, batch 100, no-op) ====================',
  );
  for (const row of rows) console.log(row);
}
