/**
 * Plain text both operator tools print the same way: durations, times relative to the store's
 * clock, a job's scope limit, what a parked job waits for. The dashboard renders with it and `@jobs/cli` imports it from the
 * `@jobs/dashboard/text` entry, which loads nothing else of the dashboard.
 *
 * @example
 * import { duration, relativeText, scopeLimitText } from '@jobs/dashboard/text';
 * duration(3_725_000); // '1h 2m'
 * relativeText(job.dueAt, (await store.now()).getTime()); // 'in 5m 3s', '3m 12s ago' or 'now'
 * scopeLimitText({ exclusive: false, scopeLimit: 2 }); // 'limit 2'
 * jobWait(job, now); // { kind: 'sleep', step: 'cool-off', until: Date } or null
 */

const UNITS: readonly (readonly [string, number])[] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
];

/** `1h 5m`, `3m 12s`, `45s`, `850ms`: the largest unit and the next one when it is not 0. */
export function duration(ms: number): string {
  const abs = Math.abs(Math.round(ms));
  const i = UNITS.findIndex(([, size]) => abs >= size);
  const first = UNITS[i];
  if (!first) return `${abs}ms`;
  const n = Math.floor(abs / first[1]);
  const next = UNITS[i + 1];
  const m = next ? Math.floor((abs - n * first[1]) / next[1]) : 0;
  return next && m > 0 ? `${n}${first[0]} ${m}${next[0]}` : `${n}${first[0]}`;
}

/** `in 5m 3s`, `3m 12s ago` or `now` (within a second), relative to `now` (ms since the epoch). */
export function relativeText(at: Date, now: number): string {
  const delta = at.getTime() - now;
  if (Math.abs(delta) < 1_000) return 'now';
  return delta > 0 ? `in ${duration(delta)}` : `${duration(delta)} ago`;
}

/** What a job says about its scope limit; `Job` of `@jobs/core` fits. */
export interface ScopeLimited {
  exclusive: boolean;
  /** Absent on stores written before scope limits: `exclusive` then means 1. */
  scopeLimit?: number | null;
}

/** How many limited jobs of its scope may run at once: 1 when exclusive, null for no limit. */
export function scopeLimitOf(job: ScopeLimited): number | null {
  return job.scopeLimit ?? (job.exclusive ? 1 : null);
}

/** `exclusive` (a limit of 1), `limit 3`, or null for a job without a scope limit. */
export function scopeLimitText(job: ScopeLimited): string | null {
  const limit = scopeLimitOf(job);
  if (limit === null) return null;
  return limit === 1 ? 'exclusive' : `limit ${limit}`;
}

/**
 * An instant's wall-clock time in `timeZone` (an IANA name), labelled with that name
 * (`2026-11-24 03:00:00 Europe/Berlin`) or, with `label: 'offset'`, with its short offset
 * (`2026-11-24 03:00:00 GMT+1`). Throws a `RangeError` for a zone `Intl` does not know.
 */
export function inZone(at: Date, timeZone: string, label: 'name' | 'offset' = 'name'): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
      timeZoneName: 'short',
    })
      .formatToParts(at)
      .map((part) => [part.type, part.value]),
  );
  const zone = label === 'offset' ? parts.timeZoneName : timeZone;
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${zone}`;
}

/** A durable step as `Job.steps` holds it; `JobStep` of `@jobs/core` fits. */
export interface StepLike {
  name: string;
  result: unknown;
}

/**
 * What a parked job waits for: a sleep's end (`ctx.sleep`), or a signal by name until the
 * wait's timeout (`ctx.waitFor`). `step` is the checkpoint's key (`approval`, `approval#2`).
 */
export type JobWait =
  | { kind: 'sleep'; step: string; until: Date }
  | { kind: 'signal'; step: string; signal: string; key: string | null; until: Date };

/**
 * What a job parked by `ctx.sleep` or `ctx.waitFor` waits for, read from its state and steps
 * alone: the wait's checkpoint is its last step — `{ "$sleepUntil": ms }`, or `{ "$waitUntil":
 * ms, "$key": key }` for a signal not taken yet — and the job is a `timer` due then. Null for
 * any other job, and once that time has passed (the job is due). `key` is null for a wait
 * checkpointed before waits recorded their key.
 *
 * @example
 * jobWait(job, now); // { kind: 'signal', step: 'approval', signal: 'approval', key: 'o-1', until: Date }
 */
export function jobWait(
  job: { state: string; steps?: readonly StepLike[] },
  now: number,
): JobWait | null {
  const last = job.state === 'timer' ? job.steps?.at(-1) : undefined;
  if (!last || typeof last.result !== 'object' || last.result === null) return null;
  const { $sleepUntil, $waitUntil, $key } = last.result as Record<string, unknown>;
  const step = last.name;
  if (typeof $sleepUntil === 'number' && $sleepUntil > now) {
    return { kind: 'sleep', step, until: new Date($sleepUntil) };
  }
  if (typeof $waitUntil === 'number' && $waitUntil > now) {
    // Keys of a name used again in one run carry a counter: `approval#2`.
    const signal = step.replace(/#\d+$/, '');
    const key = typeof $key === 'string' ? $key : null;
    return { kind: 'signal', step, signal, key, until: new Date($waitUntil) };
  }
  return null;
}

/** Quotes a word for a POSIX shell when it needs it (a command line an operator copies). */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
