/**
 * One worker of the cluster: a JobEngine on the shared PostgreSQL schema. Start several; they
 * share the work through `FOR UPDATE SKIP LOCKED`, wake each other with LISTEN/NOTIFY, and take
 * over a dead worker's jobs when its leases expire.
 *
 *   WORKER_NAME=w1 pnpm worker
 */
import { JobEngine } from '@jobs/core';
import { PostgresJobStore } from '@jobs/postgres';
import { DATABASE_URL, LEASE_MS, SCHEMA } from './config.js';

const name = process.env.WORKER_NAME ?? `worker-${process.pid}`;
const store = new PostgresJobStore({ connectionString: DATABASE_URL, schema: SCHEMA });

const engine = new JobEngine({
  store,
  owner: name,
  concurrency: 4,
  leaseMs: LEASE_MS,
  handlers: {
    // Pretend to resize an image: 300-900 ms of work, then record who did it.
    'resize-image': async (job, ctx) => {
      const { image } = job.payload as { image: string };
      const retry = ctx.attempt > 1 ? ` (attempt ${ctx.attempt}: taken over)` : '';
      await new Promise((resolve) => setTimeout(resolve, 300 + Math.random() * 600));
      await store.pool.query(
        `INSERT INTO "${SCHEMA}".done (job_id, image, worker) VALUES ($1, $2, $3)`,
        [job.id, image, name],
      );
      console.log(`  [${name}] resized ${image} (job ${job.id})${retry}`);
    },
  },
});

engine.on('error', ({ error, during }) => console.error(`  [${name}] ${during}: ${String(error)}`));
engine.on('leases-recovered', ({ requeued }) => {
  if (requeued.length > 0) {
    console.log(
      `  [${name}] found ${requeued.length} expired lease(s) of a dead worker: jobs ${requeued.join(', ')} are back in the queue`,
    );
  }
});

await engine.start();
console.log(`  [${name}] started (pid ${process.pid})`);

// Ctrl-C / SIGTERM: finish running jobs, give back the prefetched ones, then exit.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, async () => {
    await engine.stop({ timeoutMs: 10_000 });
    await store.close();
    console.log(`  [${name}] stopped`);
    process.exit(0);
  });
}
