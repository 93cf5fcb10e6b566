/**
 * A JobEngine running on `JsonFileJobStore`: the engine neither knows nor cares that its
 * "database" is one JSON file. Run it with `pnpm start`.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Job, JobEngine, UnrecoverableError } from '@jobs/core';
import { JsonFileJobStore } from './json-file-store.js';

const dir = mkdtempSync(join(tmpdir(), 'jobs-custom-store-'));
const filename = join(dir, 'jobs.json');
const store = new JsonFileJobStore({ filename });
const started = Date.now();
const log = (message: string): void =>
  console.log(`${((Date.now() - started) / 1000).toFixed(2).padStart(5)}s  ${message}`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

let flakyCalls = 0;
const engine = new JobEngine({
  store,
  concurrency: 4,
  leaseMs: 1_000,
  retry: { kind: 'fixed', delayMs: 300 },
  handlers: {
    greet: async (job: Job<{ name: string }>) => {
      await sleep(50);
      log(`greet          hello, ${job.payload.name}`);
    },
    'sync-account': async (job: Job<{ step: number }>) => {
      log(
        `sync-account   ${job.scope} step ${job.payload.step} (exclusive: one at a time, in order)`,
      );
      await sleep(100);
    },
    flaky: async (_job, ctx) => {
      flakyCalls += 1;
      if (ctx.attempt === 1) throw new Error('the remote service is warming up');
      log(`flaky          succeeded on attempt ${ctx.attempt}`);
    },
    'bad-input': async () => {
      throw new UnrecoverableError('the input can never be processed');
    },
  },
});
engine.on('failed', ({ job, error, willRetry }) =>
  log(`${job.type.padEnd(14)} failed: ${error.message} → ${willRetry ? 'retry' : 'deadletter'}`),
);

async function main(): Promise<void> {
  console.log(`JsonFileJobStore at ${filename}\n`);
  await store.migrate();
  await engine.start();

  await engine.enqueue('greet', { name: 'Ada' });
  await engine.enqueue('greet', { name: 'Grace (500 ms later)' }, { delayMs: 500 });
  for (const step of [1, 2, 3]) {
    await engine.enqueue('sync-account', { step }, { scope: 'account-7', exclusive: true });
  }
  await engine.enqueue('flaky', {}, { retries: 2 });
  const bad = await engine.enqueue('bad-input', { row: 17 });
  log(`enqueued 7 jobs; the file is ${statSync(filename).size} bytes`);

  // Done when only the dead-letter job is left.
  while ((await engine.admin.stats()).total > 1 || flakyCalls < 2) await sleep(50);
  await engine.stop();
  await store.close();

  // A new store on the same file reads what the first one left: the dead-letter job.
  const reopened = new JsonFileJobStore({ filename });
  await reopened.migrate();
  const left = await reopened.listJobs({ limit: 10, offset: 0 });
  console.log(`\nAfter stop, the file is ${statSync(filename).size} bytes and holds:`);
  for (const job of left) {
    console.log(`  #${job.id} ${job.type} ${job.state}: ${job.lastError?.message}`);
  }
  console.log(`  (job #${bad.id} waits there for engine.admin.retry or delete)`);
  console.log(`\nRaw file:\n${readFileSync(filename, 'utf8').slice(0, 400)}…`);
  await reopened.close();
  rmSync(dir, { recursive: true, force: true });
}

main().catch(async (error: unknown) => {
  console.error(error);
  await engine.stop().catch(() => undefined);
  process.exitCode = 1;
});
