/**
 * Quickstart: durable jobs on SQLite, no server needed.
 *
 * Enqueues immediate, delayed, long-running, exclusive-scope and failing jobs, shows live
 * progress, prints what happened to each job, then retries the dead one with the admin API.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Job, JobEngine, UnrecoverableError } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';

const LEASE_MS = 1_000;
const started = Date.now();
const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1).padStart(4)}s`;
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });

const dir = mkdtempSync(join(tmpdir(), 'jobs-quickstart-'));
const store = new SqliteJobStore({ filename: join(dir, 'jobs.db') });

/** Each job's path through the lifecycle, as the engine's events report it. */
const paths = new Map<string, string[]>();
const labels = new Map<string, string>();
const step = (job: Job, state: string): void => {
  const path = paths.get(job.id) ?? [];
  if (path[path.length - 1] !== state) path.push(state);
  paths.set(job.id, path);
};

let chargeCardWorks = false;
let videoRuns = 0;
const renewals = new Map<string, number>();
const scopeRunning = new Map<string, number>();

const engine = new JobEngine({
  store,
  concurrency: 5,
  leaseMs: LEASE_MS,
  retry: { kind: 'fixed', delayMs: 400 },
  handlers: {
    'send-email': async (job: Job<{ to: string }>) => {
      await sleep(150);
      log(`send-email      mailed ${job.payload.to}`);
    },
    'render-video': async (_job, ctx) => {
      // Runs three times its lease: the engine renews the lease, so nobody runs it twice.
      videoRuns += 1;
      await sleep(3 * LEASE_MS, ctx.signal);
      log(`render-video    finished after 3 leases (runs so far: ${videoRuns})`);
    },
    'sync-account': async (job: Job<{ step: number }>) => {
      const scope = job.scope as string;
      scopeRunning.set(scope, (scopeRunning.get(scope) ?? 0) + 1);
      log(
        `sync-account    step ${job.payload.step} of ${scope} (running in scope: ${scopeRunning.get(scope)})`,
      );
      await sleep(300);
      scopeRunning.set(scope, (scopeRunning.get(scope) ?? 0) - 1);
    },
    'charge-card': async (_job, ctx) => {
      if (!chargeCardWorks) throw new Error(`payment gateway timeout (attempt ${ctx.attempt})`);
      log('charge-card     charged after the operator retried it');
    },
    'import-file': async () => {
      throw new UnrecoverableError('file format v1 is not supported');
    },
  },
});

function log(message: string): void {
  console.log(`${elapsed()}  ${message}`);
}

engine.on('enqueued', ({ job }) => step(job, job.state));
engine.on('timer-fired', ({ job }) => step(job, 'async'));
engine.on('started', ({ job }) => {
  if (paths.get(job.id)?.at(-1) === 'timer') step(job, 'async');
  step(job, 'running');
});
engine.on('completed', ({ job }) => step(job, 'done'));
engine.on('failed', ({ job, error, willRetry, retryDelayMs }) => {
  step(job, willRetry ? 'timer' : 'deadletter');
  log(
    `${job.type.padEnd(15)} failed: ${error.message} → ${willRetry ? `retry in ${retryDelayMs} ms` : 'deadletter'}`,
  );
});

async function main(): Promise<void> {
  console.log('@jobs quickstart: SQLite store at', join(dir, 'jobs.db'));
  await store.migrate();
  await engine.start();

  const add = async (label: string, type: string, payload: unknown, options = {}): Promise<Job> => {
    const job = await engine.enqueue(type, payload, options);
    labels.set(job.id, label);
    return job;
  };
  await add('email now', 'send-email', { to: 'ada@example.com' });
  await add('email in 1.5 s', 'send-email', { to: 'grace@example.com' }, { delayMs: 1_500 });
  const video = await add('video (3 leases)', 'render-video', { id: 7 });
  for (const n of [1, 2, 3]) {
    await add(
      `account-42 step ${n}`,
      'sync-account',
      { step: n },
      { scope: 'account-42', exclusive: true },
    );
  }
  const card = await add('charge card', 'charge-card', { cents: 1299 }, { retries: 2 });
  await add('import v1 file', 'import-file', { path: 'old.csv' });

  // Live progress, and the long job's lease moving forward while it runs.
  let lastExpiry = 0;
  const progress = setInterval(async () => {
    const stats = await engine.admin.stats();
    const s = stats.byState;
    const done = [...paths.values()].filter((p) => p.at(-1) === 'done').length;
    log(
      `progress: timer ${s.timer} · async ${s.async} · running ${s.running} · deadletter ${s.deadletter} · done ${done}`,
    );
    const current = await engine.admin.getJob(video.id);
    const expiry = current?.lockExpiresAt?.getTime() ?? 0;
    if (current?.state === 'running' && lastExpiry !== 0 && expiry > lastExpiry) {
      log(
        `render-video    lease renewed by ${current.lockOwner}: now expires at +${((expiry - started) / 1000).toFixed(1)}s`,
      );
      renewals.set(current.id, (renewals.get(current.id) ?? 0) + 1);
    }
    if (current?.state === 'running') lastExpiry = expiry;
  }, 500);

  await waitUntil(
    async () =>
      (await engine.admin.stats()).byState.deadletter === 2 &&
      (await engine.admin.stats()).total === 2,
  );
  clearInterval(progress);

  console.log('\nWhat happened to each job:');
  printTable();

  const dead = await engine.admin.listJobs({ state: 'deadletter' });
  console.log(
    `\nDead-letter area: ${dead.map((j) => `${j.type} (#${j.id}: ${j.lastError?.message})`).join(', ')}`,
  );
  console.log(`Operator fixes the gateway and calls engine.admin.retry('${card.id}')`);
  chargeCardWorks = true;
  await engine.admin.retry(card.id);
  step(card, 'retried');
  // A finished job leaves the live table; with history on (the default) getJob finds its record.
  await waitUntil(async () => {
    const job = await engine.admin.getJob(card.id);
    return job === null || job.state === 'finished';
  });
  const record = await engine.admin.getJob(card.id);
  if (record && 'outcome' in record) {
    console.log(`History of #${card.id}: ${record.outcome} after ${record.durationMs} ms`);
  }

  console.log('\nAfter the retry:');
  printTable();
  await engine.stop();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  console.log('\nDone. Read src/main.ts to see how it is wired.');
}

function printTable(): void {
  const rows = [...labels.entries()].map(([id, label]) => {
    const renewed = renewals.get(id);
    const path = (paths.get(id) ?? []).map((s) =>
      s === 'running' && renewed ? `running (lease renewed ${renewed}×, ran ${videoRuns}×)` : s,
    );
    return [id, label, path.join(' → ')];
  });
  const width = Math.max(...rows.map((r) => (r[1] as string).length));
  for (const [id, label, path] of rows) {
    console.log(`  #${(id as string).padEnd(3)} ${(label as string).padEnd(width)}  ${path}`);
  }
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('quickstart: timed out waiting for the jobs');
    await sleep(50);
  }
}

main().catch(async (error: unknown) => {
  console.error(error);
  await engine.stop({ timeoutMs: 1000 }).catch(() => undefined);
  process.exitCode = 1;
});
