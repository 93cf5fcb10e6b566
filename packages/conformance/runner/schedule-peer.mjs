// Child-process engine for @jobs/conformance's schedule-overlap test. Plain JavaScript for plain
// `node`.
//
// argv[2] is JSON: { module, args, owner, schedule, type, overlap, handlerMs }.
// It opens the store through `module`'s `createStore(args)`, starts a JobEngine from @jobs/core
// that defines a one-second cron schedule `schedule` (jobs of `type`, policy `overlap`) whose
// handler takes `handlerMs`, sends 'ready' over IPC, then {kind:'start'|'end', owner, occurrence,
// at} for every run, and stops gracefully (running handlers finish) on the message 'stop'.
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(process.argv[2] ?? '{}');
const url = isAbsolute(config.module) ? pathToFileURL(config.module).href : config.module;
const mod = await import(url);
if (typeof mod.createStore !== 'function') {
  throw new Error(
    `[@jobs/conformance] schedule-peer: ${config.module} exports no createStore(args)`,
  );
}
const { JobEngine } = await import('@jobs/core');
const store = await mod.createStore(config.args);

const send = (event) => {
  process.send?.(event);
};

const engine = new JobEngine({
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
      (error) => {
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
