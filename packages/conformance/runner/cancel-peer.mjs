// Child-process engine for @jobs/conformance cancellation tests. Plain JavaScript for plain `node`.
//
// argv[2] is JSON: { module, args, type, leaseMs }.
// It opens the store through `module`'s `createStore(args)` and starts a JobEngine from
// @jobs/core whose handler reports progress `{ step }` every 50 ms until its signal aborts. It
// prints {"ready":true}, {"started":"<id>"} when a handler starts, {"progress":"<id>"} after the
// first progress report, and {"aborted":"<id>","reason":"<error name>"} when a signal aborts;
// it runs until it is killed (the test kills it with SIGKILL).
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(process.argv[2] ?? '{}');
const url = isAbsolute(config.module) ? pathToFileURL(config.module).href : config.module;
const mod = await import(url);
if (typeof mod.createStore !== 'function') {
  throw new Error(`[@jobs/conformance] cancel-peer: ${config.module} exports no createStore(args)`);
}
const { JobEngine } = await import('@jobs/core');
const store = await mod.createStore(config.args);
const say = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);
const engine = new JobEngine({
  store,
  concurrency: 4,
  prefetch: 0,
  leaseMs: config.leaseMs,
  handlers: {
    [config.type]: (job, ctx) => {
      say({ started: job.id });
      return new Promise((_resolve, reject) => {
        let step = 0;
        const timer = setInterval(() => {
          step += 1;
          ctx.progress({ step });
          if (step === 1) say({ progress: job.id });
        }, 50);
        ctx.signal.addEventListener('abort', () => {
          clearInterval(timer);
          say({ aborted: job.id, reason: ctx.signal.reason?.name ?? String(ctx.signal.reason) });
          reject(ctx.signal.reason);
        });
      });
    },
  },
});
await engine.start();
say({ ready: true });
setInterval(() => {}, 60_000);
