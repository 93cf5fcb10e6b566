/**
 * Sharded report: one schedule, four shards, two processes.
 *
 * Every few seconds the schedule `sharded-report` fires once — whichever process gets there
 * first — and creates four jobs, one per region. Shard i is exclusive on scope
 * `sharded-report#i`, so the same region never runs twice at once, and the two processes share
 * the shards between them. Each run is printed with the process that ran it; at the end a table
 * shows every occurrence × shard, and the program checks each ran exactly once.
 *
 * DEMO_SECONDS (default 12) and DEMO_EVERY (default PT3S) change the length and the interval.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';
import type { ShardRun } from './worker.js';

const SECONDS = Number(process.env.DEMO_SECONDS ?? 12);
const EVERY = process.env.DEMO_EVERY ?? 'PT3S';
const WORKERS = ['worker-A', 'worker-B'];

const dir = mkdtempSync(join(tmpdir(), 'jobs-sharded-report-'));
const filename = join(dir, 'jobs.db');
const store = new SqliteJobStore({ filename });
await store.migrate();
// A client engine (no handlers): administers schedules and jobs, runs nothing.
const client = new JobEngine({ store });
await client.start();

let started = Date.now();
const clock = (at: number) => `${((at - started) / 1000).toFixed(1).padStart(5)}s`;
const runs: ShardRun[] = [];

console.log(`schedule "sharded-report": every ${EVERY}, 4 shards, on ${WORKERS.join(' and ')}\n`);
const children = WORKERS.map((name) => {
  // Inherits tsx's loader from this process (started with tsx).
  const child = fork(fileURLToPath(new URL('./worker.ts', import.meta.url)), [
    filename,
    name,
    EVERY,
  ]);
  child.on('message', (message) => {
    if (message === 'ready' || typeof message !== 'object') return;
    const run = message as ShardRun;
    runs.push(run);
    console.log(
      `${clock(run.endedAt)}  ${run.worker}  occurrence ${run.occurrence.slice(11, 19)}  ` +
        `shard ${run.shard + 1}/${run.shards} (${run.region.padEnd(5)})  done in ${run.endedAt - run.startedAt} ms`,
    );
  });
  return child;
});
const exits = children.map(
  (child, i) =>
    new Promise<void>((resolve, reject) =>
      child.once('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`${WORKERS[i]} exited with code ${code}`)),
      ),
    ),
);

// Both nodes have defined the schedule and started before the clock runs: a slow start (a busy
// machine, a cold tsx cache) must not eat into the demo's time.
await Promise.all(
  children.map(
    (child) =>
      new Promise<void>((resolve, reject) => {
        const ready = (message: unknown) => {
          if (message !== 'ready') return;
          child.off('message', ready);
          resolve();
        };
        child.on('message', ready);
        child.once('exit', (code) =>
          reject(new Error(`a worker exited with code ${code} before it was ready`)),
        );
      }),
  ),
);
started = Date.now();
await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
// Stop firing, let the shards already created finish, then stop both processes.
await client.pauseSchedule('sharded-report');
console.log(`${clock(Date.now())}  schedule paused; waiting for the last shards`);
while ((await client.admin.listJobs({ schedule: 'sharded-report', limit: 1 })).length > 0) {
  await new Promise((resolve) => setTimeout(resolve, 100));
}
for (const child of children) child.send('stop');
await Promise.all(exits);

// occurrence × shard → who ran it
const occurrences = [...new Set(runs.map((r) => r.occurrence))].sort();
const shards = Math.max(0, ...runs.map((r) => r.shards));
console.log(
  `\n${'occurrence'.padEnd(10)}  ${Array.from({ length: shards }, (_, i) => `shard ${i + 1}`.padEnd(10)).join('')}`,
);
let problems = 0;
for (const occurrence of occurrences) {
  const cells = Array.from({ length: shards }, (_, i) => {
    const ran = runs.filter((r) => r.occurrence === occurrence && r.shard === i);
    if (ran.length !== 1) problems += 1;
    return (ran.map((r) => r.worker).join('+') || 'missing').padEnd(10);
  });
  console.log(`${occurrence.slice(11, 19).padEnd(10)}  ${cells.join('')}`);
}
const [schedule] = await client.admin.listSchedules();
console.log(
  `\n${occurrences.length} occurrences, ${runs.length} shard runs; schedule fired ${schedule?.fired}×, skipped ${schedule?.skipped}×`,
);
await client.stop();
await store.close();
rmSync(dir, { recursive: true, force: true });

if (problems > 0 || occurrences.length === 0) {
  console.log(`PROBLEM: ${problems} occurrence shards did not run exactly once`);
  process.exitCode = 1;
} else {
  console.log('OK: every shard of every occurrence ran exactly once, on one of the two processes');
}
