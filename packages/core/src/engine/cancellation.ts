/**
 * Cancellation and progress on the engine's side (invariant 20). An operator's cancel reaches a
 * running job through its owner's next lease renewal (`lease-renewal.ts`), on every store: a
 * job not started yet is cancelled at once, a running one's `ctx.signal` aborts with a
 * `CancelledError` and it ends `cancelled` when its handler returns (`dispatch.ts`), never
 * retried. Progress (`ctx.progress`) is kept here and written by the next renewal.
 */
import { CancelledError } from '../errors.js';
import { MAX_PROGRESS_BYTES } from '../store.js';
import type { HeldJob } from './held-jobs.js';
import { checkPayload } from './payload-check.js';
import type { EngineRuntime } from './runtime.js';
import type { Settler } from './settlement.js';

/**
 * A renewal (or an acquisition) said an operator cancelled `held`: a job not started leaves
 * the buffer and is cancelled at once; a running one is aborted with a `CancelledError` and
 * cancelled when its handler returns; one whose handler returned is left to its settle call
 * (`complete` and `fail` refuse it, and the refusal leads here again through settlement).
 */
export function cancelRequested(rt: EngineRuntime, settlement: Settler, held: HeldJob): void {
  if (held.cancelRequested) return;
  if (held.phase !== 'buffered' && held.phase !== 'starting' && held.phase !== 'running') return;
  held.cancelRequested = true;
  if (held.phase === 'buffered') {
    rt.jobs.toSettling(held);
    settlement.queueCancel(held);
    settlement.settleSoon();
    return;
  }
  // A starting job is cancelled when its start mark answers (`start-marks.ts`).
  held.controller?.abort(new CancelledError(held.job.id));
}

/**
 * `ctx.progress(value)`: checks the value (JSON, at most `MAX_PROGRESS_BYTES`) and keeps it as
 * the job's latest progress, for the next renewal to write; emits `progress`.
 */
export function reportProgress(rt: EngineRuntime, held: HeldJob, value: unknown): void {
  const checked = checkPayload(value, MAX_PROGRESS_BYTES, 'progress');
  held.progressJson = JSON.stringify(checked);
  held.progressDirty = true;
  held.job.progress = checked;
  rt.emit('progress', { job: held.job, progress: checked });
}
