/**
 * The cluster demo: three worker processes share 40 jobs on one PostgreSQL database; after a
 * moment one is killed with SIGKILL (no goodbye, like a crash or an OOM kill). Its leases run
 * out, another worker takes its jobs over, and every job is done.
 *
 *   pnpm start
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { JobEngine } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { DATABASE_URL, LEASE_MS, SCHEMA } from './config.js';

const JOBS = 40;
const WORKERS = ['w1', 'w2', 'w3'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const store = new PostgresJobStore({ connectionString: DATABASE_URL, schema: SCHEMA });
await store.pool.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
await store.migrate();
await store.pool.query(
  `CREATE TABLE "${SCHEMA}".done (job_id bigint, image text, worker text, at timestamptz DEFAULT now())`,
);

// A client engine (no handlers): it only enqueues.
const client = new JobEngine({ store });
await client.enqueueMany(
  Array.from({ length: JOBS }, (_, i) => ({
    type: 'resize-image',
    payload: { image: `photo-${i + 1}.jpg` },
  })),
);
console.log(`enqueued ${JOBS} jobs into schema "${SCHEMA}"; starting ${WORKERS.length} workers\n`);

const worker = fileURLToPath(new URL('./worker.ts', import.meta.url));
const children = new Map<string, ChildProcess>();
for (const name of WORKERS) {
  const child = spawn(process.execPath, ['--import', 'tsx', worker], {
    env: { ...process.env, WORKER_NAME: name },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout?.pipe(process.stdout);
  children.set(name, child);
}

// Let the cluster get going, then kill w1 once it has done some work and holds jobs.
let held: { id: string }[] = [];
for (;;) {
  const { rows } = await store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${SCHEMA}".done WHERE worker = 'w1'`,
  );
  held = (
    await store.pool.query<{ id: string }>(
      `SELECT id::text FROM "${SCHEMA}".jobs WHERE lock_owner = 'w1' ORDER BY id`,
    )
  ).rows;
  if ((rows[0]?.n ?? 0) >= 2 && held.length > 0) break;
  await sleep(20);
}
children.get('w1')?.kill('SIGKILL');
const killedAt = Date.now();
console.log(
  `\n*** killed w1 with SIGKILL while it held jobs ${held.map((r) => r.id).join(', ') || '(none)'}` +
    `\n*** their leases (${LEASE_MS} ms) must expire before anyone else may run them\n`,
);

// Wait until every job is done.
for (;;) {
  const { rows } = await store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${SCHEMA}".jobs`,
  );
  if (rows[0]?.n === 0) break;
  await sleep(200);
}

const { rows: summary } = await store.pool.query<{ worker: string; n: number }>(
  `SELECT worker, count(*)::int AS n FROM "${SCHEMA}".done GROUP BY worker ORDER BY worker`,
);
const { rows: takenOver } = await store.pool.query<{ job_id: string; worker: string; ms: number }>(
  `SELECT job_id::text, worker, (extract(epoch FROM at) * 1000)::float8 AS ms FROM "${SCHEMA}".done
   WHERE worker <> 'w1' AND job_id = ANY($1::bigint[]) ORDER BY job_id`,
  [held.map((r) => r.id)],
);
const { rows: distinct } = await store.pool.query<{ n: number }>(
  `SELECT count(DISTINCT job_id)::int AS n FROM "${SCHEMA}".done`,
);

console.log('\nall jobs done. who did what:');
for (const row of summary) console.log(`  ${row.worker}: ${row.n} job(s)`);
for (const row of takenOver) {
  console.log(
    `  job ${row.job_id} (held by w1 when it died) finished by ${row.worker}, ${Math.round(row.ms - killedAt)} ms after the kill`,
  );
}
console.log(`  ${distinct[0]?.n} of ${JOBS} distinct jobs done`);

for (const [name, child] of children) if (name !== 'w1') child.kill('SIGTERM');
await Promise.all(
  [...children.entries()]
    .filter(([name]) => name !== 'w1')
    .map(([, child]) => new Promise((resolve) => child.once('exit', resolve))),
);
await store.pool.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
await store.close();
