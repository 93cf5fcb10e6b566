/**
 * Child process for the multi-process schedule tests (`schedule-overlap-harness.ts`): a real
 * JobEngine on a real store that defines one schedule and reports each run's start and end to
 * the parent over IPC. Stops gracefully on the `stop` message. Run with `node --import tsx`.
 *
 * argv[2]: JSON of `OverlapWorkerConfig`.
 */
import { pathToFileURL } from 'node:url';
import type { JobStore } from '../src/index.js';
import type { OverlapWorkerConfig, RunEvent } from './schedule-overlap-harness.js';

const config = JSON.parse(process.argv[2] as string) as OverlapWorkerConfig;
// The engine must come from the same build of @jobs/core the store imports (its dist), so
// error classes and helpers are one module instance.
const core = (await import(
  pathToFileURL(config.coreModule).href
)) as typeof import('../src/index.js');
const storeModule = (await import(pathToFileURL(config.storeModule).href)) as Record<
  string,
  new (
    options: unknown,
  ) => JobStore
>;
const StoreClass = storeModule[config.storeClass];
if (!StoreClass) throw new Error(`${config.storeModule} exports no ${config.storeClass}`);
const store = new StoreClass(config.storeOptions);

const send = (event: RunEvent): void => {
  process.send?.(event);
};

const engine = new core.JobEngine({
  store,
  owner: config.owner,
  concurrency: 4,
  leaseMs: 1_500,
  pollIntervalMs: 250,
  handlers: {
    [config.type]: async (_job, ctx) => {
      const occurrence = ctx.occurrence?.toISOString() ?? 'none';
      send({ kind: 'start', owner: config.owner, occurrence, at: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, config.handlerMs));
      send({ kind: 'end', owner: config.owner, occurrence, at: Date.now() });
    },
  },
});

process.on('message', (message) => {
  if (message !== 'stop') return;
  engine
    .stop({ timeoutMs: config.handlerMs * 2 })
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
await engine.schedule(config.schedule, {
  cron: '* * * * * *',
  overlap: config.overlap,
  type: config.type,
});
process.send?.('ready');
