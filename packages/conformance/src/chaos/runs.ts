/**
 * What chaos tests check in the workers' reports: the live runs of each job (from its
 * handler's start to its end, or to its process's death) and whether two of them ever
 * overlapped — the one thing a job system must never do while an owner lives or is cut off.
 */
import type { ChaosWorker } from './worker.js';

/** One run of a handler, on the shared wall clock. */
export interface LiveRun {
  job: string;
  worker: string;
  start: number;
  /** When the handler returned; its process's death for a killed one; Infinity while running. */
  end: number;
  /** Its signal was aborted (lease lost, or stop() timed out). */
  aborted: boolean;
}

/** Every run the workers reported. */
export function liveRuns(workers: readonly ChaosWorker[]): LiveRun[] {
  const runs: LiveRun[] = [];
  for (const worker of workers) {
    const open = new Map<string, LiveRun>();
    for (const event of worker.events) {
      if (event.event === 'start') {
        const run = { job: event.job, worker: worker.spec.name, start: event.at };
        open.set(event.job, { ...run, end: Number.POSITIVE_INFINITY, aborted: false });
      } else if (event.event === 'end') {
        const run = open.get(event.job);
        if (!run) continue;
        open.delete(event.job);
        runs.push({ ...run, end: event.at, aborted: event.aborted });
      }
    }
    const death = worker.killedAt ?? Number.POSITIVE_INFINITY;
    for (const run of open.values()) runs.push({ ...run, end: death });
  }
  return runs;
}

/** Pairs of runs of one job that were live at the same time (none, when all is well). */
export function overlappingRuns(runs: readonly LiveRun[]): [LiveRun, LiveRun][] {
  const byJob = new Map<string, LiveRun[]>();
  for (const run of runs) byJob.set(run.job, [...(byJob.get(run.job) ?? []), run]);
  const overlaps: [LiveRun, LiveRun][] = [];
  for (const list of byJob.values()) {
    list.sort((a, b) => a.start - b.start);
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const [first, second] = [list[i] as LiveRun, list[j] as LiveRun];
        if (second.start < first.end) overlaps.push([first, second]);
      }
    }
  }
  return overlaps;
}

/** How many times each job was completed (settled as done), across the workers. */
export function completions(workers: readonly ChaosWorker[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const worker of workers) {
    for (const event of worker.eventsOf('completed')) {
      counts.set(event.job, (counts.get(event.job) ?? 0) + 1);
    }
  }
  return counts;
}

/**
 * The share of one core a worker used between two `cpu()` samples (0.05 = 5 %): a worker
 * whose database is away must wait, not spin.
 */
export function cpuShare(
  before: { cpuMs: number; at: number },
  after: { cpuMs: number; at: number },
): number {
  const wall = after.at - before.at;
  return wall <= 0 ? 0 : (after.cpuMs - before.cpuMs) / wall;
}
