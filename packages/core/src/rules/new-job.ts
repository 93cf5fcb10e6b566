/** A new job as its store writes it: the one mapping from `NewJob` to the `Job` read back. */
import type { Job, NewJob } from '../store.js';
import { dueTime, initialState } from './due.js';

/** What the store decided for a job it just inserted; the rest comes from its `NewJob`. */
export interface WrittenJobFacts {
  id: string;
  /** When it was written, on the store's clock (ms precision, as every store keeps times). */
  createdAt: Date;
  /** Default: `dueTime(input, createdAt)`. */
  dueAt?: Date;
  /** Default: `initialState(dueAt, createdAt)`. */
  state?: 'timer' | 'async';
  /**
   * The payload as the store reads it back: a JSON copy of the input's (e.g. the engine's
   * checked copy, see `takeCheckedPayload`). Default: the input's, through JSON text.
   */
  payload?: unknown;
}

/**
 * The job a store has just written for `input`, exactly as reading its row back would give it
 * (a waiting job: no lease, no error, no attempts yet), without reading it back. JSON-valued
 * fields are copies, so the caller's objects and the job share nothing. The memory store, the
 * SQL core and custom stores build new jobs with it.
 */
export function writtenJob(input: NewJob, facts: WrittenJobFacts): Job {
  const dueAt = facts.dueAt ?? dueTime(input, facts.createdAt);
  // A limit of 1 (`exclusive`, or `scopeLimit: 1`) is the exclusive kind; none is no limit.
  const limit = input.exclusive ? 1 : (input.scopeLimit ?? null);
  return {
    id: facts.id,
    type: input.type,
    payload: 'payload' in facts ? facts.payload : jsonCopy(input.payload),
    state: facts.state ?? initialState(dueAt, facts.createdAt),
    priority: input.priority,
    dueAt,
    retriesLeft: input.retries,
    attempts: 0,
    scope: input.scope,
    exclusive: limit === 1,
    scopeLimit: limit,
    key: input.key,
    tenantId: input.tenantId,
    queue: input.queue,
    lastError: null,
    // Its own Date: the jobs of one batch share a write time, never the object.
    createdAt: new Date(facts.createdAt.getTime()),
    lockOwner: null,
    lockExpiresAt: null,
    lockToken: null,
    retryPolicy: input.retryPolicy ? (jsonCopy(input.retryPolicy) as Job['retryPolicy']) : null,
    suspendedFrom: null,
    schedule: input.schedule,
    occurrence: input.occurrence ? new Date(input.occurrence.getTime()) : null,
    shard: input.shard ? { index: input.shard.index, count: input.shard.count } : null,
    meta: input.meta ? { ...input.meta } : null,
    progress: null,
    cancelRequested: false,
    startedAt: null,
    logs: [],
    steps: [],
    timeoutMs: input.timeoutMs ?? null,
  };
}

/** `value` as a store reads it back from JSON text (undefined: null). */
function jsonCopy(value: unknown): unknown {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}
