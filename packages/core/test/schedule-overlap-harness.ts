/**
 * Multi-process schedule scenario shared by the PostgreSQL and SQLite `schedule-overlap` tests:
 * two engine processes on one database, a one-second schedule whose handler takes 2.5 s, and
 * the runs they report (start, end, occurrence, process).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export type Overlap = 'skip' | 'coalesce' | 'allow';

export interface OverlapWorkerConfig {
  /** Absolute path of @jobs/core's built entry (the one the store imports). */
  coreModule: string;
  /** Absolute path of the store package's entry (TypeScript source is fine under tsx). */
  storeModule: string;
  storeClass: string;
  storeOptions: unknown;
  owner: string;
  schedule: string;
  type: string;
  overlap: Overlap;
  handlerMs: number;
}

export interface RunEvent {
  kind: 'start' | 'end';
  owner: string;
  occurrence: string;
  at: number;
}

export interface Run {
  owner: string;
  occurrence: string;
  start: number;
  /** When the handler returned (before the engine wrote the completion). */
  end: number;
}

const worker = fileURLToPath(new URL('./schedule-overlap-worker.ts', import.meta.url));
/** @jobs/core's dist entry, which the stores resolve `@jobs/core` to. */
export const CORE_DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));

export interface ScenarioOptions {
  storeModule: string;
  storeClass: string;
  storeOptions: unknown;
  overlap: Overlap;
  /** How long both processes run the schedule before they are stopped. */
  runForMs: number;
  handlerMs?: number;
  processes?: number;
}

/** Runs the scenario and returns every run, ordered by start. */
export async function runScheduleScenario(options: ScenarioOptions): Promise<Run[]> {
  const events: RunEvent[] = [];
  const children: (ChildProcess & { stderr: NonNullable<ChildProcess['stderr']> })[] = [];
  const stderr: string[] = [];
  const exits: Promise<void>[] = [];
  const count = options.processes ?? 2;
  for (let i = 0; i < count; i++) {
    const config: OverlapWorkerConfig = {
      coreModule: CORE_DIST,
      storeModule: options.storeModule,
      storeClass: options.storeClass,
      storeOptions: options.storeOptions,
      owner: `proc-${i}`,
      schedule: `tick-${options.overlap}`,
      type: 'tick',
      overlap: options.overlap,
      handlerMs: options.handlerMs ?? 2_500,
    };
    const child = fork(worker, [JSON.stringify(config)], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    }) as ChildProcess & { stderr: NonNullable<ChildProcess['stderr']> };
    stderr[i] = '';
    child.stderr.on('data', (chunk) => {
      stderr[i] += String(chunk);
    });
    child.on('message', (message) => {
      if (message && typeof message === 'object') events.push(message as RunEvent);
    });
    exits.push(
      new Promise((resolve, reject) => {
        child.once('exit', (code) =>
          code === 0
            ? resolve()
            : reject(new Error(`worker ${i} exited with ${code}: ${stderr[i]}`)),
        );
      }),
    );
    children.push(child);
  }
  try {
    await Promise.race([
      Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve) => {
              const onMessage = (message: unknown) => {
                if (message === 'ready') {
                  child.off('message', onMessage);
                  resolve();
                }
              };
              child.on('message', onMessage);
            }),
        ),
      ),
      Promise.all(exits).then(() => {
        throw new Error(`workers exited before they were ready: ${stderr.join('\n')}`);
      }),
    ]);
    await new Promise((resolve) => setTimeout(resolve, options.runForMs));
  } finally {
    for (const child of children) if (child.exitCode === null) child.send('stop');
  }
  await Promise.all(exits);
  return pairRuns(events);
}

function pairRuns(events: RunEvent[]): Run[] {
  const open = new Map<string, RunEvent>();
  const runs: Run[] = [];
  for (const event of events) {
    const id = `${event.owner}|${event.occurrence}`;
    if (event.kind === 'start') {
      if (open.has(id)) throw new Error(`run ${id} started twice in one process`);
      open.set(id, event);
    } else {
      const start = open.get(id);
      if (!start) throw new Error(`run ${id} ended without starting`);
      open.delete(id);
      runs.push({
        owner: event.owner,
        occurrence: event.occurrence,
        start: start.at,
        end: event.at,
      });
    }
  }
  // A run cut off by stop() has no end; stop waits for handlers, so there should be none.
  if (open.size > 0) throw new Error(`runs without an end: ${[...open.keys()].join(', ')}`);
  return runs.sort((a, b) => a.start - b.start);
}

/** How many runs were in progress at once, at most. */
export function maxConcurrent(runs: readonly Run[]): number {
  const points = runs.flatMap((r) => [
    { at: r.start, delta: 1 },
    { at: r.end, delta: -1 },
  ]);
  // Ends before starts at the same instant: back-to-back runs do not overlap.
  points.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let current = 0;
  let max = 0;
  for (const p of points) {
    current += p.delta;
    max = Math.max(max, current);
  }
  return max;
}
