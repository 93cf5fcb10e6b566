/**
 * Operations: an app with history on and traces printed to the console, whose database an
 * operator then looks at with the `jobsctl` command (see README.md).
 *
 * One "checkout" request enqueues three jobs in one trace: `send-email` and `resize-image`
 * complete (their results are kept in history), `sync-crm` fails on every attempt and ends in
 * the dead-letter area. The app waits for them, prints a summary and exits.
 *
 * JOBS_DB (default `jobs.db` in the current folder) names the SQLite file.
 */
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobEngine } from '@jobs/core';
import { instrument } from '@jobs/otel';
import { SqliteJobStore } from '@jobs/sqlite';
import { tracerProvider } from './tracing.js';

const filename = resolve(process.env.JOBS_DB ?? 'jobs.db');
const store = new SqliteJobStore({ filename });
await store.migrate();

const tracer = tracerProvider.getTracer('shop');
const engine = new JobEngine({
  store,
  // Keep every finished job (its result, duration, attempts) for a week; `keep: 'failed'`
  // would keep only the ones that did not complete.
  history: { keep: 'all', retention: 'P7D' },
  pollIntervalMs: 100,
  handlers: {
    'send-email': async (job: { payload: { to: string } }) => {
      // A span made in a handler is a child of the run's `jobs.run send-email` span.
      await tracer.startActiveSpan('smtp send', async (span) => {
        await sleep(20);
        span.end();
      });
      return { messageId: `<${Date.now()}@shop.example>`, to: job.payload.to };
    },
    'resize-image': async (job: { payload: { image: string } }) => {
      await sleep(50);
      return { image: job.payload.image, sizes: [64, 256, 1024] };
    },
    'sync-crm': {
      handler: async () => {
        throw new Error('CRM 503: service unavailable');
      },
      // Two attempts, 200 ms apart, then the dead-letter area.
      retries: 1,
      retry: { kind: 'fixed', delayMs: 200 },
    },
  },
});
instrument(engine, { tracerProvider });
await engine.start();

// The request that enqueues: `jobs.enqueue` spans are its children, and each job carries the
// trace context in its row, so its run links back to it (in this process or on another node).
const enqueued = await tracer.startActiveSpan('POST /checkout', async (span) => {
  try {
    return await Promise.all([
      engine.enqueue('send-email', { to: 'ada@example.com' }),
      engine.enqueue('resize-image', { image: 'product-42.png' }),
      engine.enqueue('sync-crm', { order: 42 }),
    ]);
  } finally {
    span.end();
  }
});
const ids = new Set(enqueued.map((job) => job.id));

// Done when none of this run's jobs waits or runs any more.
for (;;) {
  const live = await engine.admin.listJobs({ state: ['timer', 'async', 'running'], limit: 1000 });
  if (!live.some((job) => ids.has(job.id))) break;
  await sleep(50);
}
await engine.stop();

const finished = (await engine.admin.listHistory({ limit: 1000 })).records.filter((record) =>
  ids.has(record.id),
);
const dead = (await engine.admin.listJobs({ state: 'deadletter', limit: 1000 })).filter((job) =>
  ids.has(job.id),
);
console.log('\nSummary');
for (const record of finished) {
  console.log(
    `  job ${record.id} ${record.type.padEnd(12)} ${record.outcome} in ${record.durationMs} ms, result ${JSON.stringify(record.result)}`,
  );
}
for (const job of dead) {
  console.log(
    `  job ${job.id} ${job.type.padEnd(12)} deadletter after ${job.attempts} attempts: ${job.lastError?.message}`,
  );
}
console.log(`\n${finished.length} completed (in history), ${dead.length} in the dead-letter area.`);
console.log(`Look at it as an operator would:\n  pnpm exec jobsctl status --db ${filename}`);

await store.close();
await tracerProvider.shutdown();
