/**
 * The client side of the engine: validates new jobs, passes them through the `enqueue` hooks
 * (`engine.use`: e.g. `@jobs/otel` adds the trace context to each job's `meta`), writes them in
 * one store call, and wakes this engine's loop when it can run them (immediate dispatch after
 * commit).
 */
import { JobsError } from '../errors.js';
import type { Job, NewJob } from '../store.js';
import { callThrough } from './hooks.js';
import type { EngineRuntime } from './runtime.js';
import type { EnqueueDraft, EnqueueJobOptions } from './types.js';
import { assertKnownKeys, assertStoreCanLimit, checkMeta, toNewJob } from './validate.js';

export interface EnqueueItem {
  type: string;
  payload?: unknown;
  options?: Omit<EnqueueJobOptions, 'tx'>;
}

/** The keys of an `enqueueMany` item. */
const ITEM_KEYS: ReadonlySet<string> = new Set(['type', 'payload', 'options']);

/** Validates every item before anything is written, then enqueues them in one store call. */
export async function enqueueJobs(
  rt: EngineRuntime,
  items: ReadonlyArray<EnqueueItem>,
  options: { tx?: unknown },
): Promise<Job[]> {
  if (!Array.isArray(items)) {
    throw new JobsError('VALIDATION', '[@jobs/core] enqueueMany: items must be an array');
  }
  const { handlers, retries, maxPayloadBytes } = rt.options;
  /** Runs a check of item `index`; in a batch, its error says which item was wrong. */
  const checkItem = <T>(index: number, check: () => T): T => {
    try {
      return check();
    } catch (error) {
      if (items.length > 1 && error instanceof JobsError)
        error.message = `items[${index}].${error.message}`;
      throw error;
    }
  };
  const newJobs = items.map((item, index) =>
    checkItem(index, () => {
      // `{ type, payload, scope: 'a' }` would enqueue an unscoped job: options go in `options`.
      assertKnownKeys(item, ITEM_KEYS, 'item');
      const { tx: _tx, ...rest } = (item.options ?? {}) as EnqueueJobOptions;
      return toNewJob(item.type, item.payload, rest, {
        retries,
        maxPayloadBytes,
        typeRetries: handlers.get(item.type)?.retries,
        typeScopeLimit: handlers.get(item.type)?.scopeLimit,
      });
    }),
  );
  for (const [index, job] of newJobs.entries()) {
    checkItem(index, () => assertStoreCanLimit(rt.options.store, job, 'options'));
  }
  if (newJobs.length === 0) return [];
  const hooks = rt.hooks.enqueue;
  if (hooks.length === 0) return writeJobs(rt, newJobs, options);
  const drafts: EnqueueDraft[] = newJobs.map((job) => ({
    type: job.type,
    queue: job.queue,
    meta: { ...job.meta },
  }));
  return callThrough(hooks, [drafts], () => {
    // What the hooks added is checked as the caller's meta is.
    const withMeta = newJobs.map((job, index) =>
      checkItem(index, () => ({ ...job, meta: checkMeta(drafts[index]?.meta) })),
    );
    return writeJobs(rt, withMeta, options);
  });
}

/** One store call for validated jobs, then the `enqueued` events and the wake-up. */
async function writeJobs(
  rt: EngineRuntime,
  newJobs: NewJob[],
  options: { tx?: unknown },
): Promise<Job[]> {
  const { store, handlers } = rt.options;
  const results = await store.enqueue(newJobs, options.tx === undefined ? {} : { tx: options.tx });
  let wake = false;
  for (const result of results) {
    rt.emit('enqueued', result);
    if (handlers.has(result.job.type)) wake = true;
  }
  if (wake && rt.running) {
    // Inside a caller's transaction the job is visible only after commit: look again once the
    // caller's synchronous work is done (stores with notifications also wake us on commit).
    if (options.tx === undefined) rt.wakeup.wake();
    else setImmediate(() => rt.wakeup.wake());
  }
  return results.map((r) => r.job);
}
