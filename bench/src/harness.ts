/**
 * Shared helpers for every bench suite: timing, percentiles, tables, paced loops, worker
 * processes, and the phases several suites measure alike (bulk and single enqueue, one engine
 * draining a store, timed runs of worker processes, pickup latency). Suites (`sqlite.ts`,
 * `postgres.ts`, `mysql.ts`, `typeorm.ts`) export
 * `run<Name>Bench(options: BenchOptions): Promise<BenchReport>`; `index.ts` runs them and prints
 * their reports.
 *
 * Keep this file stable: several suites depend on it.
 *
 * @example
 * const t = startTimer();
 * await doWork();
 * const ms = t.ms();
 * printTable('sqlite', ['metric', 'value'], [['enqueue/s', fmtRate(1000 / ms)]]);
 */
import { type ChildProcess, fork } from 'node:child_process';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { JobEngine, type JobStore } from '@jobs/core';
import pg from 'pg';

/** Options every suite receives. */
export interface BenchOptions {
  /** Fewer jobs and shorter phases, for a smoke run (`pnpm bench --quick`). */
  quick: boolean;
}

/** One measured number. `higherIsBetter` decides how ratios are read. */
export interface BenchMeasure {
  /** What was measured, e.g. `throughput 1 proc (jobs/s)`. */
  metric: string;
  /** Contender name, e.g. `@jobs/postgres`, `graphile-worker`. */
  contender: string;
  value: number;
  unit: string;
  higherIsBetter: boolean;
}

/** What a suite returns; `index.ts` prints a summary of all suites. */
export interface BenchReport {
  suite: string;
  measures: BenchMeasure[];
  /** Free-form lines printed under the suite's table (configuration, caveats). */
  notes: string[];
  /**
   * The contenders ratios are taken from (`ours ÷ each other`), e.g. our default and our tuned
   * configuration. Default: the first contender seen.
   */
  ours?: string[];
}

/** A suite entry point as exported by `bench/src/<suite>.ts`: one report, or several tables. */
export type BenchSuite = (options: BenchOptions) => Promise<BenchReport | BenchReport[]>;

/** A report being filled: `add` puts a measure in `contender`'s column, named by `name`. */
export interface ReportParts<C> {
  measures: BenchMeasure[];
  notes: string[];
  add(metric: string, contender: C, value: number, unit: string, higherIsBetter: boolean): void;
}

export function reportParts<C>(name: (contender: C) => string): ReportParts<C> {
  const measures: BenchMeasure[] = [];
  return {
    measures,
    notes: [],
    add: (metric, contender, value, unit, higherIsBetter) => {
      measures.push({ metric, contender: name(contender), value, unit, higherIsBetter });
    },
  };
}

/** Jobs per phase of the server suites (postgres, mysql), which measure the same way. */
export function serverSuiteSizes(options: BenchOptions): {
  /** No-op jobs of each throughput run. */
  total: number;
  /** Pickup latency samples per contender. */
  latencyJobs: number;
  /** Single enqueues per contender. */
  singles: number;
} {
  return options.quick
    ? { total: 5_000, latencyJobs: 100, singles: 500 }
    : { total: 20_000, latencyJobs: 300, singles: 2_000 };
}

// ---------------------------------------------------------------------------------------------
// timing

/** High-resolution time in ms (fractional). */
export function nowMs(): number {
  return performance.now();
}

/** A started stopwatch. */
export interface Timer {
  /** Elapsed ms since start. */
  ms(): number;
}

export function startTimer(): Timer {
  const start = performance.now();
  return { ms: () => performance.now() - start };
}

/** Runs `fn` and returns its result with the elapsed ms. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const t = startTimer();
  const result = await fn();
  return { ms: t.ms(), result };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Calls `fn(i)` `count` times at `perSecond`, on schedule (not "sleep after each call"), without
 * waiting for one call to finish before the next starts. Resolves when all calls resolved.
 */
export async function paced(
  count: number,
  perSecond: number,
  fn: (i: number) => Promise<void>,
): Promise<void> {
  const interval = 1000 / perSecond;
  const start = performance.now();
  const pending: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const wait = start + i * interval - performance.now();
    if (wait > 1) await sleep(wait);
    pending.push(fn(i));
  }
  await Promise.all(pending);
}

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passes (then throws). */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  everyMs = 20,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await sleep(everyMs);
  }
}

// ---------------------------------------------------------------------------------------------
// statistics

/** The `p`-th percentile (0..100) of `samples`, nearest-rank. NaN when empty. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export interface Summary {
  count: number;
  min: number;
  mean: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    count: sorted.length,
    min: sorted[0] ?? Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

/** One `ms` measure (lower is better) per percentile `p` of `samples`, named `metric(p)`. */
export function latencyMeasures(
  contender: string,
  samples: readonly number[],
  metric: (p: number) => string,
  percentiles: readonly number[] = [50, 95, 99],
): BenchMeasure[] {
  return percentiles.map((p) => ({
    metric: metric(p),
    contender,
    value: percentile(samples, p),
    unit: 'ms',
    higherIsBetter: false,
  }));
}

// ---------------------------------------------------------------------------------------------
// formatting

/** `12345.6` → `12,346`; small numbers keep 1–2 decimals. */
export function fmtNum(value: number): string {
  if (!Number.isFinite(value)) return '—';
  const digits = Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2;
  return value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

export function fmtRate(perSecond: number): string {
  return `${fmtNum(perSecond)}/s`;
}

export function fmtMs(ms: number): string {
  return `${fmtNum(ms)} ms`;
}

/** `ours ÷ theirs` as `1.83×`, or `—` when either side is missing. */
export function fmtRatio(ours: number, theirs: number): string {
  if (!Number.isFinite(ours) || !Number.isFinite(theirs) || theirs === 0) return '—';
  return `${(ours / theirs).toFixed(2)}×`;
}

/** Prints an aligned text table (first column left-aligned, the rest right-aligned). */
export function printTable(
  title: string,
  headers: readonly string[],
  rows: readonly (readonly (string | number)[])[],
): void {
  const cells = [headers, ...rows].map((r) =>
    r.map((c) => (typeof c === 'number' ? fmtNum(c) : c)),
  );
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]): string =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  console.log(`\n${title}`);
  console.log(line(cells[0] ?? []));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of cells.slice(1)) console.log(line(r));
}

/**
 * Prints a report: one row per metric, one column per contender, then `ours ÷ <each other>`
 * ratios where `ours` is the first contender seen.
 */
export function printReport(report: BenchReport): void {
  const contenders = [...new Set(report.measures.map((m) => m.contender))];
  const metrics = [...new Set(report.measures.map((m) => m.metric))];
  const ours = report.ours?.filter((c) => contenders.includes(c)) ?? contenders.slice(0, 1);
  const others = contenders.filter((c) => !ours.includes(c));
  const pairs = ours.flatMap((o) => others.map((c) => [o, c] as const));
  const get = (metric: string, contender: string | undefined): BenchMeasure | undefined =>
    report.measures.find((m) => m.metric === metric && m.contender === contender);
  const rows = metrics.map((metric) => [
    metric,
    ...contenders.map((c) => {
      const m = get(metric, c);
      return m ? `${fmtNum(m.value)} ${m.unit}` : '—';
    }),
    ...pairs.map(([o, c]) => {
      const mine = get(metric, o);
      const theirs = get(metric, c);
      return mine && theirs ? fmtRatio(mine.value, theirs.value) : '—';
    }),
  ]);
  printTable(
    `== ${report.suite} ==`,
    ['metric', ...contenders, ...pairs.map(([o, c]) => `${o} ÷ ${c}`)],
    rows,
  );
  for (const note of report.notes) console.log(`  ${note}`);
}

// ---------------------------------------------------------------------------------------------
// worker processes

type Message = { type: string; payload?: unknown };

/** A worker child process seen from the parent. */
export interface WorkerHandle {
  readonly pid: number;
  readonly child: ChildProcess;
  /** Sends a message the worker can `waitFor(type)`. */
  send(type: string, payload?: unknown): void;
  /** Resolves with the payload of the first (buffered) message of `type` from the worker. */
  waitFor<T = unknown>(type: string): Promise<T>;
  /** The value the worker function returned; rejects if it threw or the process died. */
  readonly result: Promise<unknown>;
  kill(signal?: NodeJS.Signals): void;
}

/** The worker side: messages to and from the parent. */
export interface WorkerIo {
  send(type: string, payload?: unknown): void;
  waitFor<T = unknown>(type: string): Promise<T>;
}

function mailbox(): { push(m: Message): void; waitFor<T>(type: string): Promise<T> } {
  const buffered: Message[] = [];
  const waiters: { type: string; resolve: (v: unknown) => void }[] = [];
  return {
    push(m) {
      const i = waiters.findIndex((w) => w.type === m.type);
      if (i >= 0) {
        const [w] = waiters.splice(i, 1);
        w?.resolve(m.payload);
      } else buffered.push(m);
    },
    waitFor<T>(type: string): Promise<T> {
      const i = buffered.findIndex((m) => m.type === type);
      if (i >= 0) {
        const [m] = buffered.splice(i, 1);
        return Promise.resolve(m?.payload as T);
      }
      return new Promise<T>((resolve) =>
        waiters.push({ type, resolve: resolve as (v: unknown) => void }),
      );
    },
  };
}

/**
 * Starts `count` worker processes running `module` (a .ts or .js file that calls `serveWorker`)
 * under tsx, each given `args(i)`. Use `waitFor('ready')` etc. to coordinate.
 *
 * @example
 * const workers = spawnWorkers(2, fileURLToPath(new URL('./peers/pg-worker.ts', import.meta.url)),
 *   (i) => ({ index: i }));
 * await Promise.all(workers.map((w) => w.waitFor('ready')));
 * for (const w of workers) w.send('go');
 * const results = await Promise.all(workers.map((w) => w.result));
 */
export function spawnWorkers(
  count: number,
  module: string,
  args: (index: number) => unknown,
): WorkerHandle[] {
  return Array.from({ length: count }, (_, i) => spawnWorker(module, args(i)));
}

export function spawnWorker(module: string, args: unknown): WorkerHandle {
  const child = fork(module, [], {
    // --expose-gc: `memorySampler` reads the heap a worker keeps after a full collection.
    execArgv: ['--import', 'tsx', '--expose-gc'],
    env: { ...process.env, BENCH_WORKER_ARGS: JSON.stringify(args) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const box = mailbox();
  let resolveResult: (v: unknown) => void = () => {};
  let rejectResult: (e: unknown) => void = () => {};
  const result = new Promise<unknown>((resolve, reject) => {
    resolveResult = resolve;
    rejectResult = reject;
  });
  // A killed worker's result rejection is often expected; don't make it an unhandled rejection.
  result.catch(() => {});
  let settled = false;
  child.on('message', (raw) => {
    const m = raw as Message;
    if (m.type === '__result') {
      settled = true;
      resolveResult(m.payload);
    } else if (m.type === '__error') {
      settled = true;
      rejectResult(new Error(`worker ${child.pid}: ${String(m.payload)}`));
    } else box.push(m);
  });
  child.on('exit', (code, signal) => {
    if (!settled) rejectResult(new Error(`worker ${child.pid} exited (${signal ?? code})`));
  });
  return {
    pid: child.pid ?? -1,
    child,
    send: (type, payload) => {
      if (child.connected) child.send({ type, payload });
    },
    waitFor: (type) => box.waitFor(type),
    result,
    kill: (signal = 'SIGTERM') => {
      child.kill(signal);
    },
  };
}

/**
 * Runs `fn` in a worker process started by `spawnWorker(s)`: `fn` gets the args and a message
 * channel to the parent; its return value becomes the parent's `result`.
 */
export function serveWorker<A, R>(fn: (args: A, io: WorkerIo) => Promise<R>): void {
  const box = mailbox();
  process.on('message', (raw) => box.push(raw as Message));
  const io: WorkerIo = {
    send: (type, payload) => {
      // The parent may be gone (a failed run): nothing to tell it then.
      if (process.connected) process.send?.({ type, payload });
    },
    waitFor: (type) => box.waitFor(type),
  };
  const args = JSON.parse(process.env.BENCH_WORKER_ARGS ?? 'null') as A;
  fn(args, io).then(
    (value) => {
      process.send?.({ type: '__result', payload: value }, () => process.exit(0));
    },
    (error: unknown) => {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      process.send?.({ type: '__error', payload: message }, () => process.exit(1));
    },
  );
}

/**
 * Counts the commands this process sends to a server on `port`: every write on a socket to
 * it (mysql2 writes each command packet once). Wire-level, so every client library in the
 * process is counted alike (ours, Sidequest's knex). Returns a reader of the count.
 */
export function countSocketWrites(port: number): () => number {
  let writes = 0;
  const write = net.Socket.prototype.write;
  net.Socket.prototype.write = function countedWrite(this: net.Socket, ...args: unknown[]) {
    if (this.remotePort === port) writes++;
    return (write as (...a: unknown[]) => boolean).apply(this, args);
  } as typeof write;
  return () => writes;
}

/** A worker's memory over a run, MiB. */
export interface MemoryUse {
  /** Peak resident set size, sampled every 100 ms. */
  peakRssMb: number;
  /** Heap in use at the end, after a full garbage collection: what the process holds on to. */
  heapAfterGcMb: number;
}

/**
 * Samples this process's resident set size every 100 ms until `stop`, which also collects
 * garbage (workers run with `--expose-gc`) and reads the heap left in use. Peak RSS follows
 * the garbage collector's pace; the heap after a collection shows what is really kept.
 */
export function memorySampler(): { stop(): MemoryUse } {
  const mib = (bytes: number): number => bytes / (1024 * 1024);
  let peak = process.memoryUsage.rss();
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 100);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      peak = Math.max(peak, process.memoryUsage.rss());
      (globalThis as { gc?: () => void }).gc?.();
      return { peakRssMb: mib(peak), heapAfterGcMb: mib(process.memoryUsage().heapUsed) };
    },
  };
}

/**
 * The worker side of a throughput or latency run: sends `ready`, waits for `go`, calls `start`,
 * then sends `progress` (`count()`) every 20 ms until the parent says `stop`, and calls `stop`.
 */
export async function workUntilStopped(
  io: WorkerIo,
  worker: { start(): Promise<void>; stop(): Promise<void>; count(): number },
): Promise<void> {
  io.send('ready');
  await io.waitFor('go');
  await worker.start();
  const progress = setInterval(() => io.send('progress', worker.count()), 20);
  await io.waitFor('stop');
  clearInterval(progress);
  await worker.stop();
}

// ---------------------------------------------------------------------------------------------
// databases

/** Drops PostgreSQL `schemas` (and everything in them) on a short-lived connection. */
export async function dropPostgresSchemas(url: string, schemas: readonly string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// phases several suites measure alike

/**
 * Counts, from now on, every statement this process sends through `pg`'s `Client#query` (pools
 * and every library on the same `pg` copy too); returns the count's reader.
 */
export function countPgQueries(): () => number {
  let queries = 0;
  const clientQuery = pg.Client.prototype.query;
  pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
    queries++;
    return (clientQuery as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof clientQuery;
  return () => queries;
}

/** Enqueues `total` jobs with payloads `{ i }` in batches through `enqueueBatch`; returns the ms. */
export async function enqueueInBatches(
  total: number,
  enqueueBatch: (payloads: { i: number }[]) => Promise<unknown>,
  batchSize = 1_000,
): Promise<number> {
  const timer = startTimer();
  for (let i = 0; i < total; i += batchSize) {
    const n = Math.min(batchSize, total - i);
    await enqueueBatch(Array.from({ length: n }, (_, k) => ({ i: i + k })));
  }
  return timer.ms();
}

/**
 * Single enqueues: `total` sequential awaited calls per contender (as an app enqueues one job
 * per request), interleaved in `rounds` so every contender sees the same disk (fsync)
 * conditions. Returns jobs/s per contender.
 */
export async function singleEnqueueRates<C>(
  contenders: readonly C[],
  total: number,
  enqueue: (contender: C, i: number) => Promise<unknown>,
  rounds = 5,
): Promise<Map<C, number>> {
  const ms = new Map<C, number>(contenders.map((c) => [c, 0]));
  for (let r = 0; r < rounds; r++) {
    for (const contender of contenders) {
      const t = startTimer();
      for (let i = 0; i < total / rounds; i++) await enqueue(contender, i);
      ms.set(contender, (ms.get(contender) ?? 0) + t.ms());
    }
  }
  return new Map(contenders.map((c) => [c, (total / (ms.get(c) ?? 1)) * 1000]));
}

/** The middle value of an odd count (the lower middle of an even one); 0 for none. */
export function medianOf(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? 0;
}

/**
 * Bulk enqueues apart from the drains: each round, every contender in turn (the order
 * alternating) enqueues `total` jobs in batches of 1,000 into a fresh producer (`open`: a new
 * file, schema or database), so each meets the same machine — not the wake of whichever drain
 * ran just before it. Returns the median rate of `rounds` per contender, and every round's.
 */
export async function bulkEnqueueRates<C>(
  contenders: readonly C[],
  total: number,
  open: (contender: C) => Promise<Producer>,
  rounds = 5,
): Promise<Map<C, { median: number; rates: number[] }>> {
  const rates = new Map<C, number[]>(contenders.map((c) => [c, []]));
  for (let r = 0; r < rounds; r++) {
    for (const contender of r % 2 === 0 ? contenders : [...contenders].reverse()) {
      const producer = await open(contender);
      try {
        const ms = await enqueueInBatches(total, (payloads) => producer.bulk(payloads));
        rates.get(contender)?.push((total / ms) * 1000);
      } finally {
        await producer.close();
      }
    }
  }
  return new Map(
    contenders.map((c) => {
      const list = rates.get(c) ?? [];
      return [c, { median: medianOf(list), rates: list }];
    }),
  );
}

/**
 * Our tuned configuration's history: failures only (deadlettered and cancelled jobs are kept,
 * completed ones are not), as a throughput-minded deployment sets it (core README, Throughput).
 * Every suite's tuned contender uses it with a fixed prefetch.
 */
export const TUNED_HISTORY = { keep: 'failed' } as const;

export interface DrainOptions {
  concurrency: number;
  prefetch: number;
  /** Called between enqueueing and starting the engine, e.g. to read the store's counters. */
  beforeRun?: () => void;
  /** Called every 250 ms while the jobs run, with how many ran. */
  progress?: (ran: number) => void;
}

/**
 * One engine in this process: migrates `store`, bulk-enqueues `total` no-op jobs (type `noop`)
 * in batches of 1,000, then starts a `JobEngine` and waits until every job ran. Returns the ms
 * of both phases; the engine is stopped, the store left open.
 */
export async function drainInProcess(
  store: JobStore,
  total: number,
  options: DrainOptions,
): Promise<{ enqueueMs: number; runMs: number }> {
  await store.migrate();
  let ran = 0;
  const engine = new JobEngine({
    store,
    concurrency: options.concurrency,
    prefetch: options.prefetch,
    handlers: {
      noop: () => {
        ran += 1;
      },
    },
  });
  const enqueueMs = await enqueueInBatches(total, (payloads) =>
    engine.enqueueMany(payloads.map((payload) => ({ type: 'noop', payload }))),
  );
  options.beforeRun?.();
  const timer = startTimer();
  await engine.start();
  const progress = options.progress;
  const ticker = progress ? setInterval(() => progress(ran), 250) : null;
  try {
    await waitUntil(() => ran >= total, 600_000, `all ${total} jobs to run`, 5);
    return { enqueueMs, runMs: timer.ms() };
  } finally {
    if (ticker) clearInterval(ticker);
    await engine.stop({ timeoutMs: 5_000 });
  }
}

export interface WorkerRunOptions {
  /** The worker module (see `spawnWorkers`) and how many processes run it. */
  module: string;
  processes: number;
  args: (index: number) => unknown;
  /** True once the run is complete; `ran` sums the workers' latest `progress` counts. */
  finished: (ran: number) => boolean | Promise<boolean>;
  timeoutMs: number;
  /** What is awaited, for the timeout message. */
  what: string;
  /** How often `finished` is checked. Default 5 ms. */
  everyMs?: number;
  /**
   * Runs once `finished` is true, before `stop` (the workers still run), and returns the ms to
   * report instead of the time until `finished`, e.g. after the database settled.
   */
  settle?: (finishedMs: number, elapsed: Timer) => Promise<number>;
}

/**
 * One timed run of worker processes: starts them, waits until every one is `ready`, sends
 * `go`, waits until `finished`, sends `stop` and returns the elapsed ms with every worker's
 * result. Workers still alive at the end are killed.
 */
export async function timedWorkerRun<R>(
  options: WorkerRunOptions,
): Promise<{ ms: number; results: R[] }> {
  const workers = spawnWorkers(options.processes, options.module, options.args);
  // A worker that dies ends the run at once, with its error, instead of at the timeout.
  let died: unknown = null;
  for (const w of workers) {
    w.result.catch((error: unknown) => {
      died ??= error;
    });
  }
  const death = new Promise<never>((_, reject) => {
    for (const w of workers) w.result.catch(reject);
  });
  death.catch(() => {});
  try {
    await Promise.race([Promise.all(workers.map((w) => w.waitFor('ready'))), death]);
    const counts = workers.map(() => 0);
    workers.forEach((w, i) => {
      void (async () => {
        for (;;) counts[i] = await w.waitFor<number>('progress');
      })();
    });
    const timer = startTimer();
    for (const w of workers) w.send('go');
    await waitUntil(
      () => {
        if (died) throw died;
        return options.finished(counts.reduce((a, b) => a + b, 0));
      },
      options.timeoutMs,
      options.what,
      options.everyMs ?? 5,
    );
    const finishedMs = timer.ms();
    const ms = options.settle ? await options.settle(finishedMs, timer) : finishedMs;
    for (const w of workers) w.send('stop');
    const results = (await Promise.all(workers.map((w) => w.result))) as R[];
    return { ms, results };
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.kill();
  }
}

/** What every worker process of a measured run reports. */
export interface WorkerStats {
  /** Handler runs. */
  count: number;
  /** Commands sent to the database between `go` and `stop` (SQLite: statements run). */
  commands: number;
  memory: MemoryUse;
  /** `[n, Date.now() at handler start]` for jobs whose payload carries a sequence number `n`. */
  starts: [number, number][];
}

/** Counts handler runs in a worker; numbered payloads (`{ n }`) get their start time. */
export function jobRecorder(): {
  onJob(payload: unknown): void;
  readonly count: number;
  readonly starts: [number, number][];
} {
  let count = 0;
  const starts: [number, number][] = [];
  return {
    onJob(payload) {
      count++;
      const n = (payload as { n?: number } | null)?.n;
      if (typeof n === 'number') starts.push([n, Date.now()]);
    },
    get count() {
      return count;
    },
    starts,
  };
}

/**
 * The worker side of a measured run (`workUntilStopped`), counting the commands `commands()`
 * reads and sampling memory from `go` to `stop`. `afterStart` runs once the worker started
 * (e.g. to measure an idle window).
 */
export async function measuredWork(
  io: WorkerIo,
  worker: { start(): Promise<void>; stop(): Promise<void> },
  recorder: ReturnType<typeof jobRecorder>,
  commands: () => number,
  afterStart?: () => Promise<void>,
): Promise<WorkerStats> {
  let base = 0;
  let sent = 0;
  let memory: MemoryUse = { peakRssMb: 0, heapAfterGcMb: 0 };
  let sampler: { stop(): MemoryUse } | null = null;
  await workUntilStopped(io, {
    start: async () => {
      sampler = memorySampler();
      base = commands();
      await worker.start();
      await afterStart?.();
    },
    stop: async () => {
      sent = commands() - base;
      memory = sampler?.stop() ?? memory;
      await worker.stop();
    },
    count: () => recorder.count,
  });
  return { count: recorder.count, commands: sent, memory, starts: recorder.starts };
}

/** One drain of jobs enqueued up front, by worker processes. */
export interface DrainResult<R extends WorkerStats = WorkerStats> {
  /** Jobs per second, from `go` until none is left in the database. */
  rate: number;
  /** Handler runs, all workers. */
  ran: number;
  commandsPerJob: number;
  peakRssMb: number;
  heapAfterGcMb: number;
  results: R[];
}

/**
 * `processes` worker processes drain `total` jobs already enqueued; done means none is left in
 * the database (`remaining()`), and that time counts.
 */
export async function drainWithWorkers<R extends WorkerStats>(options: {
  module: string;
  processes: number;
  args: (index: number) => unknown;
  total: number;
  remaining: () => Promise<number>;
  what: string;
}): Promise<DrainResult<R>> {
  const { total } = options;
  const { ms, results } = await timedWorkerRun<R>({
    module: options.module,
    processes: options.processes,
    args: options.args,
    finished: (ran) => ran >= total,
    timeoutMs: Math.max(180_000, total / 2),
    what: options.what,
    settle: async (_handlersMs, elapsed) => {
      await waitUntil(
        async () => (await options.remaining()) === 0,
        60_000,
        `${options.what}: done`,
      );
      return elapsed.ms();
    },
  });
  return {
    rate: (total / ms) * 1000,
    ran: results.reduce((a, r) => a + r.count, 0),
    commandsPerJob: results.reduce((a, r) => a + r.commands, 0) / total,
    peakRssMb: Math.max(...results.map((r) => r.memory.peakRssMb)),
    heapAfterGcMb: Math.max(...results.map((r) => r.memory.heapAfterGcMb)),
    results,
  };
}

/** The enqueue side of a contender, in the parent process. */
export interface Producer {
  single(payload: object): Promise<void>;
  bulk(payloads: object[]): Promise<void>;
  /** Jobs not finished yet (waiting or running). */
  remaining(): Promise<number>;
  close(): Promise<void>;
}

/** Rounds of the throughput runs: each contender's rate is the median of this many. */
export const THROUGHPUT_ROUNDS = 3;

/**
 * Throughput of each contender at 1 and 2 worker processes, the machine belonging to one
 * contender at a time: a fresh table (`open`), `jobs` enqueued up front in bulk, then `drain`.
 * Every contender runs `rounds` times, round after round (so slow drifts of the machine — disk
 * flushes, a neighbour — fall on every contender alike), and each figure is the run with the
 * median rate; the note gives every round's rate. Adds bulk enqueue, throughput, and for
 * 1 process commands per job (`commands`, or none when it returns null) and peak RSS; `after`
 * may add notes about a run.
 */
export async function throughputRuns<C>(options: {
  suite: string;
  contenders: readonly C[];
  name(contender: C): string;
  jobs(contender: C): number;
  open(contender: C): Promise<Producer>;
  drain(contender: C, producer: Producer, total: number, processes: number): Promise<DrainResult>;
  commands(contender: C): [string, string] | null;
  parts: ReportParts<C>;
  after?(contender: C, processes: number, run: DrainResult): void;
  /** Default `THROUGHPUT_ROUNDS`. */
  rounds?: number;
  /** False: the suite measures bulk enqueue apart (`bulkEnqueueRates`); no line from here. */
  bulkLine?: boolean;
}): Promise<void> {
  const { add, notes } = options.parts;
  const rounds = options.rounds ?? THROUGHPUT_ROUNDS;
  type Run = DrainResult & { bulkRate: number };
  const runs = new Map<string, Run[]>();
  const cell = (contender: C, processes: number): Run[] => {
    const key = `${options.name(contender)}\u0000${processes}`;
    const list = runs.get(key) ?? [];
    runs.set(key, list);
    return list;
  };
  for (let round = 1; round <= rounds; round++) {
    for (const contender of options.contenders) {
      for (const processes of [1, 2]) {
        const total = options.jobs(contender);
        const name = options.name(contender);
        const of = rounds > 1 ? `, round ${round} of ${rounds}` : '';
        console.log(
          `[bench] ${options.suite}: ${name} throughput, ${processes} process(es)${of} ...`,
        );
        const producer = await options.open(contender);
        try {
          const bulkMs = await enqueueInBatches(total, (payloads) => producer.bulk(payloads));
          const run = await options.drain(contender, producer, total, processes);
          cell(contender, processes).push({ ...run, bulkRate: (total / bulkMs) * 1000 });
          if (run.ran !== total) {
            notes.push(`${name}: ${processes} proc ran ${run.ran} handler calls for ${total} jobs`);
          }
          options.after?.(contender, processes, run);
        } finally {
          await producer.close();
        }
      }
    }
  }
  const median = <T>(list: T[], value: (item: T) => number): T =>
    [...list].sort((a, b) => value(a) - value(b))[Math.floor((list.length - 1) / 2)] as T;
  for (const contender of options.contenders) {
    for (const processes of [1, 2]) {
      const list = cell(contender, processes);
      const run = median(list, (r) => r.rate);
      if (processes === 1 && options.bulkLine !== false) {
        const bulk = median(list, (r) => r.bulkRate).bulkRate;
        add('enqueue bulk, batches of 1,000 (jobs/s)', contender, bulk, 'jobs/s', true);
      }
      add(`throughput ${processes} proc × 10 (jobs/s)`, contender, run.rate, 'jobs/s', true);
      if (processes === 1) {
        const commands = options.commands(contender);
        if (commands) add(commands[0], contender, run.commandsPerJob, commands[1], false);
        add('worker peak RSS (1 proc, MiB)', contender, run.peakRssMb, 'MiB', false);
      }
      if (list.length > 1) {
        const rates = list.map((r) => Math.round(r.rate).toLocaleString('en-US')).join(' / ');
        notes.push(
          `${options.name(contender)} ${processes} proc: median of ${list.length} rounds; rounds ran ${rates} jobs/s`,
        );
      }
    }
  }
}

/**
 * Backlog series: for each size, a fresh table (`open`) gets that many jobs enqueued up front
 * and one worker process drains it (`drain`); one column per size, the largest first so the
 * ratios read "largest ÷ smaller". `describe` adds a note per size (e.g. whether the table
 * was analysed).
 */
export async function backlogSeries(options: {
  suite: string;
  sizes: readonly number[];
  open(): Promise<Producer>;
  drain(producer: Producer, total: number): Promise<DrainResult>;
  /** The per-job command metric, e.g. `worker round trips per job`, and its unit. */
  commands: [string, string];
  describe?(total: number): Promise<string>;
  notes: readonly string[];
}): Promise<BenchReport> {
  const label = (n: number): string => `${n.toLocaleString('en-US')} jobs`;
  const sizes = [...options.sizes].sort((a, b) => b - a);
  const { measures, notes, add } = reportParts(label);
  for (const total of [...sizes].reverse()) {
    console.log(`[bench] ${options.suite}: backlog of ${label(total)} ...`);
    const producer = await options.open();
    try {
      const bulkMs = await enqueueInBatches(total, (payloads) => producer.bulk(payloads), 5_000);
      add(
        'bulk enqueue, batches of 5,000 (jobs/s)',
        total,
        (total / bulkMs) * 1000,
        'jobs/s',
        true,
      );
      const run = await options.drain(producer, total);
      add('throughput 1 proc × 10 (jobs/s)', total, run.rate, 'jobs/s', true);
      add('worker peak RSS (MiB)', total, run.peakRssMb, 'MiB', false);
      add('worker heap after GC, at the end (MiB)', total, run.heapAfterGcMb, 'MiB', false);
      add(options.commands[0], total, run.commandsPerJob, options.commands[1], false);
      const extra = options.describe ? `; ${await options.describe(total)}` : '';
      notes.push(`${label(total)}: ${run.ran} handler runs${extra}`);
    } finally {
      await producer.close();
    }
  }
  notes.push(
    ...options.notes,
    `ratios: ${label(sizes[0] ?? 0)} ÷ the smaller backlogs (targets: throughput ≥ 0.8× at 1M vs 10k, memory flat)`,
  );
  // The columns largest first: the first contender seen is the one ratios are taken from.
  measures.sort(
    (a, b) =>
      sizes.indexOf(Number(a.contender.replace(/\D/g, ''))) -
      sizes.indexOf(Number(b.contender.replace(/\D/g, ''))),
  );
  return {
    suite: `${options.suite} backlog series`,
    measures,
    notes,
    ours: [label(sizes[0] ?? 0)],
  };
}

/** Pickup latency samples of one contender, in ms. */
export interface PickupSamples {
  /** Enqueue call started → handler started. */
  fromCall: number[];
  /** Enqueue call returned (committed) → handler started; 0 where the handler started first. */
  fromCommit: number[];
}

export interface PickupOptions<C> {
  contenders: readonly C[];
  /** The worker module; its result carries `starts: [n, Date.now() at handler start][]`. */
  module: string;
  args: (contender: C) => unknown;
  /** Enqueues one job with payload `{ n }` to `contender`, from this process. */
  enqueue: (contender: C, payload: { n: number }) => Promise<unknown>;
  /** Jobs per contender. */
  count: number;
  /** Enqueue ticks per second. Default 50. */
  perSecond?: number;
}

/**
 * Pickup latency of every contender at once: one worker process each, and every tick one job
 * is enqueued to each contender (in rotating order), so all see the same machine and disk
 * noise. With one contender, simply that contender's pickup latency.
 */
export async function pickupLatency<C>(options: PickupOptions<C>): Promise<Map<C, PickupSamples>> {
  const { contenders, count } = options;
  const workers = new Map(
    contenders.map((c) => [c, spawnWorker(options.module, options.args(c))] as const),
  );
  try {
    await Promise.all([...workers.values()].map((w) => w.waitFor('ready')));
    for (const w of workers.values()) w.send('go');
    // Let the workers reach their steady state (listening, first poll done).
    await sleep(1_000);
    // Per contender and job n: when the enqueue call started and when it resolved (committed).
    const calls = new Map(contenders.map((c) => [c, new Map<number, [number, number]>()]));
    await paced(count, options.perSecond ?? 50, async (n) => {
      const order = contenders.map((_, k) => contenders[(n + k) % contenders.length] as C);
      await Promise.all(
        order.map(async (c) => {
          const called = Date.now();
          await options.enqueue(c, { n });
          calls.get(c)?.set(n, [called, Date.now()]);
        }),
      );
    });
    const out = new Map<C, PickupSamples>();
    for (const [contender, worker] of workers) {
      await waitUntil(
        async () => (await worker.waitFor<number>('progress')) >= count,
        30_000,
        `${String(contender)} latency jobs ran`,
        0,
      );
      worker.send('stop');
      const { starts } = (await worker.result) as { starts: [number, number][] };
      const samples: PickupSamples = { fromCall: [], fromCommit: [] };
      for (const [n, started] of starts) {
        const call = calls.get(contender)?.get(n);
        if (!call) continue;
        samples.fromCall.push(started - call[0]);
        // Can be negative: a worker may start the job before the enqueuer hears "committed".
        samples.fromCommit.push(Math.max(0, started - call[1]));
      }
      out.set(contender, samples);
    }
    return out;
  } finally {
    for (const w of workers.values()) w.kill();
  }
}
