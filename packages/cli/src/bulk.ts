/**
 * Bulk actions (`retry --all`, `delete --all`): the matching ids are read first (so the count
 * and the progress bar are exact and every job is touched at most once), then handled a few at
 * a time. A job that changed meanwhile (already retried, deleted) is counted as skipped.
 */
import type { JobEngine, JobFilter } from '@jobs/core';
import type { Io } from './app.js';
import { StoppedError } from './errors.js';
import { listAll } from './paging.js';
import { Progress } from './progress.js';

/** Calls at once: enough to hide round trips, few enough to leave the pool to others. */
const PARALLEL = 4;

/** What a bulk action did (`--json` prints it). */
export interface BulkSummary {
  action: string;
  matched: number;
  /** Jobs the action changed. */
  done: number;
  /** Jobs that no longer qualified when their turn came. */
  skipped: number;
  dryRun: boolean;
}

/**
 * Runs `act` on every job matching `filter`; `act` returns false when the job no longer
 * qualified. With `dryRun`, only counts.
 */
export async function bulk(
  io: Io,
  engine: JobEngine,
  options: {
    action: string;
    filter: JobFilter;
    dryRun: boolean;
    act: (id: string) => Promise<boolean>;
  },
): Promise<BulkSummary> {
  const ids = await listAll(engine, options.filter, (job) => job.id);
  const summary: BulkSummary = {
    action: options.action,
    matched: ids.length,
    done: 0,
    skipped: 0,
    dryRun: options.dryRun,
  };
  if (options.dryRun) return summary;
  const progress = new Progress(io, options.action, ids.length);
  let next = 0;
  let stopped = false;
  const worker = async (): Promise<void> => {
    while (!stopped && next < ids.length) {
      const id = ids[next++] as string;
      try {
        if (await options.act(id)) summary.done += 1;
        else summary.skipped += 1;
      } catch (error) {
        stopped = true;
        throw error;
      }
      progress.tick();
    }
  };
  // Every worker ends before this returns (the store is closed after), the first error wins.
  const results = await Promise.allSettled(
    Array.from({ length: Math.min(PARALLEL, ids.length) }, worker),
  );
  progress.finish();
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) {
    const { action, done, matched } = summary;
    throw new StoppedError(`${action} stopped after ${done} of ${matched} jobs`, failed.reason);
  }
  return summary;
}
