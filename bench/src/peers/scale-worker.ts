/**
 * One idle node of `pnpm bench scale` (`../scale.ts`): an engine on a `PostgresJobStore` of its
 * own that runs jobs of one type (`ping`, or another in a mixed pool; payload `{ t }`, the enqueuer's `Date.now()`) and reports each
 * one's pickup (`started`, ms from enqueue to handler start; same machine, same clock). Answers
 * `count` with the statements it has sent so far (every `pg` `Client#query`, the LISTEN
 * connection's included).
 *
 * Protocol (harness `serveWorker`): start → `ready`; `count` → `counted`; `stop` → result.
 */
import { JobEngine, silentLogger } from '@jobs/core';
import { PostgresJobStore, type WakeUps } from '@jobs/postgres';
import { countPgQueries, serveWorker } from '../harness.js';

export interface ScaleWorkerArgs {
  url: string;
  schema: string;
  wakeUps: WakeUps;
  index: number;
  /** The one job type the node runs. Default `ping`. */
  type?: string;
}

const queries = countPgQueries();

serveWorker<ScaleWorkerArgs, { statements: number }>(async (args, io) => {
  const store = new PostgresJobStore({
    connectionString: args.url,
    schema: args.schema,
    wakeUps: args.wakeUps,
    max: 4,
  });
  const engine = new JobEngine({
    store,
    owner: `scale-${args.index}`,
    concurrency: 2,
    logger: silentLogger,
    handlers: {
      [args.type ?? 'ping']: async (job) => {
        const { t } = job.payload as { t: number };
        io.send('started', { ms: Date.now() - t, node: args.index });
      },
    },
  });
  await engine.start();
  await store.listening();
  io.send('ready');
  let stopped = false;
  const answer = async (): Promise<void> => {
    while (!stopped) {
      await io.waitFor('count');
      io.send('counted', queries());
    }
  };
  void answer();
  await io.waitFor('stop');
  stopped = true;
  await engine.stop();
  await store.close();
  return { statements: queries() };
});
