/**
 * One node of the cluster: a JobEngine on the shared SQLite file. It (re)defines the sharded
 * schedule — every node does, the definition is idempotent — and runs whatever shards it
 * acquires, telling the parent process about each run.
 *
 * argv: <database file> <worker name> <schedule interval, ISO-8601>
 */
import { type Job, JobEngine } from '@jobs/core';
import { SqliteJobStore } from '@jobs/sqlite';

/** What a run reports to the parent. */
export interface ShardRun {
  worker: string;
  occurrence: string;
  shard: number;
  shards: number;
  region: string;
  startedAt: number;
  endedAt: number;
}

const [filename, worker, every] = process.argv.slice(2) as [string, string, string];
const REGIONS = ['eu', 'us', 'apac', 'latam'];

const store = new SqliteJobStore({ filename });
const engine = new JobEngine({
  store,
  owner: worker,
  // Two shards at a time and no prefetch, so the other process gets its share of the four.
  concurrency: 2,
  prefetch: 0,
  leaseMs: 2_000,
  handlers: {
    'regional-report': async (job: Job<{ title: string }>, ctx) => {
      const shard = ctx.shard ?? { index: 0, count: 1 };
      const region = REGIONS[shard.index] ?? `region-${shard.index}`;
      const startedAt = Date.now();
      // Pretend to build this region's part of the report.
      await new Promise((resolve) => setTimeout(resolve, 200 + Math.random() * 800));
      const run: ShardRun = {
        worker,
        occurrence: ctx.occurrence?.toISOString() ?? 'none',
        shard: shard.index,
        shards: shard.count,
        region,
        startedAt,
        endedAt: Date.now(),
      };
      process.send?.(run);
      ctx.log.info(`${job.payload.title}: ${region} done`);
    },
  },
});

process.on('message', (message) => {
  if (message !== 'stop') return;
  engine
    .stop({ timeoutMs: 5_000 })
    .then(() => store.close())
    .then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
});

await engine.start();
await engine.schedule('sharded-report', {
  every,
  shards: REGIONS.length,
  type: 'regional-report',
  payload: { title: 'revenue by region' },
  overlap: 'skip',
});
process.send?.('ready');
