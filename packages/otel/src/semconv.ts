/**
 * Attribute names and values, from the OpenTelemetry messaging semantic conventions (v1.27+:
 * `messaging.operation.type` replaced `messaging.operation`) plus this package's own `jobs.*`.
 * String literals on purpose: `@opentelemetry/semantic-conventions` is not a dependency.
 */
export const ATTR_MESSAGING_SYSTEM = 'messaging.system';
export const ATTR_MESSAGING_OPERATION_TYPE = 'messaging.operation.type';
export const ATTR_MESSAGING_OPERATION_NAME = 'messaging.operation.name';
export const ATTR_MESSAGING_DESTINATION_NAME = 'messaging.destination.name';
export const ATTR_MESSAGING_MESSAGE_ID = 'messaging.message.id';
export const ATTR_MESSAGING_BATCH_MESSAGE_COUNT = 'messaging.batch.message_count';
export const ATTR_JOB_ID = 'jobs.job.id';
export const ATTR_JOB_TYPE = 'jobs.job.type';
export const ATTR_JOB_ATTEMPT = 'jobs.job.attempt';
export const ATTR_JOB_OUTCOME = 'jobs.job.outcome';
export const ATTR_JOB_STATE = 'jobs.job.state';
export const ATTR_STEP_NAME = 'jobs.step.name';
export const ATTR_STEP_TRANSACTION = 'jobs.step.transaction';
export const ATTR_STEP_REPLAYED = 'jobs.step.replayed';
/** `ctx.sleep`, `ctx.waitFor` or `ctx.run`: which call a wait span is. */
export const ATTR_WAIT_KIND = 'jobs.wait.kind';
/** The call parked the job: the run ended there and the job waits in the store. */
export const ATTR_WAIT_PARKED = 'jobs.wait.parked';
/** `ctx.waitFor`: the signal's name. */
export const ATTR_WAIT_SIGNAL = 'jobs.wait.signal';
/** `ctx.run`: the child job's type. */
export const ATTR_WAIT_CHILD_TYPE = 'jobs.wait.child_type';

/** `messaging.system` of every span and metric. */
export const MESSAGING_SYSTEM = 'jobs';

/**
 * How a run ended, as `jobs.job.outcome`: `completed`; failed with a retry left (`retried`) or
 * none (`deadletter`); its lease lost (`lease-lost`, nothing of the run was recorded); or
 * given back unfinished by a `stop()` that timed out (`released`); or waiting after
 * `ctx.sleep` (`sleeping`: not a failure, the job runs again after its wake time); or ended
 * by an operator's cancel (`cancelled`: its handler stopped, or it had not started).
 */
export type RunOutcome =
  | 'completed'
  | 'retried'
  | 'deadletter'
  | 'lease-lost'
  | 'released'
  | 'sleeping'
  | 'cancelled';
