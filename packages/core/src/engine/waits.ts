/**
 * Durable sleeps (`ctx.sleep`, DESIGN invariant 23 "Waits free the worker"): a sleep is a step
 * whose stored result is its wake time. The first time, the wake time is checkpointed with the
 * job's steps and the job goes back to waiting — a `timer` due then, in one write fenced by the
 * lease's token (`StoreWaits.sleep`), the attempt not counted — and the handler is ended by a
 * private interrupt (`WaitInterrupt`) that the engine recognises: never a failure, no history
 * record, no retry. It holds no slot, lease, connection or scope slot while it waits. When the
 * job runs again, completed steps return their stored results and the same `ctx.sleep` finds
 * its checkpoint and returns at once once its time has come (or sleeps the rest when woken
 * early, e.g. by an operator).
 */
import { JobsError, LockLostError, ValidationError } from '../errors.js';
import { jsonText, UNSTORABLE_IN_JSON } from '../rules.js';
import { durationToMs, parseDuration } from '../schedule/iso8601.js';
import type { StoreWaits } from '../store.js';
import { callThrough } from './hooks.js';
import type { RunSteps } from './run-steps.js';
import type { EngineRuntime, HeldJob, JobAbort } from './runtime.js';
import {
  assertCheckpointName,
  assertLive,
  entryText,
  listSetting,
  listWith,
  loseLease,
  nextCheckpoint,
  recordSetting,
  serially,
} from './steps.js';
import type { WaitCall } from './types.js';

/** The longest sleep, in ms (about 100 years): a due time every database stores. */
export const MAX_SLEEP_MS = 100 * 365 * 86_400_000;

/**
 * Ends a handler whose job now waits (`ctx.sleep`): the engine gives the job back to waiting
 * instead of settling it. Private: a handler that catches it still ends its run by returning,
 * and the job sleeps whatever it returns.
 */
export class WaitInterrupt extends Error {
  constructor(jobId: string, name: string) {
    super(`job ${jobId} sleeps ("${name}"): this run ends here and the job runs again later`);
    this.name = 'WaitInterrupt';
  }
}

/**
 * True for the engine's park: what `ctx.sleep`, `ctx.waitFor` and `ctx.run` throw when the job
 * now waits and this run ends (not a failure). For instrumentation (`EngineHooks.wait`) and
 * handlers that catch everything: rethrow it.
 *
 * @example
 * try { await ctx.run('label', 'make-label', payload); }
 * catch (error) { if (isParked(error)) throw error; // … }
 */
export function isParked(error: unknown): boolean {
  return error instanceof WaitInterrupt;
}

/** Calls `inner` through the engine's `wait` hooks, when there are any. */
export function aroundWait<T>(
  rt: EngineRuntime,
  held: HeldJob,
  call: WaitCall,
  inner: () => Promise<T>,
): Promise<T> {
  if (rt.hooks.wait.length === 0) return inner();
  return callThrough(rt.hooks.wait, [held.job, call], inner) as Promise<T>;
}

/** A sleep's length in ms from a number of ms, an ISO-8601 duration (`'PT1H'`) or a `Date`. */
export function sleepMs(duration: number | string | Date, now: number): number {
  let ms: number;
  if (typeof duration === 'number') ms = duration;
  else if (typeof duration === 'string') {
    ms = durationToMs(parseDuration(duration, 'ctx.sleep duration'));
  } else if (duration instanceof Date) ms = duration.getTime() - now;
  else {
    throw new ValidationError(
      'ctx.sleep duration',
      `expected ms (a number), an ISO-8601 duration like "PT1H" or a Date, got ${typeof duration}`,
    );
  }
  if (!Number.isFinite(ms) || ms > MAX_SLEEP_MS) {
    throw new ValidationError(
      'ctx.sleep duration',
      `${String(duration)} is not a duration of 0 to ${MAX_SLEEP_MS} ms (MAX_SLEEP_MS)`,
    );
  }
  return Math.max(0, Math.round(ms));
}

/** `ctx.sleep(name, duration)` of `held`'s run. */
export async function runSleep(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  name: string,
  duration: number | string | Date,
): Promise<void> {
  const { store, clock } = rt.options;
  assertCheckpointName(name, 'ctx.sleep', 'a sleep');
  const now = clock.now();
  const ms = sleepMs(duration, now);
  if (!store.steps || !store.waits) {
    throw new JobsError(
      'STORE',
      `[@jobs/core] ctx.sleep: the ${store.name} store cannot keep a job waiting (it has no \`waits\`)`,
    );
  }
  const { steps, key, stored } = nextCheckpoint(held, name, 'ctx.sleep', ` (sleep "${name}")`);
  const replayed = stored !== undefined && sleepOver(wakeTime(stored), now);
  return aroundWait(rt, held, { kind: 'sleep', name: key, replayed }, () =>
    sleepFrom(rt, held, abort, { steps, key, stored }, now, ms),
  );
}

/** `runSleep` once its checkpoint was found: returns, or parks the job. */
async function sleepFrom(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  { steps, key, stored }: { steps: RunSteps; key: string; stored: string | undefined },
  now: number,
  ms: number,
): Promise<void> {
  if (stored !== undefined) {
    const until = wakeTime(stored);
    if (until === null) {
      throw new JobsError(
        'INVALID_STATE',
        `[@jobs/core] ctx.sleep: job ${held.job.id} has a step "${key}" that is not a sleep (a step and a sleep share names)`,
      );
    }
    if (sleepOver(until, now)) return;
    // Woken before its time (an operator ran it, clocks moved): sleep the rest, same checkpoint.
    await serially(steps, async () => undefined);
    const list = steps.entries.length === 0 ? '[]' : `[${steps.entries.join(',')}]`;
    interrupt(rt, held, abort, key, until, until - now, list);
  }
  // Every checkpoint written before this one is in the list.
  await serially(steps, async () => undefined);
  // Whole ms: the store's due times are integers, and so are the checkpoints operators read.
  const until = Math.round(now + ms);
  const entry = entryText(key, JSON.stringify({ $sleepUntil: until }), now, 0);
  interrupt(rt, held, abort, key, until, ms, listWith(steps, key, entry));
}

/**
 * How early a sleep may be woken and still count as over. The engine reads the store's clock
 * through an estimate (`StoreSyncedClock`: up to half a round trip off) and the store rounds due
 * times to whole ms, so a job made due exactly at its wake time can find itself a ms or two
 * early; sleeping that again would run its handler once more for nothing.
 */
export const SLEEP_TOLERANCE_MS = 10;

/** Whether a sleep until `until` (null: not a sleep) is over at `now`, within the tolerance. */
function sleepOver(until: number | null, now: number): boolean {
  return until !== null && until <= now + SLEEP_TOLERANCE_MS;
}

function interrupt(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  key: string,
  until: number,
  delayMs: number,
  stepsJson: string,
): never {
  assertLive(rt, held, abort);
  held.wait = { name: key, until, delayMs, stepsJson };
  throw new WaitInterrupt(held.job.id, key);
}

/** A stored wait's result is its signal (or its timeout): the wait is over. */
function isSignalResult(resultJson: string): boolean {
  const result = JSON.parse(resultJson) as unknown;
  return typeof result === 'object' && result !== null && '$signal' in result;
}

/** A stored sleep's wake time (epoch ms), or null for a step that is not a sleep. */
function wakeTime(resultJson: string): number | null {
  const result = JSON.parse(resultJson) as unknown;
  if (typeof result !== 'object' || result === null) return null;
  const until = (result as { $sleepUntil?: unknown }).$sleepUntil;
  return typeof until === 'number' ? until : null;
}

/** Largest signal payload, in bytes of JSON (as a step result). */
export const MAX_SIGNAL_PAYLOAD_BYTES = 64 * 1024;

/** Longest signal name or key, in characters (a `VARCHAR(255)` on MySQL). */
export const MAX_SIGNAL_NAME_CHARS = 255;

/** `ctx.waitFor`'s options. */
export interface WaitForOptions {
  /** Which signal of that name: the `key` `engine.signal` sends (an order id, …). */
  key: string;
  /** Give up after this many ms and return null; by default `MAX_SLEEP_MS`. */
  timeoutMs?: number;
}

function checkSignalName(what: string, name: unknown, key: unknown): void {
  for (const [field, value] of [
    ['name', name],
    ['key', key],
  ] as const) {
    if (
      typeof value !== 'string' ||
      value.length > MAX_SIGNAL_NAME_CHARS ||
      (field === 'name' && value === '') ||
      UNSTORABLE_IN_JSON.test(value)
    ) {
      throw new ValidationError(
        field,
        `${what}: a signal's ${field} is a string of ${field === 'name' ? 1 : 0} to ${MAX_SIGNAL_NAME_CHARS} characters without control characters`,
      );
    }
  }
}

function storeWaits(rt: EngineRuntime, what: string): StoreWaits {
  const { store } = rt.options;
  if (!store.steps || !store.waits) {
    throw new JobsError(
      'STORE',
      `[@jobs/core] ${what}: the ${store.name} store cannot keep a job waiting (it has no \`waits\`)`,
    );
  }
  return store.waits;
}

/**
 * `engine.signal(name, { key, payload })`: stored until one job waiting for (name, key) takes
 * it, exactly once; a job waiting for it is made due at once.
 */
export async function sendSignal(
  rt: EngineRuntime,
  name: string,
  options: { key: string; payload?: unknown },
): Promise<void> {
  const key = options?.key;
  checkSignalName('engine.signal', name, key);
  if (name.includes('#')) {
    // `ctx.waitFor` refuses such names: a signal sent under one could never be taken.
    throw new ValidationError(
      'name',
      `engine.signal: a signal's name has no '#' (it marks counters)`,
    );
  }
  const payload = jsonText(options.payload ?? null, 'payload');
  const bytes = Buffer.byteLength(payload, 'utf8');
  if (bytes > MAX_SIGNAL_PAYLOAD_BYTES) {
    throw new ValidationError(
      'payload',
      `engine.signal: the payload is ${bytes} bytes of JSON, more than the limit of ${MAX_SIGNAL_PAYLOAD_BYTES}`,
    );
  }
  await storeWaits(rt, 'engine.signal').signal(name, key, payload);
}

/** `ctx.waitFor(name, { key, timeoutMs })` of `held`'s run. */
export async function runWaitFor<T>(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  name: string,
  options: WaitForOptions,
): Promise<T | null> {
  const key = options?.key;
  checkSignalName('ctx.waitFor', name, key);
  if (name.includes('#')) {
    throw new ValidationError(
      'name',
      `ctx.waitFor: a signal's name has no '#' (it marks counters)`,
    );
  }
  const timeoutMs = options.timeoutMs ?? MAX_SLEEP_MS;
  if (
    typeof timeoutMs !== 'number' ||
    !Number.isFinite(timeoutMs) ||
    timeoutMs < 0 ||
    timeoutMs > MAX_SLEEP_MS
  ) {
    throw new ValidationError(
      'timeoutMs',
      `ctx.waitFor: timeoutMs is a number of 0 to ${MAX_SLEEP_MS} ms`,
    );
  }
  const waits = storeWaits(rt, 'ctx.waitFor');
  const checkpoint = nextCheckpoint(held, name, 'ctx.waitFor', '');
  const replayed = checkpoint.stored !== undefined && isSignalResult(checkpoint.stored);
  return aroundWait(
    rt,
    held,
    { kind: 'waitFor', name: checkpoint.key, replayed, signal: name },
    () => waitFrom<T>(rt, held, abort, waits, checkpoint, name, key, timeoutMs),
  );
}

/** `runWaitFor` once its checkpoint was found: the payload, null (timed out), or a park. */
async function waitFrom<T>(
  rt: EngineRuntime,
  held: HeldJob,
  abort: JobAbort,
  waits: StoreWaits,
  { steps, key: stepKey, stored }: { steps: RunSteps; key: string; stored: string | undefined },
  name: string,
  key: string,
  timeoutMs: number,
): Promise<T | null> {
  const { clock } = rt.options;
  let until: number | null = null;
  if (stored !== undefined) {
    const result = JSON.parse(stored) as Record<string, unknown> | null;
    if (result !== null && typeof result === 'object' && '$signal' in result) {
      return result.$signal as T | null;
    }
    until = typeof result?.$waitUntil === 'number' ? result.$waitUntil : null;
    if (until === null) {
      throw new JobsError(
        'INVALID_STATE',
        `[@jobs/core] ctx.waitFor: job ${held.job.id} has a step "${stepKey}" that is not a wait (steps, sleeps and waits share names)`,
      );
    }
  }
  // Every checkpoint written before this one is in the list.
  await serially(steps, async () => undefined);
  assertLive(rt, held, abort);
  const now = clock.now();
  const deadline = until ?? Math.round(now + timeoutMs);
  let written: { text: string; entry: string } | null = null;
  const stepsJsonOf = (payload: string | null): string | null => {
    if (payload === null && deadline > now) return null;
    const text = `{"$signal":${payload ?? 'null'}${payload === null ? ',"$timedOut":true' : ''}}`;
    const entry = entryText(stepKey, text, clock.now(), 0);
    written = { text, entry };
    return listSetting(steps, stepKey, entry);
  };
  let payload: string | null;
  try {
    payload = await waits.takeSignal(held.ref, name, key, stepsJsonOf);
  } catch (error) {
    if (error instanceof LockLostError) {
      loseLease(rt, held);
      throw new LockLostError(
        held.job.id,
        `lease of job ${held.job.id} was lost: wait "${stepKey}" was not recorded (stale fencing token)`,
      );
    }
    throw error;
  }
  if (written !== null) {
    const { text, entry } = written as { text: string; entry: string };
    recordSetting(steps, stepKey, text, entry);
    return payload === null ? null : (JSON.parse(payload) as T);
  }
  // No signal yet and time left: the job waits for it, at most until the deadline.
  // The key rides along for operators (`jobsctl show`, the dashboard): the waiter record is the store's.
  const entry = entryText(stepKey, JSON.stringify({ $waitUntil: deadline, $key: key }), now, 0);
  assertLive(rt, held, abort);
  held.wait = {
    name: stepKey,
    until: deadline,
    delayMs: Math.max(0, deadline - now),
    stepsJson: listSetting(steps, stepKey, entry),
    signal: { name, key },
  };
  throw new WaitInterrupt(held.job.id, stepKey);
}
