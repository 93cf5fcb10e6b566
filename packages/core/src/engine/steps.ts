/**
 * Durable steps (`ctx.step`, DESIGN invariant 22 "Steps once"): a step is keyed by its name —
 * no replay log, no determinism rules; the code between steps simply runs again on a later
 * run. A step whose key the job's step list (`Job.steps`) holds returns its stored result and
 * does not run; else its function runs and the step list, with it added, is written under the
 * lease's token (`JobStore.saveSteps`): a stale owner's checkpoint is refused, never recorded,
 * and the step throws `LockLostError`. With `transaction: true` the function's writes and the
 * checkpoint commit in one transaction, only while the lease is current
 * (`JobStore.saveStepsInTransaction`): its effects apply exactly once.
 *
 * The same name again in one run gets a counter: `name`, `name#2`, `name#3`… (so `#` is not
 * allowed in a name). A run's checkpoints are written one at a time, each with every step
 * completed before it, and transaction steps of one job run one at a time.
 */
import { JobsError, LockLostError, ValidationError } from '../errors.js';
import { jsonText, UNSTORABLE_IN_JSON } from '../rules.js';
import { type Job, MAX_STEP_RESULT_BYTES, MAX_STEPS_BYTES, type StoreSteps } from '../store.js';
import { callThrough } from './hooks.js';
import type { RunSteps } from './run-steps.js';
import type { EngineRuntime, HeldJob, JobAbort } from './runtime.js';

/** Longest step name, in characters. */
export const MAX_STEP_NAME_CHARS = 200;

/** `ctx.step`'s options. */
export interface StepOptions {
  /**
   * Runs the function in a transaction of the store's database (its argument, as
   * `ctx.transaction` gives it) that also writes the checkpoint, committed only while this
   * lease is current: the step's database effects apply exactly once.
   */
  transaction?: boolean;
}

/** The run's step state, read from the job's stored step list (`Job.steps`). */
export function runStepsOf(job: Job): RunSteps {
  const steps: RunSteps = {
    done: new Map(),
    entries: [],
    positions: new Map(),
    bytes: 0,
    counts: new Map(),
    chain: Promise.resolve(),
    running: new Set(),
  };
  for (const step of job.steps ?? []) {
    const result = JSON.stringify(step.result ?? null);
    const entry = entryText(step.name, result, step.at.getTime(), step.durationMs);
    steps.done.set(step.name, result);
    steps.positions.set(step.name, steps.entries.length);
    steps.entries.push(entry);
    steps.bytes += Buffer.byteLength(entry, 'utf8') + 1;
  }
  return steps;
}

export function entryText(key: string, result: string, at: number, durationMs: number): string {
  return `{"name":${JSON.stringify(key)},"result":${result},"at":${at},"durationMs":${durationMs}}`;
}

/**
 * The next checkpoint of `held`'s run named `name`: its key (`name`, then `name#2`… — steps,
 * sleeps and waits share the counters), the run's steps, and the result an earlier run stored
 * under that key. A job `ctx.transaction` already completed takes no checkpoint: `call` and
 * `detail` name the caller in that refusal.
 */
export function nextCheckpoint(
  held: HeldJob,
  name: string,
  call: string,
  detail: string,
): { steps: RunSteps; key: string; stored: string | undefined } {
  if (held.completedInTransaction) {
    throw new JobsError(
      'INVALID_STATE',
      `[@jobs/core] ${call}: job ${held.job.id} was already completed by ctx.transaction${detail}`,
    );
  }
  held.steps ??= runStepsOf(held.job);
  const steps = held.steps;
  const count = (steps.counts.get(name) ?? 0) + 1;
  steps.counts.set(name, count);
  const key = count === 1 ? name : `${name}#${count}`;
  return { steps, key, stored: steps.done.get(key) };
}

/**
 * A sleep's or a child's name (`what`, in `call`'s message): 1 to `MAX_STEP_NAME_CHARS`
 * characters without `#` (it marks counters) or control characters, else a `ValidationError`.
 */
export function assertCheckpointName(name: unknown, call: string, what: string): void {
  if (
    typeof name !== 'string' ||
    name === '' ||
    name.length > MAX_STEP_NAME_CHARS ||
    UNSTORABLE_IN_JSON.test(name) ||
    name.includes('#')
  ) {
    throw new ValidationError(
      'name',
      `${call}: ${what}'s name is a string of 1 to ${MAX_STEP_NAME_CHARS} characters without '#' or control characters`,
    );
  }
}

/** `ctx.step(name, fn, options)` of `held`'s run. */
export async function runStep<T>(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  name: string,
  fn: (tx?: unknown) => T | Promise<T>,
  options?: StepOptions,
): Promise<T> {
  const { store } = rt.options;
  if (typeof name !== 'string' || name === '' || name.length > MAX_STEP_NAME_CHARS) {
    throw new ValidationError(
      'name',
      `ctx.step: a step's name is a string of 1 to ${MAX_STEP_NAME_CHARS} characters`,
    );
  }
  if (UNSTORABLE_IN_JSON.test(name)) {
    throw new ValidationError(
      'name',
      `ctx.step: step name ${JSON.stringify(name)} holds NUL, another control character or an unpaired surrogate, which not every store keeps`,
    );
  }
  if (name.includes('#')) {
    throw new ValidationError(
      'name',
      `ctx.step: step name ${JSON.stringify(name)} has a '#', which marks the counter of a repeated name (name#2)`,
    );
  }
  if (typeof fn !== 'function') {
    throw new ValidationError('fn', `ctx.step: step "${name}" needs a function to run`);
  }
  const transaction = options?.transaction === true;
  if (!store.steps) {
    throw new JobsError(
      'STORE',
      `[@jobs/core] ctx.step: the ${store.name} store keeps no steps (it has no \`steps\`)`,
    );
  }
  if (transaction && !store.steps.saveInTransaction) {
    throw new JobsError(
      'STORE',
      `[@jobs/core] ctx.step: the ${store.name} store has no transactions for steps (step "${name}" with transaction: true)`,
    );
  }
  const { steps, key, stored } = nextCheckpoint(held, name, 'ctx.step', ` (step "${name}")`);
  if (rt.hooks.step.length > 0) {
    // Instrumentation (`engine.use({ step })`) around the function, or around the replay.
    const call = { name: key, transaction, replayed: stored !== undefined };
    const around = (inner: () => unknown) =>
      callThrough(rt.hooks.step, [held.job, call], async () => inner()) as Promise<T>;
    if (stored !== undefined) return around(() => JSON.parse(stored));
    const unhooked = fn;
    fn = (tx) => around(() => unhooked(tx));
  }
  if (stored !== undefined) return JSON.parse(stored) as T;

  if (transaction) {
    refuseNestedTransaction(held, `ctx.step "${key}" with transaction: true`);
    // One at a time: two transactions of one job would each write the list without the other.
    return serially(steps, () => stepInTransaction(rt, held, abort, key, fn));
  }
  assertLive(rt, held, abort);
  const started = Date.now();
  const result = await tracked(steps, fn);
  const durationMs = Math.max(0, Date.now() - started);
  const text = resultText(key, result);
  await serially(steps, async () => {
    const entry = entryText(key, text, rt.options.clock.now(), durationMs);
    const list = listWith(steps, key, entry);
    let saved: boolean;
    try {
      saved = await rt.checkpoints.save(held.ref, list);
    } catch (error) {
      rt.reportError(error, 'save step');
      throw error;
    }
    if (!saved) {
      // The lease is gone: another owner may run the job now; this checkpoint never counts.
      loseLease(rt, held);
      throw new LockLostError(held.job.id, lostMessage(held, key));
    }
    record(steps, key, text, entry);
  });
  return JSON.parse(text) as T;
}

async function stepInTransaction<T>(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  key: string,
  fn: (tx?: unknown) => T | Promise<T>,
): Promise<T> {
  const steps = held.steps as RunSteps;
  assertLive(rt, held, abort);
  const started = Date.now();
  let text = '';
  let entry = '';
  held.openTransaction = `ctx.step "${key}" with transaction: true`;
  try {
    await (storeSteps(rt).saveInTransaction as NonNullable<StoreSteps['saveInTransaction']>)(
      held.ref,
      async (tx) => fn(tx),
      (result) => {
        text = resultText(key, result);
        const durationMs = Math.max(0, Date.now() - started);
        entry = entryText(key, text, rt.options.clock.now(), durationMs);
        return listWith(steps, key, entry);
      },
    );
  } catch (error) {
    if (error instanceof LockLostError) {
      loseLease(rt, held);
      throw new LockLostError(held.job.id, lostMessage(held, key));
    }
    throw error;
  } finally {
    held.openTransaction = undefined;
  }
  record(steps, key, text, entry);
  return JSON.parse(text) as T;
}

/**
 * Refuses a store transaction opened inside another of the same job: the inner one would wait
 * for the outer one, which waits for it (one write transaction at a time on SQLite; transaction
 * steps of a job one at a time everywhere), or commit on its own beside it.
 */
export function refuseNestedTransaction(held: HeldJob, what: string): void {
  if (held.openTransaction === undefined) return;
  throw new JobsError(
    'INVALID_STATE',
    `[@jobs/core] ${what}: job ${held.job.id} is inside ${held.openTransaction} already; a store transaction inside another would wait for itself — write through the outer transaction's handle`,
  );
}

/** The store's `steps` ability, checked by `runStep` before any step runs. */
function storeSteps(rt: EngineRuntime): StoreSteps {
  return rt.options.store.steps as StoreSteps;
}

/** Runs a step's function, kept in `steps.running` while it runs. */
async function tracked<T>(steps: RunSteps, fn: () => T | Promise<T>): Promise<T> {
  let running: Promise<T>;
  try {
    running = Promise.resolve(fn());
  } catch (error) {
    running = Promise.reject(error);
  }
  steps.running.add(running);
  try {
    return await running;
  } finally {
    steps.running.delete(running);
  }
}

/** Runs `write` after the run's previous checkpoint settled; the next waits for this one. */
export function serially<T>(steps: RunSteps, write: () => Promise<T>): Promise<T> {
  const next = steps.chain.then(write, write);
  steps.chain = next.catch(() => undefined);
  return next;
}

/**
 * A step starts only while this engine holds the lease with its local deadline ahead (DESIGN
 * invariant 21), and not after the run was aborted (time limit, cancel, `stop()`).
 */
export function assertLive(rt: EngineRuntime, held: HeldJob, abort: JobAbort): void {
  if (held.phase === 'running' && !rt.jobs.deadlineAhead(held)) loseLease(rt, held);
  if (held.phase !== 'running') throw new LockLostError(held.job.id);
  if (abort.aborted) throw abort.signal.reason;
}

export function loseLease(rt: EngineRuntime, held: HeldJob): void {
  if (held.phase === 'lost' || held.phase === 'done') return;
  if (rt.jobs.lost) rt.jobs.lost(held);
  else if (rt.jobs.lose(held)) rt.reportLeaseLost(held);
}

function lostMessage(held: HeldJob, key: string): string {
  return `lease of job ${held.job.id} was lost: step "${key}" was not recorded (stale fencing token)`;
}

/** The step's result as the JSON every later run reads, or a `ValidationError` naming the step. */
function resultText(key: string, result: unknown): string {
  const field = `step "${key}" result`;
  const text = result === undefined ? 'null' : jsonText(result, field);
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_STEP_RESULT_BYTES) {
    throw new ValidationError(
      field,
      `is ${bytes} bytes of JSON, more than the limit of ${MAX_STEP_RESULT_BYTES} (MAX_STEP_RESULT_BYTES): store large data elsewhere and return a reference`,
    );
  }
  return text;
}

/** The job's step list as JSON text with `entry` added, or a `ValidationError` when too large. */
export function listWith(steps: RunSteps, key: string, entry: string): string {
  const bytes = steps.bytes + Buffer.byteLength(entry, 'utf8') + 2;
  if (bytes > MAX_STEPS_BYTES) {
    throw new ValidationError(
      `step "${key}"`,
      `would make the job's step list ${bytes} bytes of JSON, more than the limit of ${MAX_STEPS_BYTES} (MAX_STEPS_BYTES)`,
    );
  }
  return steps.entries.length === 0 ? `[${entry}]` : `[${steps.entries.join(',')},${entry}]`;
}

function record(steps: RunSteps, key: string, text: string, entry: string): void {
  steps.done.set(key, text);
  steps.positions.set(key, steps.entries.length);
  steps.entries.push(entry);
  steps.bytes += Buffer.byteLength(entry, 'utf8') + 1;
}

/**
 * The run's step list with `key`'s entry set to `entry` (replaced, or added at the end). Its
 * place comes from `positions`: a flow of a thousand nodes sets a thousand checkpoints, and
 * finding each by parsing the entries made that quadratic.
 */
export function listSetting(steps: RunSteps, key: string, entry: string): string {
  const index = steps.positions.get(key);
  if (index === undefined) return listWith(steps, key, entry);
  const entries = [...steps.entries];
  entries[index] = entry;
  return `[${entries.join(',')}]`;
}

/** Records a written checkpoint of `key` in the run's steps (replacing an earlier one). */
export function recordSetting(steps: RunSteps, key: string, text: string, entry: string): void {
  const index = steps.positions.get(key);
  if (index === undefined) {
    record(steps, key, text, entry);
    return;
  }
  steps.bytes +=
    Buffer.byteLength(entry, 'utf8') - Buffer.byteLength(steps.entries[index] ?? '', 'utf8');
  steps.entries[index] = entry;
  steps.done.set(key, text);
}
