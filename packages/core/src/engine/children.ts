/**
 * Child jobs (`ctx.run(name, type, payload, options)`), the parent's side (the child's side is
 * `settlement.ts`): enqueues a child job and waits for its outcome without holding the
 * worker, memoised by name like a step (a checkpoint `{ $child: id }`, later
 * `{ $child: id, outcome, result }`; names and counters shared with steps, sleeps and waits).
 *
 * **Enqueued once.** Where the store has transactional steps (`steps.saveInTransaction`) and
 * transactional enqueue, the children and the checkpoint naming them commit in one transaction,
 * fenced by the lease: a retry, a crash or a takeover either finds the checkpoint (and the
 * child) or neither — never a child without its checkpoint, so never a second child. This is
 * chosen over a key derived from parent and name because a key protects only while its holder
 * is unfinished: a child that completed before the parent's checkpoint was written would be
 * enqueued again. Stores without those transactions (the memory store) fall back to that key —
 * exactly once except in that window, which a single process hardly ever opens.
 *
 * **Fan-out, fan-in, one park.** The `ctx.run` calls of a run are gathered (a call made while
 * others are being enqueued, or while a step of the run is running, joins them): new children
 * are enqueued together in one transaction, the children of earlier runs are looked at, and
 * once no step of the run is running any more, the parent parks once for all unfinished ones —
 * `StoreWaits.waitSignal` on the `$children` signal keyed by its id, due after
 * `childRecheckMs` at the latest — holding no slot, lease, connection or scope slot. The last
 * child to end wakes it (`wakeParentIfDone`); a wake-up lost with a dying settler only delays
 * it: after `childRecheckMs` it looks at its children again.
 *
 * **Outcomes.** A completed child's result is taken from its `$child` signal in the same
 * transaction that checkpoints it; a child found dead-lettered, cancelled or gone without an
 * outcome makes `ctx.run` throw `ChildJobError`. Dead-lettered is not checkpointed: an operator
 * who retries the child and then the parent gets the parent going again. A child completed in
 * its `ctx.transaction` whose result is not sent yet (its history result still the pending
 * marker) is unfinished for a lease after its completion, then `ChildJobError` (`lost`).
 */
import { createHash } from 'node:crypto';
import { ChildJobError, JobsError, LockLostError, ValidationError } from '../errors.js';
import { type Job, MAX_STEPS_BYTES, type StoreSteps, type StoreWaits } from '../store.js';
import type { ChildCall, RunChildren, RunSteps } from './run-steps.js';
import {
  type EngineRuntime,
  type EnqueueItem,
  enqueueJobs,
  type HeldJob,
  type JobAbort,
} from './runtime.js';
import {
  type ChildOutcomeRecord,
  isResultPending,
  PARENT_META,
  RESULT_SIGNAL,
  WAKE_SIGNAL,
} from './settlement.js';
import {
  assertCheckpointName,
  assertLive,
  entryText,
  listSetting,
  loseLease,
  nextCheckpoint,
  recordSetting,
  serially,
} from './steps.js';
import type { EnqueueJobOptions, WaitCall } from './types.js';
import { toNewJob } from './validate.js';
import { aroundWait, WaitInterrupt } from './waits.js';

/** `ctx.run`'s options: a child's own options, as `enqueue` takes them (its key is `ctx.run`'s). */
export type ChildRunOptions = Omit<EnqueueJobOptions, 'tx' | 'key' | 'keyMode'>;

type WorkflowStore = { steps: StoreSteps; waits: StoreWaits };

/**
 * `ctx.run(name, type, payload, options)` of `held`'s run. Not `async`: the promise it returns
 * is the call's own, which a park rejects (see below).
 */
export function runChild<T>(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  name: string,
  type: string,
  payload: unknown,
  options?: ChildRunOptions,
): Promise<T> {
  let found: { key: string; item: EnqueueItem; childId?: string } | { key: string; done: T };
  try {
    found = checkpointOf<T>(rt, held, name, type, payload, options);
  } catch (error) {
    return Promise.reject(error);
  }
  const call: WaitCall = {
    kind: 'run',
    name: found.key,
    replayed: 'done' in found,
    childType: type,
  };
  if ('done' in found) {
    const { done } = found;
    return aroundWait(rt, held, call, async () => done);
  }
  if (rt.hooks.wait.length === 0) return childCall<T>(rt, held, abort, found);
  const around = aroundWait(rt, held, call, () => childCall<T>(rt, held, abort, found));
  around.catch(() => undefined);
  return around;
}

/** The open call of a child not finished yet: gathered with the others made together. */
function childCall<T>(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  { key, item, childId }: { key: string; item: EnqueueItem; childId?: string },
): Promise<T> {
  const waiting = new Promise<T>((resolve, reject) => {
    const call: ChildCall = { key, resolve: resolve as (value: unknown) => void, reject };
    if (childId === undefined) call.item = item;
    else call.childId = childId;
    held.children ??= { calls: [], gathering: false, drained: false };
    held.children.calls.push(call);
    if (!held.children.gathering) {
      held.children.gathering = true;
      void gather(rt, held, abort);
    }
  });
  // A park rejects every open call at once: one the handler never awaited must not take the
  // process down as an unhandled rejection (an awaited one still throws where it is awaited).
  waiting.catch(() => undefined);
  return waiting;
}

/**
 * Checks the call (a `ValidationError` names the field) and finds its checkpoint: the child's
 * stored result (`done`), its id while it runs, or nothing yet (then it is to be enqueued).
 */
function checkpointOf<T>(
  rt: EngineRuntime,
  held: HeldJob,
  name: string,
  type: string,
  payload: unknown,
  options: ChildRunOptions | undefined,
): { key: string; item: EnqueueItem; childId?: string } | { key: string; done: T } {
  assertCheckpointName(name, 'ctx.run', 'a child');
  const item = childItem(rt, held.job, type, payload, options);
  const { store } = rt.options;
  if (!store.steps || !store.waits) {
    throw new JobsError(
      'STORE',
      `[@jobs/core] ctx.run: the ${store.name} store cannot keep a job waiting for its children (it has no \`steps\` and \`waits\`)`,
    );
  }
  const { key, stored } = nextCheckpoint(held, name, 'ctx.run', ` (child "${name}")`);
  if (stored === undefined) return { key, item };
  const record = JSON.parse(stored) as Partial<ChildOutcomeRecord> & { $child?: unknown };
  if (typeof record !== 'object' || record === null || typeof record.$child !== 'string') {
    throw new JobsError(
      'INVALID_STATE',
      `[@jobs/core] ctx.run: job ${held.job.id} has a step "${key}" that is not a child job (steps, sleeps, waits and children share names)`,
    );
  }
  if (record.outcome === 'completed') return { key, done: record.result as T };
  if (record.outcome === 'cancelled') throw new ChildJobError(record.$child, 'cancelled');
  return { key, item, childId: record.$child };
}

/** The child to enqueue, checked now (a `ValidationError` names the field), its parent in meta. */
function childItem(
  rt: EngineRuntime,
  parent: Job,
  type: string,
  payload: unknown,
  options: ChildRunOptions | undefined,
): EnqueueItem {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new ValidationError('options', 'ctx.run: options must be an object');
  }
  for (const field of ['tx', 'key', 'keyMode'] as const) {
    if (options !== undefined && field in options) {
      throw new ValidationError(
        field,
        `ctx.run: a child job takes no ${field} (ctx.run enqueues it in its own transaction, keyed to its parent)`,
      );
    }
  }
  const meta = { ...(options?.meta ?? {}), [PARENT_META]: parent.id };
  const childOptions = { ...options, meta };
  const { handlers, retries, maxPayloadBytes } = rt.options;
  toNewJob(type, payload, childOptions, {
    retries,
    maxPayloadBytes,
    typeRetries: handlers.get(type)?.retries,
    typeScopeLimit: handlers.get(type)?.scopeLimit,
  });
  return { type, payload, options: childOptions };
}

/**
 * Gathers the run's `ctx.run` calls: enqueues the new children, looks at those of earlier runs,
 * and once nothing of the run is running, parks the parent for the unfinished ones.
 */
async function gather(rt: EngineRuntime, held: HeldJob, abort: JobAbort): Promise<void> {
  const children = held.children as RunChildren;
  const steps = held.steps as RunSteps;
  const open = new Set<ChildCall>();
  const settle = (call: ChildCall, how: 'resolve' | 'reject', value: unknown) => {
    open.delete(call);
    call[how](value);
  };
  try {
    do {
      await nextTurn();
      const calls = children.calls.splice(0);
      for (const call of calls) open.add(call);
      const earlier = calls.filter((call) => call.childId !== undefined);
      if (earlier.length > 0) await lookAtChildren(rt, held, earlier, settle);
      const fresh = calls.filter((call) => call.item !== undefined);
      if (fresh.length > 0 && !(await enqueueChildren(rt, held, abort, fresh))) {
        // Enqueued before their checkpoint: one that ended in between found its parent's list
        // without it and may have sent a wake-up too early (taken here), so look at them now.
        children.drained = false;
        await lookAtChildren(rt, held, fresh, settle);
      }
      await runQuiet(steps, rt.options.leaseMs);
    } while (children.calls.length > 0);
    if (open.size > 0) park(rt, held, abort, [...open]);
  } catch (error) {
    for (const call of [...open, ...children.calls.splice(0)]) call.reject(error);
  } finally {
    children.gathering = false;
  }
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Waits until no step of the run is running and every checkpoint is written — for a lease at
 * most: a step that runs longer (or a `ctx.run` inside a step's function, which waits for its
 * own step) does not hold the worker; its checkpoint is then refused and it runs again later.
 */
async function runQuiet(steps: RunSteps, boundMs: number): Promise<void> {
  const until = Date.now() + boundMs;
  for (;;) {
    const left = until - Date.now();
    if (steps.running.size > 0 && left > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...steps.running]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, left);
        }),
      ]);
      clearTimeout(timer);
    }
    if (Date.now() >= until) return;
    await steps.chain;
    await nextTurn();
    if (steps.running.size === 0) return;
  }
}

/** Ends the run: the parent waits for its children's wake-up, or `childRecheckMs` at most. */
function park(rt: EngineRuntime, held: HeldJob, abort: JobAbort, calls: ChildCall[]): void {
  assertLive(rt, held, abort);
  const steps = held.steps as RunSteps;
  const first = calls[0] as ChildCall;
  const recheckMs = rt.options.childRecheckMs;
  // A sleep or a wait of the same run that ended it first keeps its own wake-up.
  held.wait ??= {
    name: first.key,
    until: rt.options.clock.now() + recheckMs,
    delayMs: recheckMs,
    stepsJson: `[${steps.entries.join(',')}]`,
    signal: { name: WAKE_SIGNAL, key: held.job.id },
  };
  const interrupt = new WaitInterrupt(held.job.id, first.key);
  for (const call of calls) call.reject(interrupt);
}

/**
 * Enqueues the children of `calls` with the checkpoint naming them: in one transaction, fenced
 * by the lease, where the store can (true); else keyed to parent and name, then checkpointed.
 */
async function enqueueChildren(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  calls: ChildCall[],
): Promise<boolean> {
  const store = rt.options.store as typeof rt.options.store & WorkflowStore;
  const steps = held.steps as RunSteps;
  const items = calls.map((call) => call.item as EnqueueItem);
  let entries: string[] = [];
  const listOf = (jobs: Job[]): string => {
    entries = jobs.map((job, i) =>
      entryText(
        (calls[i] as ChildCall).key,
        JSON.stringify({ $child: job.id }),
        rt.options.clock.now(),
        0,
      ),
    );
    return listAdding(steps, entries);
  };
  assertLive(rt, held, abort);
  let jobs: Job[];
  const inTransaction =
    store.steps.saveInTransaction !== undefined && store.capabilities.transactionalEnqueue;
  try {
    if (inTransaction) {
      jobs = await serially(steps, () =>
        (store.steps as Required<StoreSteps>).saveInTransaction<Job[]>(
          held.ref,
          (tx) => enqueueJobs(rt, items, { tx }),
          listOf,
        ),
      );
    } else {
      for (const [i, item] of items.entries()) {
        item.options = { ...item.options, key: childKey(held.job.id, (calls[i] as ChildCall).key) };
      }
      jobs = await enqueueJobs(rt, items, {});
      await serially(steps, async () => {
        if (!(await rt.checkpoints.save(held.ref, listOf(jobs)))) {
          throw new LockLostError(held.job.id);
        }
      });
    }
  } catch (error) {
    if (!(error instanceof LockLostError)) throw error;
    loseLease(rt, held);
    throw new LockLostError(
      held.job.id,
      `lease of job ${held.job.id} was lost: its children were not recorded (stale fencing token)`,
    );
  }
  for (const [i, call] of calls.entries()) {
    const entry = entries[i] as string;
    recordSetting(steps, call.key, JSON.stringify({ $child: (jobs[i] as Job).id }), entry);
    call.childId = (jobs[i] as Job).id;
    delete call.item;
  }
  return inTransaction;
}

/** The key of a child on a store without transactional steps: its parent and checkpoint. */
function childKey(parentId: string, key: string): string {
  const digest = createHash('sha256').update(key).digest('base64url').slice(0, 22);
  return `$child:${parentId}:${digest}`;
}

/** The run's step list with `entries` added at the end, or a `ValidationError` when too large. */
function listAdding(steps: RunSteps, entries: readonly string[]): string {
  const bytes = entries.reduce((n, e) => n + Buffer.byteLength(e, 'utf8') + 1, steps.bytes + 1);
  if (bytes > MAX_STEPS_BYTES) {
    throw new ValidationError(
      'ctx.run',
      `${entries.length} children would make the job's step list ${bytes} bytes of JSON, more than the limit of ${MAX_STEPS_BYTES} (MAX_STEPS_BYTES)`,
    );
  }
  return `[${[...steps.entries, ...entries].join(',')}]`;
}

/**
 * Looks at the children of earlier runs: settles the calls whose child ended; the others stay
 * open. First, once per run, takes the spare wake-ups of this parent (and its waiter rows).
 */
async function lookAtChildren(
  rt: EngineRuntime,
  held: HeldJob,
  calls: ChildCall[],
  settle: (call: ChildCall, how: 'resolve' | 'reject', value: unknown) => void,
): Promise<void> {
  const children = held.children as RunChildren;
  if (!children.drained) {
    await takeWakeUps(rt, held);
    children.drained = true;
  }
  for (const call of calls) {
    const outcome = await childOutcome(rt, held, call);
    if (outcome === null) continue;
    if (outcome instanceof ChildJobError) settle(call, 'reject', outcome);
    else settle(call, 'resolve', outcome.result);
  }
}

/** Takes this parent's wake-up signals, so none wakes a later wait of it early. */
async function takeWakeUps(rt: EngineRuntime, held: HeldJob): Promise<void> {
  const store = rt.options.store as typeof rt.options.store & WorkflowStore;
  const steps = held.steps as RunSteps;
  const list = () => `[${steps.entries.join(',')}]`;
  // The first take writes the list even without a signal: it forgets the job's waiter rows.
  let first = true;
  for (let taken = 0; taken < 100; taken++) {
    const payload = await fenced(rt, held, () =>
      store.waits.takeSignal(held.ref, WAKE_SIGNAL, held.job.id, (p) =>
        p !== null || first ? list() : null,
      ),
    );
    first = false;
    if (payload === null) return;
  }
}

/**
 * How the child of `call` ended: its outcome (checkpointed), a `ChildJobError`, or null while it
 * is unfinished. Its outcome signal is looked for again after the child was found gone: a child
 * stores it before it leaves the live table.
 */
async function childOutcome(
  rt: EngineRuntime,
  held: HeldJob,
  call: ChildCall,
): Promise<ChildOutcomeRecord | ChildJobError | null> {
  const { store } = rt.options;
  const id = call.childId as string;
  const signalled = await takeOutcome(rt, held, call);
  if (signalled) return outcomeOf(id, signalled);
  const child = await store.getJob(id);
  if (child !== null) {
    return child.state === 'deadletter'
      ? new ChildJobError(id, 'deadletter', child.lastError)
      : null;
  }
  const late = await takeOutcome(rt, held, call);
  if (late) return outcomeOf(id, late);
  const record = (await store.history?.get(id)) ?? null;
  if (record?.outcome !== 'completed') {
    const outcome = (record?.outcome ?? 'unknown') as 'deadletter' | 'cancelled' | 'unknown';
    return new ChildJobError(id, outcome, record?.lastError ?? null);
  }
  if (isResultPending(record.result)) {
    // Completed in its `ctx.transaction`, its handler not returned yet: its result signal is
    // still to come, for a lease after the completion; then its process took it along.
    const graceEnds = record.finishedAt.getTime() + rt.options.leaseMs;
    return rt.options.clock.now() < graceEnds ? null : new ChildJobError(id, 'lost');
  }
  // Completed where nobody sent its result (another path completed it): history has it.
  const outcome: ChildOutcomeRecord = { outcome: 'completed', result: record.result ?? null };
  await saveOutcome(rt, held, call, outcome);
  return outcome;
}

function outcomeOf(id: string, record: ChildOutcomeRecord): ChildOutcomeRecord | ChildJobError {
  return record.outcome === 'completed' ? record : new ChildJobError(id, record.outcome);
}

/** Takes the child's outcome signal and checkpoints it in one transaction; null when none. */
async function takeOutcome(
  rt: EngineRuntime,
  held: HeldJob,
  call: ChildCall,
): Promise<ChildOutcomeRecord | null> {
  const store = rt.options.store as typeof rt.options.store & WorkflowStore;
  const steps = held.steps as RunSteps;
  let written: { text: string; entry: string } | null = null;
  const payload = await fenced(rt, held, () =>
    store.waits.takeSignal(held.ref, RESULT_SIGNAL, call.childId as string, (p) => {
      if (p === null) return null;
      const text = JSON.stringify({ $child: call.childId, ...(JSON.parse(p) as object) });
      const entry = entryText(call.key, text, rt.options.clock.now(), 0);
      written = { text, entry };
      return listSetting(steps, call.key, entry);
    }),
  );
  if (payload === null || written === null) return null;
  const { text, entry } = written as { text: string; entry: string };
  recordSetting(steps, call.key, text, entry);
  return JSON.parse(payload) as ChildOutcomeRecord;
}

/** Checkpoints an outcome found elsewhere than in a signal (history). */
async function saveOutcome(
  rt: EngineRuntime,
  held: HeldJob,
  call: ChildCall,
  outcome: ChildOutcomeRecord,
): Promise<void> {
  const steps = held.steps as RunSteps;
  const text = JSON.stringify({ $child: call.childId, ...outcome });
  const entry = entryText(call.key, text, rt.options.clock.now(), 0);
  const saved = await fenced(rt, held, async () => {
    if (!(await rt.checkpoints.save(held.ref, listSetting(steps, call.key, entry)))) {
      throw new LockLostError(held.job.id);
    }
    return true;
  });
  if (saved) recordSetting(steps, call.key, text, entry);
}

/** A checkpoint write of the run, after the ones before it; a refused fence loses the lease. */
async function fenced<T>(rt: EngineRuntime, held: HeldJob, write: () => Promise<T>): Promise<T> {
  try {
    return await serially(held.steps as RunSteps, write);
  } catch (error) {
    if (error instanceof LockLostError) loseLease(rt, held);
    throw error;
  }
}
