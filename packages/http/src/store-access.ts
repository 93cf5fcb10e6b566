/**
 * Every use of the store contract's *optional* abilities (`store.cancellation`, `store.history`,
 * `store.rateLimits`) by the worker API, in one place. The rest of the package
 * calls only the required hot-path methods (`acquire`, `renewLeases`, `complete`, `fail`,
 * `release`, `recoverExpiredLeases`, `getJob`, `nextDueAt`, `subscribe`, `now`).
 */
import {
  type HistorySettings,
  type Job,
  type JobCompletion,
  type JobStore,
  refOf,
  type SettleResult,
} from '@jobs/core';

/** True when the store can end a held job as cancelled (an operator's cancel request). */
export function canEndCancelled(store: JobStore): boolean {
  return store.cancellation !== undefined;
}

/**
 * Ends held jobs whose cancel was requested as cancelled (history outcome `cancelled`), fenced
 * by their tokens like `complete`. A store without cancellation never flags a job, so it is
 * never asked.
 */
export function endCancelled(
  store: JobStore,
  jobs: readonly JobCompletion[],
): Promise<SettleResult> {
  if (!store.cancellation) return Promise.resolve({ lost: [] });
  return store.cancellation.cancelHeld(jobs);
}

/** Tells the store which finished jobs history keeps, when the store keeps history at all. */
export function configureHistory(store: JobStore, settings: HistorySettings): boolean {
  if (!store.history) return false;
  store.history.configure(settings);
  return true;
}

/** True when the store writes `progressJson` with lease renewals. */
export function keepsProgress(store: JobStore): boolean {
  return store.capabilities.progress === true;
}

/** True when the store keeps rate-limit windows (its `rateLimits` ability). */
export function keepsRateLimits(store: JobStore): boolean {
  return store.rateLimits !== undefined;
}

/**
 * Of jobs just acquired, the ones their types' rate limits let start now, in their order. The
 * others go back waiting until their window ends (`deferJobs`: no attempt counted), as an
 * engine's rate limit does; the window of a type is keyed by the type, so engines and remote
 * workers with the same limit on a type share it. On a store error the whole batch is released.
 */
export async function admitRateLimited(
  store: JobStore,
  limits: ReadonlyMap<string, { max: number; perMs: number }>,
  jobs: readonly Job[],
  now: () => number,
): Promise<Job[]> {
  const limited = jobs.filter((job) => limits.has(job.type));
  const windows = store.rateLimits;
  if (limited.length === 0 || !windows) return [...jobs];
  try {
    const byType = new Map<string, Job[]>();
    for (const job of limited) byType.set(job.type, [...(byType.get(job.type) ?? []), job]);
    const entries = [...byType];
    const grants = await windows.takeRateTokens(
      entries.map(([type, held]) => {
        const limit = limits.get(type) as { max: number; perMs: number };
        return { key: type, max: limit.max, perMs: limit.perMs, want: held.length };
      }),
    );
    const refused = new Set<Job>();
    for (const [i, [, held]] of entries.entries()) {
      const grant = grants[i];
      const over = held.slice(grant?.granted ?? 0);
      if (over.length === 0) continue;
      for (const job of over) refused.add(job);
      const delayMs = Math.max(1, (grant?.retryAt.getTime() ?? 0) - now());
      await windows.deferJobs(over.map(refOf), delayMs);
    }
    return jobs.filter((job) => !refused.has(job));
  } catch (error) {
    await store.release(jobs.map(refOf)).catch(() => undefined);
    throw error;
  }
}
