/**
 * Graceful shutdown (DESIGN "Graceful shutdown", invariant 16): stop acquiring, give prefetched
 * (unstarted) jobs back at once, let running jobs finish up to the timeout, then abort their
 * signals and give them a short grace. A handler that succeeds in the grace is completed, not
 * run again. One that ignores its signal is never released while it runs — a second run (or a
 * second exclusive job of its scope) could start beside it — so its lease keeps being renewed
 * until it returns or a hard bound passes, and is then left to expire. `stop()` returns within
 * its timeout plus `SHUTDOWN_GRACE_MS` plus `STORE_GRACE_MS`, even when the store never answers.
 */
import { JobsError } from '../errors.js';
import type { AcquisitionLoop } from './acquisition-loop.js';
import type { StartMarks } from './dispatch.js';
import type { LeaseRenewal } from './lease-renewal.js';
import type { EngineRuntime } from './runtime.js';
import type { Drain } from './settlement.js';

/** How long aborted handlers get to return before stop() leaves them to their leases. */
export const SHUTDOWN_GRACE_MS = 2_000;
/** How long stop() waits, beyond the handlers, for the store to take the last writes. */
export const STORE_GRACE_MS = 5_000;
/** Leases of handlers still running after stop() are renewed for at most this many leases. */
const ORPHAN_RENEWAL_LEASES = 5;

/** Resolves true when `promise` settles before `deadline` (epoch ms), false otherwise. */
function before(promise: Promise<unknown>, deadline: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
    promise.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}

export class Shutdown {
  constructor(
    private readonly rt: EngineRuntime,
    private readonly loop: AcquisitionLoop,
    private readonly settlement: Drain,
    private readonly leases: LeaseRenewal,
    private readonly startMarks: StartMarks,
    /** Calls the batches being filled (`dispatch.ts`): nothing more joins them now. */
    private readonly callOpenBatches: () => void = () => {},
  ) {}

  /** Runs the shutdown of an engine whose state is already `stopping`. */
  async run(timeoutMs: number): Promise<void> {
    const { jobs, options } = this.rt;
    const started = Date.now();
    const handlersDeadline = started + timeoutMs;
    const deadline = handlersDeadline + SHUTDOWN_GRACE_MS + STORE_GRACE_MS;
    // The loop may be waiting on a store call that never answers; jobs it still gets are
    // released when they arrive (see `Dispatcher.take`).
    await before(this.loop.stop(), started + STORE_GRACE_MS);
    this.releaseBuffered();
    // Jobs whose start is being recorded are given back when the store answers.
    await before(this.startMarks.idle(), started + STORE_GRACE_MS);
    // Their jobs run (they started); with acquisition stopped their batches cannot fill.
    this.callOpenBatches();

    let orphans = 0;
    if (jobs.executing > 0 && !(await this.waitForIdle(handlersDeadline - Date.now()))) {
      for (const held of jobs.values()) {
        if (held.phase === 'running' && held.controller && !held.controller.aborted) {
          held.shutdownAborted = true;
          held.controller.abort(
            new JobsError(
              'STOPPED',
              `engine stopped: job ${held.job.id} did not finish within ${timeoutMs} ms`,
            ),
          );
        }
      }
      if (!(await this.waitForIdle(SHUTDOWN_GRACE_MS))) orphans = jobs.executing;
    }
    // The last settles, and the writes that follow jobs' ends outside them (a child's result,
    // sent before its completion is queued; parents' wake-ups after it): a caller that closes or
    // empties the store once stop() returned must not have them land afterwards.
    let flushed: boolean;
    do {
      await before(this.rt.lateWritesDone(), deadline);
      flushed = await before(this.settlement.flushUntilEmpty(deadline), deadline);
    } while (flushed && this.rt.lateWriting && Date.now() < deadline);
    if (!flushed) {
      options.logger.warn('the store did not take the last writes before stop() returned', {
        pending: this.settlement.pendingCount,
      });
    }
    // Reads that decide how an uncertain settle is reported, before the caller closes the store.
    await before(this.settlement.uncertainSettlesChecked(), deadline);
    if (!(await before(this.rt.lateWritesDone(), deadline))) {
      options.logger.warn(
        'writes that follow finished jobs were still running when stop() returned',
      );
    }
    // What the store has not taken yet is retried in the background for as long as the leases
    // may be live, without keeping the process alive.
    this.settlement.detach();
    if (orphans === 0) {
      this.leases.stop();
      return;
    }
    options.logger.warn(
      'handlers ignored their abort signal; their leases are renewed until they return, then stop()ped engines let them expire',
      { running: orphans },
    );
    this.renewOrphans(options.leaseMs * ORPHAN_RENEWAL_LEASES);
  }

  /**
   * Handlers still running after stop(): their leases stay renewed (the heartbeat runs on,
   * without keeping the process alive) until they return — and are settled as usual — or
   * `boundMs` passes; then the leases are left to expire.
   */
  private renewOrphans(boundMs: number): void {
    const { jobs } = this.rt;
    const giveUp = setTimeout(() => {
      jobs.onChange = null;
      this.leases.stop();
    }, boundMs);
    giveUp.unref();
    this.leases.unref();
    jobs.onChange = () => {
      if (jobs.executing > 0) return;
      clearTimeout(giveUp);
      jobs.onChange = null;
      void this.settlement.flushUntilEmpty(Date.now() + STORE_GRACE_MS).finally(() => {
        this.leases.stop();
      });
    };
  }

  private releaseBuffered(): void {
    const buffered = this.rt.jobs.drainBuffer();
    if (buffered.length === 0) return;
    this.settlement.queueRelease(buffered);
    this.settlement.scheduleFlush(false);
  }

  private waitForIdle(timeoutMs: number): Promise<boolean> {
    const { jobs } = this.rt;
    if (jobs.executing === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => {
          jobs.onChange = null;
          resolve(false);
        },
        Math.max(0, timeoutMs),
      );
      jobs.onChange = () => {
        if (jobs.executing === 0) {
          clearTimeout(timer);
          jobs.onChange = null;
          resolve(true);
        }
      };
    });
  }
}
