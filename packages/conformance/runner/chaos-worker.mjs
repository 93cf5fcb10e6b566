// Child-process worker for @jobs/conformance chaos tests. Plain JavaScript for plain `node`.
//
// argv[2] is JSON: { module, args, name }. It opens the store through `module`'s
// `createStore(args)` and then obeys the parent over IPC (`spawnChaosWorker` in
// src/chaos/worker.ts): `start` an engine with a plan, `stop` it (timed), report `cpu` time,
// `close`. Every handler run is reported as events with this process's wall clock
// (`Date.now()`, which all processes on the machine share): `start`, then `end` with whether
// its signal was aborted, and `completed` when the engine settled the job.
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(process.argv[2] ?? '{}');
const url = isAbsolute(config.module) ? pathToFileURL(config.module).href : config.module;
const mod = await import(url);
if (typeof mod.createStore !== 'function') {
  throw new Error(
    `[@jobs/conformance] chaos-worker: ${config.module} exports no createStore(args)`,
  );
}
const { JobEngine, StoreError } = await import('@jobs/core');
const opened = await mod.createStore(config.args);
/** Acquisition answers held back this long (`plan.delayAcquireMs`): a slow network, a stall. */
let acquireDelayMs = 0;
const delayed = new Set(['acquire', 'completeAndAcquire']);
const store = new Proxy(opened, {
  get(target, name, receiver) {
    const value = Reflect.get(target, name, receiver);
    if (typeof value !== 'function' || !delayed.has(name)) return value;
    return async (...args) => {
      const answer = await value.apply(target, args);
      if (acquireDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, acquireDelayMs));
      return answer;
    };
  },
});
const send = (message) => {
  if (process.connected) process.send(message);
};
let engine = null;
let errors = 0;

/** Resolves after `ms` (never for Infinity), or as soon as `signal` aborts. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = Number.isFinite(ms) ? setTimeout(resolve, ms) : null;
    signal.addEventListener(
      'abort',
      () => {
        if (timer) clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/** A handler that reports its run and works as the plan says, honouring its signal. */
function handler(plan) {
  return async (job, ctx) => {
    send({ event: 'start', job: job.id, type: job.type, attempt: ctx.attempt, at: Date.now() });
    try {
      const blocked = plan.blockTypes?.includes(job.type) ?? false;
      const ms =
        plan.runMs === 'until-aborted' || blocked
          ? Number.POSITIVE_INFINITY
          : (plan.runMs ?? job.payload?.ms ?? 0);
      if (plan.stepMs !== undefined) {
        // Steps until aborted, reading ctx.signal before each (the documented pattern) and
        // waiting on a plain timer in between, as a handler's own work would.
        for (;;) {
          // A step is stamped when its check is made: a freeze that lands between the check and
          // the step (which no check can catch) counts at the check, while the lease was ours.
          const at = Date.now();
          if (ctx.signal.aborted) break;
          send({ event: 'step', job: job.id, at });
          await new Promise((resolve) => setTimeout(resolve, plan.stepMs));
        }
      } else if (plan.work === 'transaction') {
        if (typeof mod.slowTransaction !== 'function') {
          throw new Error(
            `[@jobs/conformance] chaos-worker: ${config.module} exports no slowTransaction`,
          );
        }
        // The store its module made, not the proxy around it: the module may know it by identity.
        await mod.slowTransaction(opened, ms, ctx.signal);
      } else {
        await sleep(ms, ctx.signal);
      }
      if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error('aborted');
    } finally {
      send({ event: 'end', job: job.id, aborted: ctx.signal.aborted, at: Date.now() });
    }
  };
}

const forward = (level) => (message, data) =>
  send({
    event: 'log',
    level,
    message: data ? `${message} ${JSON.stringify(data)}` : message,
    at: Date.now(),
  });
const logger = {
  debug() {},
  info: forward('info'),
  warn: forward('warn'),
  error: forward('error'),
};

const commands = {
  async start({ engine: options, plan }) {
    if (engine) throw new Error('an engine is already running');
    acquireDelayMs = plan?.delayAcquireMs ?? 0;
    const handlers = Object.fromEntries(options.types.map((type) => [type, handler(plan ?? {})]));
    const { types: _types, ...rest } = options;
    engine = new JobEngine({ ...rest, store, handlers, logger });
    engine.on('completed', ({ job }) => send({ event: 'completed', job: job.id, at: Date.now() }));
    engine.on('error', () => {
      errors += 1;
    });
    // The scenarios' deadlines are short (a connect gives up after a third of a lease): on a
    // loaded machine the first connection may miss one. A worker tries again, as a supervisor
    // would, before it says it is ready; the faults come after that.
    for (let attempt = 1; ; attempt++) {
      try {
        await engine.start();
        return null;
      } catch (error) {
        if (!(error instanceof StoreError) || attempt >= 5) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  },
  async stop({ timeoutMs }) {
    const running = engine;
    engine = null;
    const started = Date.now();
    await running?.stop({ timeoutMs });
    return { ms: Date.now() - started };
  },
  async cpu() {
    const { user, system } = process.cpuUsage();
    return { cpuMs: (user + system) / 1000, at: Date.now(), errors };
  },
  async close() {
    await engine?.stop({ timeoutMs: 1_000 });
    engine = null;
    await store.close();
    setTimeout(() => process.exit(0), 10);
    return null;
  },
};

process.on('message', (message) => {
  const command = commands[message?.cmd];
  if (!command) return;
  command(message).then(
    (value) => send({ reply: message.id, value }),
    (error) => send({ reply: message.id, error: String(error?.stack ?? error) }),
  );
});
send({ event: 'ready', pid: process.pid, at: Date.now() });
