/** When a new job is due, and the state it waits in. */
import type { NewJob } from '../store.js';

/** The due time of a new job: `(dueAt ?? now) + delayMs`, `now` on the store's clock. */
export function dueTime(job: Pick<NewJob, 'dueAt' | 'delayMs'>, now: Date): Date {
  return new Date((job.dueAt ?? now).getTime() + job.delayMs);
}

/** The state a job due at `due` waits in at `now`: `timer` while due later, else `async`. */
export function initialState(due: Date, now: Date): 'timer' | 'async' {
  return due.getTime() > now.getTime() ? 'timer' : 'async';
}
