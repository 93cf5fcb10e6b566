/**
 * External workers: a Node process serves the @jobs worker API over a SQLite file, and a Python
 * process (jobs_worker.py, standard library only) works its jobs by running a shell script per
 * job. No engine runs anywhere: the API leases, fences and recovers jobs itself.
 *
 * JOBS_DB (default `external-worker.db` in the current folder) names the SQLite file.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { JobAdmin, JobEngine } from '@jobs/core';
import { createWorkerApi } from '@jobs/http';
import { SqliteJobStore } from '@jobs/sqlite';

const store = new SqliteJobStore({
  filename: resolve(process.env.JOBS_DB ?? 'external-worker.db'),
});
await store.migrate();
// An engine without handlers is a client: it enqueues, and runs nothing.
const engine = new JobEngine({ store, history: { keep: 'all' } });
const admin = new JobAdmin(store);

// One client: the Python worker, allowed jobs of type `backup` only.
const token = randomBytes(24).toString('base64url');
const api = createWorkerApi({ store, clients: [{ token, name: 'python', types: ['backup'] }] });
const server = createServer(api.handler).listen(0, '127.0.0.1');
await once(server, 'listening');
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
console.log(`worker API at ${url} (GET ${url}/openapi.json describes it)`);

const jobs = {
  docs: await engine.enqueue('backup', { name: 'docs', steps: 3 }),
  flaky: await engine.enqueue('backup', { name: 'flaky', steps: 2 }, { retry: 'R3/PT1S' }),
  broken: await engine.enqueue('backup', { steps: 1 }),
};

// Four runs (flaky fails once and is retried), then the worker exits by itself.
const worker = spawn(
  'python3',
  [
    'jobs_worker.py',
    '--url',
    url,
    '--type',
    'backup',
    '--script',
    'scripts/backup.sh',
    '--max-jobs',
    '4',
    '--lease-ms',
    '2000',
  ],
  { env: { ...process.env, JOBS_TOKEN: token, STEP_SECONDS: '0.2' }, stdio: 'inherit' },
);
const [code] = await once(worker, 'exit');
console.log(`python worker exited with ${code}`);

for (const [name, job] of Object.entries(jobs)) {
  const now = await admin.getJob(job.id);
  if (now && 'outcome' in now) {
    console.log(
      `${name.padEnd(7)} ${now.outcome} after ${now.attempts} attempt(s): ${JSON.stringify(now.result)}`,
    );
  } else if (now) {
    console.log(
      `${name.padEnd(7)} ${now.state} after ${now.attempts} attempt(s): ${now.lastError?.message}`,
    );
  }
}

api.close();
server.close();
await store.close();
