/**
 * A job worked over HTTP as a workflow child (`ctx.run` in a parent's handler): its outcome
 * reaches its parent the way an engine's own settle sends it (`@jobs/core`'s child outcomes) —
 * the result stored for the parent before the completion is written, the parent woken once the
 * child ended (completed, dead-lettered, cancelled). A job that is no child costs nothing here.
 */
import {
  childCancelled,
  completedPayload,
  type Job,
  type JobStore,
  type Logger,
  parentOf,
  sendChildOutcome,
  wakeParentsIfDone,
} from '@jobs/core';
import { ProblemError } from './problems.js';

export interface WorkflowChildren {
  /** Whether `job` is a workflow child: only then do the calls below do anything. */
  isChild(job: Job): boolean;
  /**
   * Before child `job`'s completion is written: its result, stored for its parent. A result too
   * large for a parent to receive is the caller's 400, and nothing is written.
   */
  beforeComplete(job: Job, result: unknown): Promise<void>;
  /** After child `job` ended completed or dead-lettered: its parent woken if it was the last. */
  ended(job: Job): Promise<void>;
  /** After child `job` ended cancelled: its outcome for its parent, and the parent woken. */
  cancelled(job: Job): Promise<void>;
}

export function workflowChildren(store: JobStore, logger: Logger): WorkflowChildren {
  // A lost wake-up only delays the parent (it looks again after `childRecheckMs`): logged.
  const wakeFailed = (job: Job) => (error: unknown) =>
    logger.warn('[@jobs/http] waking the parent of a child job failed', { id: job.id, error });
  return {
    isChild: (job) => parentOf(job) !== null,
    async beforeComplete(job, result) {
      if (parentOf(job) === null) return;
      let payload: string;
      try {
        payload = completedPayload(job.id, result);
      } catch (error) {
        throw new ProblemError('bad-request', `"result": ${(error as Error).message}`);
      }
      await sendChildOutcome(store, job, payload);
    },
    async ended(job) {
      if (parentOf(job) === null) return;
      await wakeParentsIfDone(store, [job]).catch(wakeFailed(job));
    },
    async cancelled(job) {
      if (parentOf(job) === null) return;
      await childCancelled(store, job).catch(wakeFailed(job));
    },
  };
}
