/**
 * Real worker processes for chaos tests: each child (`runner/chaos-worker.mjs`) opens the
 * store through a module of yours (`createStore(args)`, on built JavaScript) and runs engines
 * on command, reporting every handler run with timestamps. The test kills them with SIGKILL,
 * cuts their network with a `ChaosProxy`, and checks the runs with `liveRuns`/`overlaps`.
 */
import { type ChildProcess, fork } from 'node:child_process';
import type { ProcessPeerSpec } from '../options.js';
import { runnerPath } from '../process-peer.js';

/** An engine a worker runs: `JobEngine` options (without store, handlers, logger). */
export interface ChaosEngineOptions {
  /** The job types it has handlers for. */
  types: string[];
  concurrency?: number;
  prefetch?: number;
  leaseMs?: number;
  pollIntervalMs?: number;
  owner?: string;
}

/** What each handler does. */
export interface ChaosWorkPlan {
  /** How long a run takes: ms, or `'until-aborted'`. Default: the job's `payload.ms`, else 0. */
  runMs?: number | 'until-aborted';
  /**
   * `sleep` (default), or `transaction`: the module's `slowTransaction(store, ms, signal)`
   * holds one of the store's pooled connections in a transaction for the run.
   */
  work?: 'sleep' | 'transaction';
  /** Jobs of these types run until aborted, whatever `runMs` says. */
  blockTypes?: string[];
  /**
   * Work in steps until aborted: before each step the handler reads `ctx.signal.aborted`, then
   * reports a `step` event, then waits `stepMs` on a plain timer.
   */
  stepMs?: number;
  /** Holds back every acquisition's answer this long (a slow network, a stalled process). */
  delayAcquireMs?: number;
}

/** One thing a worker reported, on the shared wall clock (`Date.now()`). */
export type ChaosEvent =
  | { event: 'start'; worker: string; job: string; type: string; attempt: number; at: number }
  | { event: 'end'; worker: string; job: string; aborted: boolean; at: number }
  | { event: 'completed'; worker: string; job: string; at: number }
  | { event: 'step'; worker: string; job: string; at: number }
  | { event: 'log'; worker: string; level: string; message: string; at: number };

export interface ChaosWorkerSpec extends ProcessPeerSpec {
  /** Names the worker in events and messages. */
  name: string;
}

/** CPU time the worker process used so far, and store errors its engines reported. */
export interface ChaosCpuSample {
  cpuMs: number;
  at: number;
  errors: number;
}

type Reply = { reply: number; value?: unknown; error?: string };

/** A worker process. Create with `spawnChaosWorker`. */
export class ChaosWorker {
  /** Everything the worker reported, in arrival order. */
  readonly events: ChaosEvent[] = [];
  /** When it was killed (`kill()`), on the shared clock; runs it had open end there. */
  killedAt: number | null = null;
  /** Resolves when the store is open and the worker takes commands. */
  readonly ready: Promise<void>;
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;
  private readonly pending = new Map<
    number,
    { resolve(v: unknown): void; reject(e: Error): void }
  >();
  private nextId = 1;
  private stderr = '';
  private exitError: Error | null = null;
  private closing = false;

  constructor(readonly spec: ChaosWorkerSpec) {
    const payload = JSON.stringify({
      module: spec.module,
      args: spec.args ?? null,
      name: spec.name,
    });
    this.child = fork(runnerPath('chaos-worker.mjs'), [payload], {
      execArgv: spec.nodeArgs ?? [],
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.child.stderr?.setEncoding('utf8');
    this.child.stderr?.on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-4_000);
    });
    let onReady: () => void = () => {};
    let onFail: (error: Error) => void = () => {};
    this.ready = new Promise<void>((resolve, reject) => {
      onReady = resolve;
      onFail = reject;
    });
    this.child.on('message', (raw) => {
      const message = raw as Reply | { event: string };
      if ('reply' in message) {
        const waiter = this.pending.get(message.reply);
        this.pending.delete(message.reply);
        if (message.error !== undefined) waiter?.reject(this.error(message.error));
        else waiter?.resolve(message.value);
        return;
      }
      if (message.event === 'ready') {
        onReady();
        return;
      }
      this.events.push({ ...message, worker: spec.name } as ChaosEvent);
    });
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exitError = this.error(`exited (code ${code}, signal ${signal})`);
        onFail(this.exitError);
        for (const waiter of this.pending.values()) waiter.reject(this.exitError);
        this.pending.clear();
        resolve();
      });
    });
  }

  /** The process id. */
  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Starts an engine in the worker (one at a time). */
  async start(engine: ChaosEngineOptions, plan: ChaosWorkPlan = {}): Promise<void> {
    await this.command('start', { engine, plan });
  }

  /** Stops the worker's engine; resolves with how long its `stop()` took. */
  async stop(timeoutMs: number): Promise<{ ms: number }> {
    return (await this.command('stop', { timeoutMs })) as { ms: number };
  }

  /** CPU time used by the worker so far (compare two samples: no spinning while cut off). */
  async cpu(): Promise<ChaosCpuSample> {
    return (await this.command('cpu', {})) as ChaosCpuSample;
  }

  /** Stops its engine, closes its store and lets the process exit. */
  async close(): Promise<void> {
    if (this.killedAt !== null || this.exitError) return;
    this.closing = true;
    await this.command('close', {});
    await this.exited;
  }

  /** Throws when the process died without being killed or closed (for waits to fail fast). */
  throwIfDead(): void {
    if (this.exitError && this.killedAt === null && !this.closing) throw this.exitError;
  }

  /** SIGSTOP: the process freezes (a stopped VM, a debugger), its timers and sockets with it. */
  pause(): void {
    this.child.kill('SIGSTOP');
  }

  /** SIGCONT after `pause()`: the process runs on where it stopped. */
  resume(): void {
    this.child.kill('SIGCONT');
  }

  /** SIGKILL: a crash, no shutdown, no release. Resolves once the process is gone. */
  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.killedAt = Date.now();
      this.child.kill('SIGKILL');
    }
    await this.exited;
  }

  /** Events of one kind. */
  eventsOf<K extends ChaosEvent['event']>(kind: K): Extract<ChaosEvent, { event: K }>[] {
    return this.events.filter((e): e is Extract<ChaosEvent, { event: K }> => e.event === kind);
  }

  /** Log lines the worker's engines wrote (warnings during an outage, recovery). */
  logs(): string[] {
    return this.eventsOf('log').map((e) => `${e.level}: ${e.message}`);
  }

  private command(cmd: string, body: Record<string, unknown>): Promise<unknown> {
    if (this.exitError) return Promise.reject(this.exitError);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ ...body, id, cmd });
    });
  }

  private error(message: string): Error {
    const stderr = this.stderr.trim();
    return new Error(
      `[@jobs/conformance] chaos worker ${this.spec.name}: ${message}${stderr ? `\n${stderr}` : ''}`,
    );
  }
}

/**
 * Spawns a worker process on the store `spec.module` opens.
 *
 * @example
 * const worker = spawnChaosWorker({ name: 'cut-off', module: fixture, args: { url: proxy.url(PG_URL) } });
 * await worker.ready;
 * await worker.start({ types: ['long'], concurrency: 4, leaseMs: 2_000 }, { runMs: 'until-aborted' });
 */
export function spawnChaosWorker(spec: ChaosWorkerSpec): ChaosWorker {
  return new ChaosWorker(spec);
}
