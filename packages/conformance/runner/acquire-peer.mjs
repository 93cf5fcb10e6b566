// Child-process peer for @jobs/conformance races. Plain JavaScript so it runs with plain `node`.
//
// argv[2] is JSON: { module, args, owner, types, limit, leaseMs, idlePolls }.
// It imports `module`, calls its exported `createStore(args)`, prints {"ready":true}, waits for
// "go" on stdin, then acquires in a loop until `idlePolls` acquires in a row return nothing,
// and prints {"ids":[...]} with every job id it acquired. Jobs stay leased to it.
import { isAbsolute } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(process.argv[2] ?? '{}');
const url = isAbsolute(config.module) ? pathToFileURL(config.module).href : config.module;
const mod = await import(url);
if (typeof mod.createStore !== 'function') {
  throw new Error(
    `[@jobs/conformance] acquire-peer: ${config.module} exports no createStore(args)`,
  );
}
const store = await mod.createStore(config.args);

const lines = createInterface({ input: process.stdin });
const go = new Promise((resolve) => {
  lines.on('line', (line) => {
    if (line.trim() === 'go') resolve();
  });
});
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
await go;
lines.close();

const ids = [];
let idle = 0;
while (idle < config.idlePolls) {
  const jobs = await store.acquire({
    owner: config.owner,
    limit: config.limit,
    leaseMs: config.leaseMs,
    types: config.types,
    queues: null,
    tenants: null,
  });
  for (const job of jobs) ids.push(job.id);
  if (jobs.length === 0) {
    idle += 1;
    await new Promise((resolve) => setTimeout(resolve, 5));
  } else {
    idle = 0;
  }
}
process.stdout.write(`${JSON.stringify({ ids })}\n`);
await store.close();
