/**
 * `engine.health()`: whether this engine can do its work, for readiness checks. It
 * asks the store for its clock (one cheap call, bounded by a timeout, so a black-holed database
 * answers "unreachable" instead of hanging the probe) and reports what the heartbeat knows: when
 * leases were last renewed, and whether the last renewal failed or has hung past its period.
 */

import { monotonicNow } from '../clock.js';
import { JobsError } from '../errors.js';
import { heartbeatIntervalMs, type RenewalStatus } from './lease-renewal.js';
import type { EngineRuntime, EngineState } from './runtime.js';
import { assertInteger } from './validate.js';

/** What `engine.health()` answers. */
export interface EngineHealth {
  /** Ready to work: running, the store answered, and leases (if any are held) are renewed. */
  ok: boolean;
  /** `'idle'` before `start()`, `'stopping'`/`'stopped'` after `stop()`. */
  state: EngineState;
  /** Whether the store answered a call within the timeout just now. */
  store: 'reachable' | 'unreachable';
  /** Why the store is unreachable (its error, or the timeout); null when reachable. */
  storeError: string | null;
  /**
   * `'ok'`: the last lease renewal succeeded. `'failing'`: it failed, or has not answered
   * within a heartbeat period (the local lease deadline aborts the handlers in time, but
   * nothing new should be sent here). `'idle'`: the engine holds no lease, nothing to renew.
   */
  renewals: 'ok' | 'failing' | 'idle';
  /** When a lease renewal last succeeded, on this process's clock; null before the first. */
  lastRenewalOkAt: Date | null;
  /**
   * Jobs this engine has leased and not let go of yet: running (also one whose lease was lost
   * while its handler has not returned), prefetched, and being settled.
   */
  leasesHeld: number;
}

/** Default bound of the store probe, well under a typical probe timeout (k8s: 1 s–10 s). */
export const DEFAULT_HEALTH_TIMEOUT_MS = 2_000;

export async function checkHealth(
  rt: EngineRuntime,
  renewal: RenewalStatus,
  options: { timeoutMs?: number } = {},
): Promise<EngineHealth> {
  const timeoutMs = assertInteger(
    options.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS,
    'health.timeoutMs',
    1,
    3600_000,
  );
  const storeError = await probeStore(rt, timeoutMs);
  const leasesHeld = rt.jobs.size;
  const hung =
    renewal.inFlightSince !== null &&
    monotonicNow() - renewal.inFlightSince > heartbeatIntervalMs(rt.options.leaseMs);
  const renewals = leasesHeld === 0 ? 'idle' : renewal.lastFailed || hung ? 'failing' : 'ok';
  return {
    ok: rt.state === 'running' && storeError === null && renewals !== 'failing',
    state: rt.state,
    store: storeError === null ? 'reachable' : 'unreachable',
    storeError,
    renewals,
    lastRenewalOkAt: renewal.lastOkAt === null ? null : new Date(renewal.lastOkAt),
    leasesHeld,
  };
}

/** Asks the store for its clock; null when it answered in time, else why not. */
async function probeStore(rt: EngineRuntime, timeoutMs: number): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new JobsError(
            'TIMEOUT',
            `[@jobs/core] health: the store did not answer in ${timeoutMs} ms`,
          ),
        ),
      timeoutMs,
    );
  });
  try {
    await Promise.race([rt.options.store.now(), timeout]);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    clearTimeout(timer);
  }
}
