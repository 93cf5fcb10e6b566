/**
 * The chaos kit's worker processes and run checks: a worker runs an engine on command and
 * reports each run; a killed worker's open runs end at its death; overlapping runs of a job
 * are found. The child runs the built @jobs/core (`dist`).
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  completions,
  cpuShare,
  type LiveRun,
  liveRuns,
  overlappingRuns,
  spawnChaosWorker,
  waitFor,
} from '../src/index.js';

const TIMEOUT = 20_000;
const fixture = fileURLToPath(new URL('./fixtures/memory-with-jobs.mjs', import.meta.url));

describe('chaos worker processes', { timeout: TIMEOUT }, () => {
  it('run an engine on command, report every run, stop and close', async () => {
    const worker = spawnChaosWorker({ name: 'w', module: fixture, args: { jobs: 4 } });
    try {
      await worker.ready;
      const before = await worker.cpu();
      await worker.start({ types: ['work'], concurrency: 4, leaseMs: 1_000 }, { runMs: 20 });
      await waitFor('four completions', async () => completions([worker]).size === 4, TIMEOUT);
      const runs = liveRuns([worker]);
      expect(runs).toHaveLength(4);
      expect(runs.every((r) => !r.aborted && r.end >= r.start)).toBe(true);
      expect(overlappingRuns(runs)).toEqual([]);
      expect([...completions([worker]).values()]).toEqual([1, 1, 1, 1]);
      const stopped = await worker.stop(1_000);
      expect(stopped.ms).toBeGreaterThanOrEqual(0);
      const after = await worker.cpu();
      expect(after.cpuMs).toBeGreaterThanOrEqual(before.cpuMs);
      expect(cpuShare(before, after)).toBeGreaterThanOrEqual(0);
      await worker.close();
    } finally {
      await worker.kill();
    }
  });

  it('a killed worker’s open runs end at its death, and a start fails once it is gone', async () => {
    const worker = spawnChaosWorker({ name: 'k', module: fixture, args: { jobs: 2 } });
    await worker.ready;
    await worker.start(
      { types: ['work'], concurrency: 2, leaseMs: 1_000 },
      { runMs: 'until-aborted' },
    );
    await waitFor('two starts', async () => worker.eventsOf('start').length === 2, TIMEOUT);
    await worker.kill();
    const runs = liveRuns([worker]);
    expect(runs.map((r) => r.end)).toEqual([worker.killedAt, worker.killedAt]);
    await expect(worker.start({ types: ['work'] })).rejects.toThrow(/chaos worker k: exited/);
  });

  it('a module without createStore fails the worker with its error', async () => {
    const broken = fileURLToPath(new URL('./fixtures/no-factory.mjs', import.meta.url));
    const worker = spawnChaosWorker({ name: 'b', module: broken });
    await expect(worker.ready).rejects.toThrow(/exports no createStore/);
  });
});

describe('overlappingRuns', () => {
  const run = (job: string, worker: string, start: number, end: number): LiveRun => ({
    job,
    worker,
    start,
    end,
    aborted: false,
  });

  it('finds two runs of one job live at once, and only those', () => {
    const a = run('1', 'x', 0, 10);
    const b = run('1', 'y', 5, 20);
    const c = run('1', 'y', 20, 30);
    const d = run('2', 'x', 0, 100);
    expect(overlappingRuns([a, b, c, d])).toEqual([[a, b]]);
    expect(overlappingRuns([a, c, d])).toEqual([]);
    expect(
      overlappingRuns([run('3', 'x', 0, Number.POSITIVE_INFINITY), run('3', 'y', 50, 60)]),
    ).toHaveLength(1);
  });
});
