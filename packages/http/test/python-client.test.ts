/**
 * The Python client (examples/08-external-worker/jobs_worker.py, standard library only) run
 * with this machine's `python3` against a real API on SQLite: it runs the example's script per
 * job (results, retries, dead letters), passes the job's trace context to its script and on its
 * settle calls, kills a script whose job an operator cancels, and — the chaos test — a worker
 * killed with SIGKILL mid-job loses the job to another worker after its lease, which completes
 * it once.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobAdmin, JobEngine, type JobStore } from '@jobs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqliteStore } from './backends.js';
import { CALLER, type InMemorySpans, inMemorySpans } from './fixtures/spans.js';
import { newToken, type Served, serveApi } from './harness.js';

const EXAMPLE = fileURLToPath(new URL('../../../examples/08-external-worker/', import.meta.url));
const WORKER = join(EXAMPLE, 'jobs_worker.py');
const HANG_ONCE = fileURLToPath(new URL('./fixtures/hang-once.sh', import.meta.url));
const TRACE_ENV = fileURLToPath(new URL('./fixtures/trace-env.sh', import.meta.url));

function hasPython(): boolean {
  try {
    execFileSync('python3', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (error) {
    if (process.env.CI === 'true')
      throw new Error('python3 is missing and CI=true', { cause: error });
    console.warn('\n!!! @jobs/http Python client tests SKIPPED: no python3 on PATH\n');
    return false;
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Resolves once `check` holds, looking again after each turn of the event loop and 20 ms. */
async function until<T>(check: () => Promise<T | null | undefined | false>): Promise<T> {
  for (;;) {
    const value = await check();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.skipIf(!hasPython())('the Python client (jobs_worker.py)', () => {
  let store: JobStore;
  let drop: () => Promise<void>;
  let engine: JobEngine;
  let admin: JobAdmin;
  let served: Served;
  let spans: InMemorySpans;
  const token = newToken();
  const dir = mkdtempSync(join(tmpdir(), 'jobs-http-py-'));
  const children: ChildProcess[] = [];

  function startWorker(
    type: string,
    script: string,
    extra: string[] = [],
    env: Record<string, string> = {},
  ) {
    const child = spawn(
      'python3',
      [
        WORKER,
        '--url',
        served.url,
        '--type',
        type,
        '--script',
        script,
        '--lease-ms',
        '300',
        '--wait-ms',
        '2000',
        '--grace',
        '0.5',
        ...extra,
      ],
      { env: { ...process.env, JOBS_TOKEN: token, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let log = '';
    child.stdout?.on('data', (d) => (log += d));
    child.stderr?.on('data', (d) => (log += d));
    children.push(child);
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    return { child, exited, log: () => log };
  }

  beforeAll(async () => {
    ({ store, drop } = await sqliteStore().factory());
    engine = new JobEngine({ store });
    admin = new JobAdmin(store);
    spans = inMemorySpans();
    served = await serveApi({
      store,
      clients: [{ token, types: ['backup', 'hang', 'chaos', 'traced'] }],
      pollMs: 50,
      history: { keep: 'all' },
      tracer: spans.tracerProvider.getTracer('@jobs/http'),
    });
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await served?.close();
    await store?.close();
    await drop?.();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs the example script per job: results, a retry, a dead letter', async () => {
    const fine = await engine.enqueue('backup', { name: 'docs', steps: 2 });
    const flaky = await engine.enqueue(
      'backup',
      { name: 'flaky', steps: 1 },
      { retry: { kind: 'fixed', delayMs: 0 } },
    );
    const broken = await engine.enqueue('backup', { steps: 1 });
    // Four runs: three jobs, one of them twice; then the worker exits by itself.
    const worker = startWorker(
      'backup',
      join(EXAMPLE, 'scripts/backup.sh'),
      ['--max-jobs', '4', '--concurrency', '2'],
      { STEP_SECONDS: '0' },
    );
    expect(await worker.exited, worker.log()).toBe(0);
    const done = (await admin.getJob(fine.id)) as { outcome?: string; result?: unknown };
    expect(done.outcome).toBe('completed');
    expect(done.result).toEqual({ name: 'docs', steps: 2, attempt: 1 });
    const retried = (await admin.getJob(flaky.id)) as {
      outcome?: string;
      attempts?: number;
      result?: unknown;
    };
    expect(retried.outcome).toBe('completed');
    expect(retried.result).toEqual({ name: 'flaky', steps: 1, attempt: 2 });
    const dead = await store.getJob(broken.id);
    expect(dead?.state).toBe('deadletter');
    expect(dead?.lastError?.message).toBe('script exited with code 65');
    expect(dead?.lastError?.stack).toContain('payload has no name');
  });

  it("passes the job's trace context to its script and sends it on the job's settle call", async () => {
    spans.exporter.reset();
    const job = await engine.enqueue(
      'traced',
      {},
      { meta: { traceparent: CALLER.traceparent, tracestate: 'vendor=py' } },
    );
    const worker = startWorker('traced', TRACE_ENV, ['--max-jobs', '1']);
    expect(await worker.exited, worker.log()).toBe(0);
    const record = (await admin.getJob(job.id)) as { outcome?: string; result?: unknown };
    expect(record.outcome).toBe('completed');
    expect(record.result).toEqual({ traceparent: CALLER.traceparent, tracestate: 'vendor=py' });
    const [complete] = spans.named('POST /jobs/{id}/complete');
    expect(complete?.spanContext().traceId).toBe(CALLER.traceId);
    expect(complete?.parentSpanContext?.spanId).toBe(CALLER.spanId);
    expect(complete?.spanContext().traceState?.get('vendor')).toBe('py');
  });

  it('exits with code 2 when the API refuses its token or its types', async () => {
    const wrongType = startWorker('not-allowed', join(EXAMPLE, 'scripts/backup.sh'));
    expect(await wrongType.exited, wrongType.log()).toBe(2);
    expect(wrongType.log()).toContain('403 forbidden');
    const wrongToken = startWorker('backup', join(EXAMPLE, 'scripts/backup.sh'), [], {
      JOBS_TOKEN: 'x'.repeat(20),
    });
    expect(await wrongToken.exited, wrongToken.log()).toBe(2);
    expect(wrongToken.log()).toContain('401 unauthorized');
    expect(wrongToken.log()).not.toContain('x'.repeat(20));
  });

  it('sends progress with heartbeats and kills the script when the job is cancelled', async () => {
    const pidFile = join(dir, 'cancel.pid');
    const job = await engine.enqueue('hang', {});
    const worker = startWorker('hang', HANG_ONCE, ['--max-jobs', '1'], {
      PID_FILE: pidFile,
      EFFECTS_FILE: join(dir, 'cancel.effects'),
    });
    if (store.capabilities.progress) {
      await until(
        async () => JSON.stringify((await store.getJob(job.id))?.progress) === '{"step":1}',
      );
    }
    await until(async () => existsSync(pidFile));
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(alive(pid)).toBe(true);
    expect(await admin.cancel(job.id)).toBe('requested');
    expect(await worker.exited, worker.log()).toBe(0);
    expect(alive(pid)).toBe(false);
    expect(await store.getJob(job.id)).toBeNull();
    expect(((await admin.getJob(job.id)) as { outcome?: string }).outcome).toBe('cancelled');
    expect(worker.log()).toContain('cancel requested');
  });

  it('chaos: a worker killed with SIGKILL mid-job loses it after its lease; another completes it once', async () => {
    const pidFile = join(dir, 'chaos.pid');
    const effects = join(dir, 'chaos.effects');
    const job = await engine.enqueue('chaos', {});
    const env = { PID_FILE: pidFile, EFFECTS_FILE: effects };
    const first = startWorker('chaos', HANG_ONCE, [], env);
    await until(async () => existsSync(pidFile));
    const scriptPid = Number(readFileSync(pidFile, 'utf8'));
    // The machine dies: the worker and its script, at once, without a word.
    first.child.kill('SIGKILL');
    process.kill(scriptPid, 'SIGKILL');
    expect(await first.exited).toBeNull();
    const second = startWorker('chaos', HANG_ONCE, ['--max-jobs', '1'], env);
    expect(await second.exited, second.log()).toBe(0);
    const record = (await admin.getJob(job.id)) as {
      outcome?: string;
      attempts?: number;
      result?: unknown;
    };
    expect(record.outcome).toBe('completed');
    expect(record.result).toEqual({ attempt: 2 });
    expect(readFileSync(effects, 'utf8')).toBe('done by attempt 2\n');
  });
});
