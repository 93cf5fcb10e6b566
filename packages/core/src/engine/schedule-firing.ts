/**
 * Schedule firing, and the engine's side of timers. Due timers become acquirable in the store (a due `timer`
 * job is acquired like an `async` one), so the engine's part is:
 * - firing schedules: a repeating schedule is a timer whose occurrences the `ScheduleRunner`
 *   fires (each exactly once, whoever fires it); the acquisition loop runs it when the next
 *   occurrence is due, or at once after a schedule was defined, resumed or ended;
 * - the `timer-fired` event, for a job that waited for its due time (delayed, or retried after
 *   backoff) when it starts.
 */
import type { ScheduleRunner } from '../schedule/index.js';
import type { Job } from '../store.js';
import type { EngineRuntime } from './runtime.js';

/** Whether a job starting now waited as a timer (a due time after its creation, or a retry). */
export function firedFromTimer(job: Job): boolean {
  return job.dueAt.getTime() > job.createdAt.getTime() || job.attempts > 1;
}

export class ScheduleFiring {
  /** Store-clock time of the next schedule pass; 0 means on the loop's next pass. */
  private nextCheckAt = 0;
  /** Bumped whenever schedules may need firing now; a pass that saw an older value runs again. */
  private generation = 0;

  constructor(
    private readonly rt: EngineRuntime,
    private readonly schedules: ScheduleRunner,
  ) {}

  /** Store-clock time the loop should next fire schedules. */
  get nextScheduleCheckAt(): number {
    return this.nextCheckAt;
  }

  /** Asks the loop to run the schedule runner on its next pass. */
  fireSchedulesSoon(): void {
    this.generation += 1;
    this.nextCheckAt = 0;
  }

  /**
   * Fires the schedules whose occurrence is due, when it is time to look. True when it looked
   * (it may have created jobs).
   */
  async fireDueSchedules(): Promise<boolean> {
    const { clock, pollIntervalMs } = this.rt.options;
    if (clock.now() < this.nextCheckAt) return false;
    const generation = this.generation;
    const next = await this.schedules.fireDue();
    const fallback = clock.now() + pollIntervalMs;
    // A schedule defined, resumed or ended during the pass must not wait for the next one.
    this.nextCheckAt =
      generation !== this.generation ? 0 : next ? Math.min(next.getTime(), fallback) : fallback;
    return true;
  }
}
