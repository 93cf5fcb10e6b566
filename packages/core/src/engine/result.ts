/**
 * `engine.result(job)`: waits for a job — enqueued by any process, run by any — to finish, and
 * returns what its handler returned. It reads the store: the live job while it waits or runs,
 * then its history record (which keeps the result while history keeps completed jobs; a child
 * job completed in `ctx.transaction` is waited for until its handler returned its result). The
 * store's wake-ups cut the wait short where it has them; otherwise it polls, backing off from
 * 10 ms to half a second.
 */
import { JobFailedError, JobsError, NotFoundError } from '../errors.js';
import type { EngineRuntime } from './runtime.js';
import { isResultPending } from './settlement.js';
import { assertInteger } from './validate.js';

const FIRST_POLL_MS = 10;
const MAX_POLL_MS = 500;
const MAX_WAIT_MS = 7 * 24 * 3_600_000;

export async function awaitResult(
  rt: EngineRuntime,
  id: string,
  options: { timeoutMs?: number },
): Promise<unknown> {
  const { store } = rt.options;
  const timeoutMs = assertInteger(options.timeoutMs ?? 60_000, 'timeoutMs', 0, MAX_WAIT_MS);
  const deadline = Date.now() + timeoutMs;
  let wake: (() => void) | null = null;
  const unsubscribe =
    store.capabilities.notifications && store.subscribe ? store.subscribe(() => wake?.()) : null;
  try {
    for (let poll = FIRST_POLL_MS; ; poll = Math.min(poll * 2, MAX_POLL_MS)) {
      const live = await store.getJob(id);
      if (live?.state === 'deadletter') throw new JobFailedError(id, 'deadletter', live.lastError);
      let state: string = live?.state ?? '';
      if (!live) {
        const record = (await store.history?.get(id)) ?? null;
        if (record === null) {
          throw new NotFoundError(
            `job ${id} is neither waiting, running nor in history (did it exist? history keeps a completed job's result with history: { keep: 'all' })`,
          );
        }
        if (record.outcome !== 'completed') {
          throw new JobFailedError(id, record.outcome, record.lastError);
        }
        if (!isResultPending(record.result)) return record.result;
        state = 'completed in ctx.transaction, its handler not returned yet';
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new JobsError(
          'TIMEOUT',
          `job ${id} did not finish within ${timeoutMs} ms (it is ${state})`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(poll, left));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  } finally {
    unsubscribe?.();
  }
}
