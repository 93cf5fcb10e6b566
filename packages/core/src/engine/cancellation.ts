/**
 * Cancellation and progress on the engine's side (invariant 20). An operator's cancel reaches a
 * running job through its owner's next lease renewal (`lease-renewal.ts`), on every store: a
 * job not started yet is cancelled at once, a running one's `ctx.signal` aborts with a
 * `CancelledError` and it ends `cancelled` when its handler returns (`dispatch.ts`), never
 * retried. Progress (`ctx.progress`) is kept here and written by the next renewal.
 */
import { CancelledError, JobsError } from '../errors.js';
import { type JobStore, MAX_PROGRESS_BYTES } from '../store.js';
import type { EngineContext } from './context.js';
import type { HeldJob } from './held-jobs.js';
import { checkPayload } from './payload-check.js';
import type { Settlement } from './settlement.js';

/** The store can cancel: `cancel`, `cancelHeld` and cancel answers from renewals. */
export function canCancel(store: JobStore): boolean {
  return store.capabilities.cancellation === true && store.cancelHeld !== undefined;
}

/** Throws a clear error when the store cannot cancel jobs. */
export function assertCanCancel(store: JobStore, where: string): void {
  if (!canCancel(store) || !store.cancel) {
    throw new JobsError(
      'STORE',
      `[@jobs/core] ${where}: the ${store.name} store cannot cancel jobs (capabilities.cancellation)`,
    );
  }
}

/**
 * A renewal (or an acquisition) said an operator cancelled `held`: a job not started leaves
 * the buffer and is cancelled at once; a running one is aborted with a `CancelledError` and
 * cancelled when its handler returns; one whose handler returned is left to its settle call
 * (`complete` and `fail` refuse it, and the refusal leads here again through settlement).
 */
export function cancelRequested(ctx: EngineContext, settlement: Settlement, held: HeldJob): void {
  if (held.cancelRequested || held.lost || held.finished) return;
  held.cancelRequested = true;
  const index = ctx.jobs.buffer.indexOf(held);
  if (index >= 0) {
    ctx.jobs.buffer.splice(index, 1);
    settlement.queueCancel(held);
    settlement.settleSoon();
    return;
  }
  held.controller?.abort(new CancelledError(held.job.id));
}

/**
 * `ctx.progress(value)`: checks the value (JSON, at most `MAX_PROGRESS_BYTES`) and keeps it as
 * the job's latest progress, for the next renewal to write; emits `progress`.
 */
export function reportProgress(ctx: EngineContext, held: HeldJob, value: unknown): void {
  const checked = checkPayload(value, MAX_PROGRESS_BYTES, 'progress');
  held.progressJson = JSON.stringify(checked);
  held.progressDirty = true;
  held.job.progress = checked;
  ctx.emit('progress', { job: held.job, progress: checked });
}
