/**
 * Schedules across processes: two engine processes on one database run a one-second schedule
 * whose handler takes 2.5 s, once per overlap policy, and report every run (start, end,
 * occurrence, process). The children run `runner/schedule-peer.mjs` and open the store through a
 * `ProcessPeerSpec`, like the suite's process races.
 */
import { type ChildProcess, fork } from 'node:child_process';
import type { JobStore, ScheduleRecord } from '@jobs/core';
import { expect, it } from 'vitest';
import type { ProcessPeerSpec } from './options.js';
import { describeIfAvailable } from './prerequisites.js';
import { runnerPath } from './process-peer.js';

type Overlap = 'skip' | 'coalesce' | 'allow';

/** How long both processes run the schedule before they are stopped. */
const RUN_FOR_MS = 6_000;
const HANDLER_MS = 2_500;
const PROCESSES = 2;

export interface ScheduleOverlapTestOptions<S extends JobStore = JobStore> {
  /** Shown in the title, e.g. `SQLite`. */
  name: string;
  /** A store on a fresh, empty database; the test migrates it, reads its schedule, closes it. */
  createStore: () => Promise<S>;
  /** Called after the store was closed, e.g. to drop its schema. */
  destroyStore?: (store: S) => Promise<void>;
  /** How an engine process opens the same database as `store`. */
  processPeer: (store: S) => ProcessPeerSpec;
  /**
   * What is missing to run the tests here and how to get it (no server, no build), or null.
   * Locally they are then listed as skipped with one loud line; under `CI=true` that is a
   * failing test.
   */
  skip?: string | null;
  /**
   * Time limit of each of the three tests, in ms (they run concurrently, about 10 s each).
   * Default 60 000. Set here, so the calling vitest config needs no `testTimeout`.
   */
  timeoutMs?: number;
}

interface RunEvent {
  kind: 'start' | 'end';
  owner: string;
  occurrence: string;
  at: number;
}

interface Run {
  owner: string;
  occurrence: string;
  start: number;
  /** When the handler returned (before the engine wrote the completion). */
  end: number;
}

/**
 * Defines, in the calling vitest file, one test per overlap policy (`skip`, `coalesce`,
 * `allow`) of a one-second schedule with a 2.5 s handler on two engine processes sharing the
 * store's database: no occurrence runs twice, and runs overlap only under `allow`.
 *
 * @example
 * runScheduleOverlapProcessTest({
 *   name: 'SQLite',
 *   createStore: async () => new SqliteJobStore({ filename: freshFile() }),
 *   processPeer: (store) => ({ module: peerModule, args: { filename: store.db.name } }),
 * });
 */
export function runScheduleOverlapProcessTest<S extends JobStore>(
  options: ScheduleOverlapTestOptions<S>,
): void {
  const title = `a one-second schedule with a 2.5 s handler on two engine processes (${options.name})`;
  const timeout = options.timeoutMs ?? 60_000;
  if (!Number.isInteger(timeout) || timeout < 1) {
    throw new TypeError(
      '[@jobs/conformance] runScheduleOverlapProcessTest: timeoutMs must be a positive integer',
    );
  }

  async function scenario(
    overlap: Overlap,
  ): Promise<{ runs: Run[]; record: ScheduleRecord | null }> {
    const store = await options.createStore();
    try {
      await store.migrate();
      const runs = await runEngineProcesses(options.processPeer(store), overlap);
      const record = await store.getSchedule(`tick-${overlap}`);
      if (process.env.JOBS_TEST_VERBOSE) {
        const t0 = runs[0]?.start ?? 0;
        console.log(
          `${overlap}: skipped=${record?.skipped} fired=${record?.fired}\n${runs
            .map(
              (r) => `  ${r.owner} ${r.occurrence.slice(11, 19)} ${r.start - t0}..${r.end - t0} ms`,
            )
            .join('\n')}`,
        );
      }
      return { runs, record };
    } finally {
      await store.close();
      await options.destroyStore?.(store);
    }
  }

  const define = (): void => {
    it.concurrent(
      'overlap skip: never two runs at once, no occurrence twice, busy fires dropped',
      async () => {
        const { runs, record } = await scenario('skip');
        expect(runs.length).toBeGreaterThanOrEqual(2);
        expectEachOccurrenceOnce(runs);
        expect(maxConcurrent(runs)).toBe(1);
        expect(record?.skipped).toBeGreaterThanOrEqual(2);
      },
      timeout,
    );

    it.concurrent(
      'overlap coalesce: never two runs at once, no occurrence twice, the coalesced run follows at once',
      async () => {
        const { runs } = await scenario('coalesce');
        expect(runs.length).toBeGreaterThanOrEqual(2);
        expectEachOccurrenceOnce(runs);
        expect(maxConcurrent(runs)).toBe(1);
        for (let i = 1; i < runs.length; i++) {
          const previous = runs[i - 1] as Run;
          const run = runs[i] as Run;
          // Fires during the previous run were coalesced into this one, which starts as soon as the
          // previous run ended: sooner than the schedule's next one-second tick (the engine fires
          // a pending misfire when an occurrence's job finishes, not on the next poll).
          expect(run.start - previous.end).toBeLessThan(1_000);
        }
      },
      timeout,
    );

    it.concurrent(
      'overlap allow: runs overlap, still no occurrence twice',
      async () => {
        const { runs } = await scenario('allow');
        expect(runs.length).toBeGreaterThanOrEqual(4);
        expectEachOccurrenceOnce(runs);
        expect(maxConcurrent(runs)).toBeGreaterThanOrEqual(2);
      },
      timeout,
    );
  };

  describeIfAvailable(options.skip || null, title, {}, define);
}

function expectEachOccurrenceOnce(runs: readonly Run[]): void {
  const occurrences = runs.map((r) => r.occurrence);
  expect(new Set(occurrences).size, `occurrences ${occurrences.join(', ')}`).toBe(runs.length);
}

type PeerChild = ChildProcess & { stderr: NonNullable<ChildProcess['stderr']> };

/** Runs the schedule on `PROCESSES` engine processes for `RUN_FOR_MS`; every run, by start. */
async function runEngineProcesses(spec: ProcessPeerSpec, overlap: Overlap): Promise<Run[]> {
  const events: RunEvent[] = [];
  const children: PeerChild[] = [];
  const stderr: string[] = [];
  const exits: Promise<void>[] = [];
  for (let i = 0; i < PROCESSES; i++) {
    const config = {
      module: spec.module,
      args: spec.args ?? null,
      owner: `proc-${i}`,
      schedule: `tick-${overlap}`,
      type: 'tick',
      overlap,
      handlerMs: HANDLER_MS,
    };
    const child = fork(runnerPath('schedule-peer.mjs'), [JSON.stringify(config)], {
      execArgv: spec.nodeArgs ?? [],
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    }) as PeerChild;
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
            : reject(
                new Error(
                  `[@jobs/conformance] schedule peer ${i} exited with ${code}: ${stderr[i]}`,
                ),
              ),
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
        throw new Error(
          `[@jobs/conformance] schedule peers exited before they were ready: ${stderr.join('\n')}`,
        );
      }),
    ]);
    await new Promise((resolve) => setTimeout(resolve, RUN_FOR_MS));
  } finally {
    for (const child of children) if (child.exitCode === null) child.send('stop');
  }
  await Promise.all(exits);
  return pairRuns(events);
}

function pairRuns(events: readonly RunEvent[]): Run[] {
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
function maxConcurrent(runs: readonly Run[]): number {
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
