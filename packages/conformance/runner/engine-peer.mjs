// Child-process engine for @jobs/conformance crash tests. Plain JavaScript for plain `node`.
//
// argv[2] is JSON: { module, args, type, concurrency, prefetch, leaseMs }.
// It opens the store through `module`'s `createStore(args)`, starts a JobEngine from
// @jobs/core whose handler never finishes, prints {"ready":true}, then {"started":"<id>"} for
// every job it starts, and runs until it is killed (the test kills it with SIGKILL: a crash).
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(process.argv[2] ?? '{}');
const url = isAbsolute(config.module) ? pathToFileURL(config.module).href : config.module;
const mod = await import(url);
if (typeof mod.createStore !== 'function') {
  throw new Error(`[@jobs/conformance] engine-peer: ${config.module} exports no createStore(args)`);
}
const { JobEngine } = await import('@jobs/core');
const store = await mod.createStore(config.args);
const engine = new JobEngine({
  store,
  concurrency: config.concurrency,
  prefetch: config.prefetch,
  leaseMs: config.leaseMs,
  handlers: {
    [config.type]: (job) => {
      process.stdout.write(`${JSON.stringify({ started: job.id })}\n`);
      return new Promise(() => {});
    },
  },
});
await engine.start();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
setInterval(() => {}, 60_000);
