// Idle cost of MySQL/MariaDB nodes: statements per second an idle engine sends (counted in this
// process on mysql2's connections), plus the server's Questions delta over the same window
// (noisy when others use the server), the pickup latency of one job enqueued by another store,
// and, for a job delayed by each of `delays` ms, how many nodes acquire at its due time and the
// statements sent around it.
// Usage: node scripts/idle-cost.mjs [nodes=1] [seconds=10] [delays=300,40000]   (needs a build)
import { performance } from 'node:perf_hooks';
import { JobEngine } from '@jobs/core';
import { MysqlJobStore } from '@jobs/mysql';
import mysqlCore from 'mysql2';
import mysql from 'mysql2/promise';

const URL = process.env.JOBS_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const nodes = Number(process.argv[2] ?? 1);
const seconds = Number(process.argv[3] ?? 10);
const delays = (process.argv[4] ?? '300,40000').split(',').filter(Boolean).map(Number);

let statements = 0;
/** With JOBS_TRACE=1: statements by their first words, in the idle and the pickup phases. */
const trace = process.env.JOBS_TRACE === '1' ? new Map() : null;
let tracing = false;
for (const method of ['query', 'execute']) {
  const original = mysqlCore.Connection.prototype[method];
  mysqlCore.Connection.prototype[method] = function (...args) {
    statements++;
    if (trace && tracing) {
      const text = String(typeof args[0] === 'string' ? args[0] : args[0]?.sql);
      const key = text.replace(/\s+/g, ' ').slice(0, 60);
      trace.set(key, (trace.get(key) ?? 0) + 1);
    }
    return original.apply(this, args);
  };
}

/** A job of type `work` numbered `n`, due `delayMs` from its enqueue. */
function newJob(n, delayMs) {
  return {
    type: 'work',
    payload: { n },
    dueAt: null,
    delayMs,
    priority: 0,
    retries: 0,
    scope: null,
    exclusive: false,
    key: null,
    tenantId: null,
    queue: 'default',
    retryPolicy: null,
    schedule: null,
    occurrence: null,
  };
}

const admin = await mysql.createConnection({ uri: URL });
const database = `jobs_idle_${process.pid}`;
await admin.query(`CREATE DATABASE \`${database}\``);
const questions = async () => {
  const [rows] = await admin.query("SHOW GLOBAL STATUS LIKE 'Questions'");
  return Number(rows[0].Value);
};
try {
  const writer = new MysqlJobStore({ uri: URL, database });
  await writer.migrate();
  const started = new Map();
  const picked = [];
  const engines = [];
  for (let i = 0; i < nodes; i++) {
    const store = new MysqlJobStore({ uri: URL, database });
    // Acquisitions of this node, counted around each delayed job's due time.
    const node = { engine: null, store, acquisitions: 0 };
    const acquire = store.acquire.bind(store);
    store.acquire = (request) => {
      node.acquisitions++;
      return acquire(request);
    };
    const engine = new JobEngine({
      store,
      owner: `idle-${i}`,
      handlers: {
        work: async (job) => {
          picked.push(performance.now() - started.get(job.payload.n));
        },
      },
    });
    await engine.start();
    node.engine = engine;
    engines.push(node);
  }
  await new Promise((r) => setTimeout(r, 2_000));
  const before = statements;
  const wakeBefore = engines.reduce((sum, { store }) => sum + store.wakeSignalReads, 0);
  const q0 = await questions();
  const t0 = performance.now();
  tracing = true;
  await new Promise((r) => setTimeout(r, seconds * 1_000));
  tracing = false;
  if (trace) console.log('idle', [...trace].sort((a, b) => b[1] - a[1]).slice(0, 25));
  trace?.clear();
  const elapsed = (performance.now() - t0) / 1000;
  const q1 = await questions();
  const idle = statements - before;
  const wakeIdle = engines.reduce((sum, { store }) => sum + store.wakeSignalReads, 0) - wakeBefore;
  // Pickup: 20 jobs, one at a time, enqueued by a store that runs no engine.
  const pickupStart = statements;
  const pickupT0 = performance.now();
  tracing = true;
  for (let n = 0; n < 20; n++) {
    started.set(n, performance.now());
    await writer.enqueue([newJob(n, 0)]);
    for (let t = 0; t < 500 && picked.length <= n; t++) await new Promise((r) => setTimeout(r, 2));
    await new Promise((r) => setTimeout(r, 300));
  }
  tracing = false;
  if (trace) console.log('pickup', [...trace].sort((a, b) => b[1] - a[1]).slice(0, 25));
  // What the 20 enqueues caused, beyond the idle rate over the same time.
  const pickupSeconds = (performance.now() - pickupT0) / 1000;
  const perEnqueue = (statements - pickupStart - (idle / elapsed) * pickupSeconds) / 20;
  // Delayed jobs: one at a time; the window around each due time counts what it cost.
  const delayed = [];
  for (const [i, delayMs] of delays.entries()) {
    const n = 1_000 + i;
    await writer.enqueue([newJob(n, delayMs)]);
    const due = performance.now() + delayMs;
    started.set(n, due);
    await new Promise((r) => setTimeout(r, Math.max(0, delayMs - 200)));
    const s0 = statements;
    const a0 = engines.map((node) => node.acquisitions);
    const w0 = performance.now();
    for (let t = 0; t < 1_000 && picked.length <= 20 + i; t++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setTimeout(r, Math.max(0, w0 + 1_200 - performance.now())));
    const windowSeconds = (performance.now() - w0) / 1000;
    delayed.push({
      delayMs,
      startedLateMs: Number(picked[20 + i]?.toFixed(1)),
      nodesAcquiring: engines.filter((node, k) => node.acquisitions > a0[k]).length,
      statementsBeyondIdle: Number((statements - s0 - (idle / elapsed) * windowSeconds).toFixed(1)),
    });
  }
  const sorted = [...picked.slice(0, 20)].sort((a, b) => a - b);
  const p = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]?.toFixed(1);
  console.log(
    JSON.stringify({
      nodes,
      seconds: Number(elapsed.toFixed(1)),
      statementsPerSecondPerNode: Number((idle / elapsed / nodes).toFixed(2)),
      wakeStatementsPerSecondPerNode: Number((wakeIdle / elapsed / nodes).toFixed(2)),
      serverQuestionsPerSecond: Number(((q1 - q0) / elapsed).toFixed(1)),
      pickupMs: { p50: p(0.5), p99: p(0.99), n: sorted.length },
      statementsPerEnqueueAllNodes: Number(perEnqueue.toFixed(1)),
      delayed,
    }),
  );
  await Promise.all(engines.map(({ engine }) => engine.stop()));
  await Promise.all(engines.map(({ store }) => store.close()));
  await writer.close();
} finally {
  await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
  await admin.end();
}
