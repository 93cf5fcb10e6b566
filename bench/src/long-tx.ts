/**
 * A long transaction beside the queue (issue 27, "Measure"): on PostgreSQL, one worker process
 * (engine defaults, concurrency 10, `peers/drain-worker.ts`) drains no-op jobs for a fixed
 * time while this process keeps a backlog of about 5,000 (topping it up in batches of 1,000):
 * first with nothing else on the server, then beside a session that opened a REPEATABLE READ
 * transaction, read the jobs table and stays idle in it for the whole run (as a forgotten
 * `BEGIN` in a console, or an analytics reader, holds back the server's xmin horizon: no dead
 * row version newer than its snapshot can be removed). Printed per run and per window of the
 * run: jobs/s; at the end, the jobs table's dead tuples and size. The ratio with ÷ without is
 * the target's (≥ 0.5× over 5 minutes).
 *
 * `pnpm bench long-tx [--seconds 300] [--quick] [--alone] [--autovacuum]` (`--quick`: 60 s a
 * run; `--alone`: only the run without the transaction; `--autovacuum`: the jobs table gets its
 * own autovacuum settings, `AUTOVACUUM`).
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { JobEngine, silentLogger } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import pg from 'pg';
import { PG_URL } from './drain-targets.js';
import {
  dropPostgresSchemas,
  enqueueInBatches,
  printTable,
  sleep,
  spawnWorker,
} from './harness.js';
import type { DrainWorkerArgs } from './peers/drain-worker.js';

const WORKER = fileURLToPath(new URL('./peers/drain-worker.ts', import.meta.url));
const BACKLOG = 5_000;
const WINDOWS = 5;
/** `--autovacuum`: the jobs table's own autovacuum settings (the deployment guide's). */
const AUTOVACUUM =
  'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_delay = 0';

interface LongTxRun {
  rate: number;
  windows: number[];
  deadTuples: number;
  liveTuples: number;
  tableMb: number;
}

async function run(seconds: number, holdTransaction: boolean, tuned: boolean): Promise<LongTxRun> {
  const schema = `bench_longtx_${randomBytes(4).toString('hex')}`;
  const store = new PostgresJobStore({ connectionString: PG_URL, schema });
  await store.migrate();
  if (tuned) {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`ALTER TABLE "${schema}".jobs SET (${AUTOVACUUM})`);
    await client.end();
  }
  const engine = new JobEngine({ store, logger: silentLogger, handlers: { noop: async () => {} } });
  // The backlog is what was enqueued less what the worker reports done: counting it in the
  // table would be a scan through every dead row version, which the held horizon keeps, and
  // would load the server with the bench's own reads (a count every 100 ms).
  let enqueued = 0;
  let done = 0;
  const topUp = async () => {
    const missing = BACKLOG - (enqueued - done);
    if (missing <= 0) return;
    const n = Math.ceil(missing / 1_000) * 1_000;
    await enqueueInBatches(n, (payloads) =>
      engine.enqueueMany(payloads.map((payload) => ({ type: 'noop' as const, payload }))),
    );
    enqueued += n;
  };
  await topUp();
  const holder = new pg.Client({ connectionString: PG_URL });
  await holder.connect();
  if (holdTransaction) {
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query(`SELECT count(*) FROM "${schema}".jobs`);
  }
  const args: DrainWorkerArgs = {
    store: 'postgres',
    url: PG_URL,
    namespace: schema,
    concurrency: 10,
  };
  const worker = spawnWorker(WORKER, args);
  try {
    await worker.waitFor('ready');
    void (async () => {
      for (;;) done = await worker.waitFor<number>('progress');
    })();
    worker.send('go');
    const windows: number[] = [];
    const windowMs = (seconds * 1_000) / WINDOWS;
    const started = Date.now();
    let windowStart = started;
    let windowDone = 0;
    while (Date.now() - started < seconds * 1_000) {
      await topUp();
      await sleep(100);
      if (Date.now() - windowStart >= windowMs) {
        windows.push(((done - windowDone) / (Date.now() - windowStart)) * 1_000);
        windowStart = Date.now();
        windowDone = done;
      }
    }
    const rate = (done / (Date.now() - started)) * 1_000;
    worker.send('stop');
    await worker.result;
    const stats = await holder.query(
      `SELECT n_dead_tup AS dead, n_live_tup AS live,
         pg_total_relation_size(format('%I.jobs', $1::text)) AS bytes
       FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'`,
      [schema],
    );
    const row = stats.rows[0] ?? { dead: 0, live: 0, bytes: 0 };
    return {
      rate,
      windows,
      deadTuples: Number(row.dead),
      liveTuples: Number(row.live),
      tableMb: Number(row.bytes) / 1024 / 1024,
    };
  } finally {
    if (worker.child.exitCode === null) worker.kill();
    if (holdTransaction) await holder.query('ROLLBACK').catch(() => {});
    await holder.end();
    await store.close();
    await dropPostgresSchemas(PG_URL, [schema]);
  }
}

export async function runLongTxBench(argv: readonly string[]): Promise<void> {
  const at = argv.indexOf('--seconds');
  const seconds = at >= 0 ? Number(argv[at + 1]) : argv.includes('--quick') ? 60 : 300;
  console.log(
    `long-tx: one worker process (engine defaults, concurrency 10) drains no-op jobs for ${seconds} s, a backlog of ~${BACKLOG} kept topped up; then again beside a REPEATABLE READ session idle in its transaction for the whole run`,
  );
  const tuned = argv.includes('--autovacuum');
  if (tuned) console.log(`  the jobs table: ALTER TABLE … SET (${AUTOVACUUM})`);
  const without = await run(seconds, false, tuned);
  console.log(`  without: ${Math.round(without.rate)} jobs/s`);
  const withTx = argv.includes('--alone') ? null : await run(seconds, true, tuned);
  if (withTx) console.log(`  with an idle transaction: ${Math.round(withTx.rate)} jobs/s`);
  const row = (name: string, r: LongTxRun) => [
    name,
    Math.round(r.rate),
    r.windows.map((w) => Math.round(w)).join(' / '),
    r.deadTuples,
    r.liveTuples,
    r.tableMb.toFixed(1),
  ];
  printTable(
    `PostgreSQL, ${seconds} s a run (windows of ${seconds / WINDOWS} s)`,
    ['run', 'jobs/s', 'jobs/s by window', 'dead tuples (end)', 'live tuples', 'jobs table MiB'],
    withTx
      ? [row('alone', without), row('beside an idle transaction', withTx)]
      : [row('alone', without)],
  );
  if (withTx) {
    console.log(`\n  with ÷ without: ${(withTx.rate / without.rate).toFixed(2)}× (target ≥ 0.5×)`);
  }
}
