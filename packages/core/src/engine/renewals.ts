/**
 * One lease renewal call and what it answered: shared by the heartbeat (`lease-renewal.ts`),
 * the start marks (`start-marks.ts`) and the settle flush, which writes the last progress and
 * log lines before a job settles.
 */
import type { JobRef, LeaseRenewalRef } from '../store.js';
import type { HeldJob } from './held-jobs.js';
import type { EngineRuntime } from './runtime.js';

/** What one renewal answered for a held job. */
export type RenewalAnswer = 'renewed' | 'lost' | 'cancel-requested';

/**
 * Sends one renewal for `refs` of `holding` (same order) and reads the answer per job; the
 * progress written is marked clean. Shared by the heartbeat and the start marks.
 */
export async function renew(
  rt: EngineRuntime,
  holding: readonly HeldJob[],
  refs: readonly LeaseRenewalRef[],
): Promise<RenewalAnswer[]> {
  const { store, owner, leaseMs } = rt.options;
  const result = await store.renewLeases(owner, leaseMs, refs);
  const lost = result.lost.length > 0 ? new Set(result.lost) : null;
  const cancelled = result.cancelRequested?.length ? new Set(result.cancelRequested) : null;
  return refs.map((ref, i) => {
    const held = holding[i] as HeldJob;
    // Written, unless the handler reported again while the call was in flight.
    if (ref.progressJson != null && held.progressJson === ref.progressJson) {
      held.progressDirty = false;
    }
    if (ref.logsJson != null && held.logsJson === ref.logsJson) held.logsDirty = false;
    if (lost?.has(held.job.id)) return 'lost';
    return cancelled?.has(held.job.id) ? 'cancel-requested' : 'renewed';
  });
}

/**
 * A copy of `ref` (its id, token and scope) to add fields to, built property by property: V8
 * builds a spread with properties added (`{ ...ref, durationMs }`) on its slow path, ~2 µs, and
 * refs are copied per job settled or renewed.
 */
export function copyRef(ref: JobRef): JobRef {
  const copy: JobRef = { id: ref.id, token: ref.token };
  if (ref.scope !== undefined) copy.scope = ref.scope;
  return copy;
}

/**
 * The renewal ref of `held`, with its progress and log when the store keeps them and they
 * changed, and `start` when given (see `LeaseRenewalRef.start`).
 */
export function renewalRef(rt: EngineRuntime, held: HeldJob, start?: boolean): LeaseRenewalRef {
  const { capabilities } = rt.options.store;
  const progress = capabilities.progress === true && held.progressDirty;
  const logs = capabilities.logs === true && held.logsDirty;
  if (!progress && !logs && start === undefined) return held.ref;
  const ref: LeaseRenewalRef = copyRef(held.ref);
  if (progress) ref.progressJson = held.progressJson ?? null;
  if (logs) ref.logsJson = held.logsJson ?? null;
  if (start !== undefined) ref.start = start;
  return ref;
}

/**
 * Progress and log lines reported after the last renewal are written before the job settles
 * (one renewal call for the whole batch, only when any finished job has such), so the final
 * values are durable and go to history. A failure here is reported; the settle goes on.
 */
export async function writeFinalProgress(
  rt: EngineRuntime,
  finished: readonly HeldJob[],
): Promise<void> {
  const { capabilities } = rt.options.store;
  const dirty = finished.filter(
    (held) =>
      held.phase !== 'lost' &&
      ((held.progressDirty && capabilities.progress === true) ||
        (held.logsDirty && capabilities.logs === true)),
  );
  if (dirty.length === 0) return;
  try {
    await renew(
      rt,
      dirty,
      dirty.map((held) => renewalRef(rt, held)),
    );
  } catch (error) {
    rt.reportError(error, 'write progress');
  }
}
