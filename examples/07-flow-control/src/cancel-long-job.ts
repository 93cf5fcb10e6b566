/**
 * A long job that reports its progress, which an operator watches and then cancels.
 *
 * The worker renders a 40-page report, one page every 100 ms, and reports `{ page, of }` with
 * `ctx.progress` after each page: no extra round trip, the value rides on the lease renewal
 * (every `leaseMs / 3`). The operator — another engine on its own connection, as a second
 * process or `jobsctl show` would be — reads the progress with `admin.getJob` and cancels the job
 * half-way with `admin.cancel`. The worker learns it from its next lease renewal, its
 * `ctx.signal` aborts with a `CancelledError`, and the job ends `cancelled`: never retried, its
 * last progress kept in history.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CancelledError, JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';

const PAGES = 40;

export async function cancelLongJob(filename: string): Promise<void> {
  console.log('— a long job with progress, cancelled by an operator —');
  const workerStore = new SqliteJobStore({ filename });
  await workerStore.migrate();
  let reason: unknown = null;
  const worker = new JobEngine({
    store: workerStore,
    // Renewed every second: a cancel reaches the running job within about a second.
    leaseMs: 3_000,
    pollIntervalMs: 100,
    handlers: {
      'render-report': async (job: { payload: { report: string } }, ctx) => {
        for (let page = 1; page <= PAGES; page++) {
          try {
            await sleep(100, undefined, { signal: ctx.signal }); // "render" one page
          } catch (error) {
            // The signal aborted: its reason says why (a CancelledError when an operator
            // cancelled). Whatever the handler does now, the job ends cancelled.
            reason = ctx.signal.reason;
            throw error;
          }
          ctx.progress({ page, of: PAGES });
        }
        return { report: job.payload.report, pages: PAGES };
      },
    },
  });
  worker.on('cancelled', ({ job, durationMs }) =>
    console.log(
      `worker:   job ${job.id} ended cancelled after ${durationMs} ms; it will not be retried`,
    ),
  );
  worker.on('failed', ({ job }) => console.log(`worker:   job ${job.id} failed (not expected)`));
  await worker.start();

  // The operator: an engine without handlers (a client) on a connection of its own.
  const operatorStore = new SqliteJobStore({ filename });
  const operator = new JobEngine({ store: operatorStore });
  const job = await operator.enqueue('render-report', { report: 'Q3 sales' });
  console.log(`operator: enqueued job ${job.id} (render-report, ${PAGES} pages)`);

  worker.on('started', ({ job: started }) => {
    if (started.id === job.id) console.log(`worker:   job ${job.id} started`);
  });
  // Watch the stored progress (a heartbeat writes it about once a second) until a quarter is done.
  let shown = 0;
  while (shown < PAGES / 4) {
    await sleep(100);
    const seen = await operator.admin.getJob(job.id);
    const progress = seen?.progress as { page: number; of: number } | null | undefined;
    if (!progress || progress.page === shown) continue;
    shown = progress.page;
    console.log(`operator: job ${job.id} is at page ${progress.page} of ${progress.of}`);
  }
  const outcome = await operator.admin.cancel(job.id);
  console.log(`operator: cancel → ${outcome} (running: its owner stops it at its next renewal)`);

  const record = await waitForHistory(operator, job.id);
  const last = record.progress as { page: number; of: number };
  console.log(
    `operator: job ${job.id} finished with outcome ${record.outcome}, stopped at page ${last.page} of ${last.of}`,
  );
  console.log(`operator: cancel again → ${await operator.admin.cancel(job.id)}`);

  // A job that has not started yet is removed at once.
  const later = await operator.enqueue(
    'render-report',
    { report: 'Q4 sales' },
    { delayMs: 60_000 },
  );
  console.log(
    `operator: cancel job ${later.id} (waiting) → ${await operator.admin.cancel(later.id)}`,
  );

  await worker.stop();
  await Promise.all([workerStore.close(), operatorStore.close()]);
  const name = reason instanceof CancelledError ? 'CancelledError' : String(reason);
  console.log(`worker:   the handler's signal aborted with a ${name}\n`);
}

/** The job's history record, once it has one. */
async function waitForHistory(engine: JobEngine, id: string) {
  for (;;) {
    const found = await engine.admin.getJob(id);
    if (found?.state === 'finished') return found;
    await sleep(50);
  }
}
