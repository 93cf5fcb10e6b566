/**
 * Shared helpers for every bench suite: timing, percentiles, tables, paced loops and worker
 * processes. Suites (`sqlite.ts`, `postgres.ts`, `mysql.ts`, `typeorm.ts`) export
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
import { performance } from 'node:perf_hooks';

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
}

/** A suite entry point as exported by `bench/src/<suite>.ts`. */
export type BenchSuite = (options: BenchOptions) => Promise<BenchReport>;

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
  const ours = contenders[0];
  const others = contenders.slice(1);
  const get = (metric: string, contender: string | undefined): BenchMeasure | undefined =>
    report.measures.find((m) => m.metric === metric && m.contender === contender);
  const rows = metrics.map((metric) => {
    const mine = get(metric, ours);
    return [
      metric,
      ...contenders.map((c) => {
        const m = get(metric, c);
        return m ? `${fmtNum(m.value)} ${m.unit}` : '—';
      }),
      ...others.map((c) => {
        const theirs = get(metric, c);
        return mine && theirs ? fmtRatio(mine.value, theirs.value) : '—';
      }),
    ];
  });
  printTable(
    `== ${report.suite} ==`,
    ['metric', ...contenders, ...others.map((c) => `${ours} ÷ ${c}`)],
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
    execArgv: ['--import', 'tsx'],
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
    send: (type, payload) => process.send?.({ type, payload }),
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
