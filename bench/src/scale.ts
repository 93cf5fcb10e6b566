/**
 * Scale-out on PostgreSQL (issue 27, "Measure"): N idle worker processes on one database.
 *
 * - Idle cost: statements per second per idle node (every `pg` `Client#query` of the process,
 *   LISTEN connection included).
 * - One enqueue: the statements it causes on every node together plus the enqueuer's own (also
 *   net of what the idle nodes sent anyway meanwhile, at the idle rate), how many nodes query
 *   for it, and its pickup (enqueue to handler start) p50/p99 — with wake-ups `broadcast`
 *   (every node), `targeted` (a few idle nodes that run the job, the default), and `targeted`
 *   in a mixed pool (every other node runs another job type only). The target: statements per
 *   enqueue flat in N. Then the nodes that query for a job enqueued
 *   300 ms ahead (its wake-up, and its due time: each idle node sleeps until the next due time).
 * - The NOTIFY lock: 16 concurrent enqueuers for a few seconds, sessions waiting on PostgreSQL's
 *   server-wide notify lock (`pg_stat_activity`, wait event `object`, sampled every 5 ms) with
 *   the NOTIFY in the enqueuing transaction (an enqueue in the caller's transaction) and sent
 *   after commit, coalesced (an enqueue on its own).
 *
 * `pnpm bench scale [--quick] [--nodes 1,10,25]` (at `JOBS_PG_URL`). Each N gets fresh schemas;
 * the processes are started before measuring and stopped after. On a shared machine the
 * numbers are a sanity check only.
 */
import { fileURLToPath } from 'node:url';
import { JobEngine, silentLogger } from '@jobs/core';
import { PostgresJobStore, type WakeUps } from '@jobs/postgres';
import pg from 'pg';
import { percentile, printTable, sleep, spawnWorkers, type WorkerHandle } from './harness.js';
import type { ScaleWorkerArgs } from './peers/scale-worker.js';

const PG_URL = process.env.JOBS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const WORKER = fileURLToPath(new URL('./peers/scale-worker.ts', import.meta.url));
const ENQUEUERS = 16;

interface Started {
  ms: number;
  node: number;
}

interface RunResult {
  idlePerNode: number;
  perEnqueue: number;
  /** `perEnqueue` less what the nodes send idle over the same time. */
  netPerEnqueue: number;
  nodesWoken: number;
  p50: number;
  p99: number;
  /** Nodes that query for one job enqueued with a delay, its wake-up and due time included. */
  nodesDelayed: number;
}

async function sql(text: string, values: unknown[] = []): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(text, values);
  } finally {
    await client.end();
  }
}

const freshSchema = (): string => `bench_scale_${Math.random().toString(16).slice(2, 10)}`;

/** Every worker's statement count so far. */
async function counts(workers: readonly WorkerHandle[]): Promise<number[]> {
  return Promise.all(
    workers.map(async (w) => {
      const counted = w.waitFor('counted');
      w.send('count');
      return (await counted) as number;
    }),
  );
}

/**
 * N idle nodes with `wakeUps`: idle cost, then `rounds` single enqueues one at a time. `mixed`:
 * every other node (odd indexes) runs `other` jobs only, not `ping`.
 */
async function runNodes(
  nodes: number,
  wakeUps: WakeUps,
  idleMs: number,
  rounds: number,
  mixed = false,
): Promise<RunResult> {
  const schema = freshSchema();
  const writer = new PostgresJobStore({ connectionString: PG_URL, schema, wakeUps, max: 2 });
  await writer.migrate();
  const client = new JobEngine({ store: writer, logger: silentLogger });
  let writerStatements = 0;
  writer.pool.on('acquire', () => {
    writerStatements++;
  });
  const workers = spawnWorkers(
    nodes,
    WORKER,
    (index): ScaleWorkerArgs => ({
      url: PG_URL,
      schema,
      wakeUps,
      index,
      type: mixed && index % 2 === 1 ? 'other' : 'ping',
    }),
  );
  let onStarted: (s: Started) => void = () => {};
  for (const w of workers) {
    w.child.on('message', (raw) => {
      const m = raw as { type: string; payload: Started };
      if (m.type === 'started') onStarted(m.payload);
    });
  }
  try {
    await Promise.all(workers.map((w) => w.waitFor('ready')));
    // Each node's first pass (acquire, next due time, the idle name) ends.
    await sleep(500);
    const idleFrom = await counts(workers);
    await sleep(idleMs);
    const idleTo = await counts(workers);
    const idleStatements = idleTo.reduce((sum, n, i) => sum + n - (idleFrom[i] ?? 0), 0);

    const pickups: number[] = [];
    let statements = 0;
    let woken = 0;
    let measuredMs = 0;
    for (let round = 0; round < rounds; round++) {
      const from = performance.now();
      const before = await counts(workers);
      const writerBefore = writerStatements;
      const started = new Promise<Started>((resolve) => {
        onStarted = resolve;
      });
      await client.enqueue('ping', { t: Date.now() });
      pickups.push((await started).ms);
      // Nodes woken for nothing finish their queries.
      await sleep(100);
      const after = await counts(workers);
      measuredMs += performance.now() - from;
      statements += writerStatements - writerBefore;
      for (let i = 0; i < nodes; i++) {
        const delta = (after[i] ?? 0) - (before[i] ?? 0);
        statements += delta;
        if (delta > 0) woken++;
      }
    }
    // Delayed jobs: each idle node sleeps until the next due time it sees.
    let delayedWoken = 0;
    const delayedRounds = Math.max(1, Math.floor(rounds / 5));
    for (let round = 0; round < delayedRounds; round++) {
      const before = await counts(workers);
      const started = new Promise<Started>((resolve) => {
        onStarted = resolve;
      });
      await client.enqueue('ping', { t: Date.now() }, { delayMs: 300 });
      await started;
      await sleep(100);
      const after = await counts(workers);
      for (let i = 0; i < nodes; i++) if ((after[i] ?? 0) > (before[i] ?? 0)) delayedWoken++;
    }
    return {
      nodesDelayed: delayedWoken / delayedRounds,
      idlePerNode: idleStatements / nodes / (idleMs / 1000),
      perEnqueue: statements / rounds,
      netPerEnqueue: (statements - (idleStatements / idleMs) * measuredMs) / rounds,
      nodesWoken: woken / rounds,
      p50: percentile(pickups, 50),
      p99: percentile(pickups, 99),
    };
  } finally {
    for (const w of workers) w.send('stop');
    await Promise.all(workers.map((w) => w.result.catch(() => undefined)));
    await writer.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

/** 16 enqueuers for `ms`: enqueues/s and sessions waiting on the notify lock per sample. */
async function notifyLock(
  inTransaction: boolean,
  ms: number,
): Promise<{ perSecond: number; waiting: number; maxWaiting: number }> {
  const schema = freshSchema();
  const store = new PostgresJobStore({ connectionString: PG_URL, schema, max: ENQUEUERS + 4 });
  await store.migrate();
  const engine = new JobEngine({ store, logger: silentLogger });
  const sampler = new pg.Client({ connectionString: PG_URL });
  await sampler.connect();
  let enqueued = 0;
  let running = true;
  const samples: number[] = [];
  try {
    const enqueuer = async (): Promise<void> => {
      while (running) {
        if (inTransaction) {
          const client = await store.pool.connect();
          try {
            await client.query('BEGIN');
            await engine.enqueue('ping', {}, { tx: client });
            await client.query('COMMIT');
          } finally {
            client.release();
          }
        } else {
          await engine.enqueue('ping', {});
        }
        enqueued++;
      }
    };
    const sample = async (): Promise<void> => {
      while (running) {
        const { rows } = await sampler.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND wait_event = 'object'`,
        );
        samples.push(Number(rows[0]?.n));
        await sleep(5);
      }
    };
    const loops = [...Array.from({ length: ENQUEUERS }, enqueuer), sample()];
    await sleep(ms);
    running = false;
    await Promise.all(loops);
  } finally {
    await sampler.end();
    await store.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
  return {
    perSecond: enqueued / (ms / 1000),
    waiting: samples.reduce((a, b) => a + b, 0) / Math.max(1, samples.length),
    maxWaiting: Math.max(0, ...samples),
  };
}

export async function runScaleBench(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const at = argv.indexOf('--nodes');
  const sizes =
    at >= 0
      ? String(argv[at + 1])
          .split(',')
          .map(Number)
      : quick
        ? [1, 3]
        : [1, 10, 25];
  const idleMs = quick ? 2_000 : 10_000;
  const rounds = quick ? 10 : 50;
  console.log(
    `[bench] scale: PostgreSQL, ${sizes.join(', ')} idle nodes${quick ? ' (quick)' : ''} ...`,
  );
  const rows: (string | number)[][] = [];
  for (const nodes of sizes) {
    const runs = [
      ['broadcast', false],
      ['targeted', false],
      ['targeted', true],
    ] as const;
    for (const [wakeUps, mixed] of runs) {
      if (mixed && nodes < 2) continue;
      const r = await runNodes(nodes, wakeUps, idleMs, rounds, mixed);
      rows.push([
        `${nodes} nodes, ${wakeUps}${mixed ? ', mixed' : ''}`,
        r.idlePerNode.toFixed(2),
        r.perEnqueue.toFixed(1),
        r.netPerEnqueue.toFixed(1),
        r.nodesWoken.toFixed(1),
        r.p50.toFixed(1),
        r.p99.toFixed(1),
        r.nodesDelayed.toFixed(1),
      ]);
    }
  }
  printTable(
    'scale (PostgreSQL): idle nodes, one enqueue at a time',
    [
      'run',
      'idle stmts/s per node',
      'stmts per enqueue',
      'net of idle',
      'nodes that query',
      'pickup p50 ms',
      'pickup p99 ms',
      'nodes that query, delayed job',
    ],
    rows,
  );
  const lockMs = quick ? 2_000 : 10_000;
  const lockRows: (string | number)[][] = [];
  for (const inTransaction of [true, false]) {
    const r = await notifyLock(inTransaction, lockMs);
    lockRows.push([
      inTransaction ? 'NOTIFY in the transaction' : 'NOTIFY after commit, coalesced',
      Math.round(r.perSecond),
      r.waiting.toFixed(2),
      r.maxWaiting,
    ]);
  }
  printTable(
    `notify lock: ${ENQUEUERS} concurrent enqueuers, ${lockMs / 1000} s each`,
    ['run', 'enqueues/s', 'waiting on the lock (mean)', 'max'],
    lockRows,
  );
}
