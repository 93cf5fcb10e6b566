/**
 * Sidequest's bench job, in a module of its own: Sidequest records the file that defines a job
 * class and imports it to run the job, so this file must have no side effects. The worker
 * process sets `globalThis.benchOnJob` to count runs.
 */
import { Job } from 'sidequest';

declare global {
  var benchOnJob: ((payload: unknown) => void) | undefined;
}

export class NoopJob extends Job {
  run(payload: unknown): void {
    globalThis.benchOnJob?.(payload);
  }
}
