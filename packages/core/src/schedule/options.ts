/**
 * What a schedule is made of, and the checks that reject a bad one before anything is stored.
 *
 * Exactly one trigger: `cron` (5 fields, or 6 with seconds first; optional `timezone`), `every`
 * (an ISO-8601 duration) or `repeat` (an ISO-8601 repeating interval, `R5/PT10M`, `R/PT1H`,
 * `R3/2026-01-01T00:00:00Z/PT1H`).
 */
import { Cron } from 'croner';
import { IANAZone } from 'luxon';
import {
  assertText,
  EARLIEST_DUE,
  LATEST_DUE,
  MAX_DELAY_MS,
  UNSTORABLE_IN_NAME,
} from '../engine/validate.js';
import { ValidationError } from '../errors.js';
import { MAX_RETRIES } from '../retry.js';
import { checkPayload } from '../rules.js';
import { durationToMs, type IsoDuration, parseDuration, parseRepeat } from './iso8601.js';

/** What happens when an occurrence comes due while the previous one is still unfinished. */
export type ScheduleOverlap = 'skip' | 'coalesce' | 'allow';

/**
 * Options of `engine.schedule(name, options)`.
 *
 * @example
 * await engine.schedule('nightly-report', {
 *   cron: '0 3 * * *', timezone: 'Europe/Berlin', type: 'report', shards: 4, overlap: 'coalesce',
 * });
 * await engine.schedule('heartbeat', { every: 'PT30S' });
 * await engine.schedule('warm-up', { repeat: 'R5/PT10M', payload: { level: 2 } });
 */
export interface ScheduleOptions {
  /**
   * A cron expression: `minute hour day-of-month month day-of-week`, or with a leading seconds
   * field (6 fields). Names (`MON`, `JAN`), ranges, steps, `L`, `W`, `#` and nicknames
   * (`@daily`) work as in croner.
   */
  cron?: string;
  /**
   * IANA time zone (`Europe/Berlin`) the trigger is read in. Default `UTC`. Applies to `cron`, and
   * to the calendar parts (years, months, weeks, days) of `every` / `repeat`, which keep the wall
   * clock time across daylight saving changes.
   */
  timezone?: string;
  /** Fire every ISO-8601 duration (`PT10M`, `P1D`), the first time one duration after definition. */
  every?: string;
  /**
   * An ISO-8601 repeating interval. `R5/PT10M`: five fires, ten minutes apart, the first ten
   * minutes after definition. `R/PT1H`: unbounded. `R3/2026-01-01T00:00:00Z/PT1H`: three fires,
   * the first at the start (occurrences already past when the schedule is defined are not fired).
   */
  repeat?: string;
  /** Job type each occurrence creates. Default: the schedule's name. */
  type?: string;
  /** Payload of each occurrence's job(s). Must survive `JSON.stringify`. */
  payload?: unknown;
  /** Failed attempts allowed per occurrence job. Default: the engine's default for the type. */
  retries?: number;
  /** Priority of the occurrence jobs. Default 0. */
  priority?: number;
  /** Queue of the occurrence jobs. Default `'default'`. */
  queue?: string;
  tenantId?: string;
  /**
   * Default `'skip'`: a fire while the previous occurrence is unfinished (waiting, running or
   * waiting for a retry) is dropped and counted in `skipped` — never two runs at once, never a
   * surprise backlog. `'coalesce'` (ElasticJob's misfire): remember it and run once as soon as the
   * previous occurrence ends; many such fires become one run. `'allow'`: runs may overlap.
   */
  overlap?: ScheduleOverlap;
  /**
   * Occurrences missed while no engine ran (downtime, pause): by default (0) they are coalesced
   * into one run, for the latest missed occurrence. `catchUp: n` runs the latest n missed
   * occurrences instead, oldest first, one after another unless `overlap` is `'allow'`.
   */
  catchUp?: number;
  /**
   * Jobs per occurrence (default 1). Shard i gets scope `<name>#i`, runs exclusively in that
   * scope across all nodes, and sees `ctx.shard = { index: i, count: shards }`. An unsharded
   * schedule's jobs get scope `<name>#0` too, exclusive unless `overlap` is `'allow'` (so
   * catch-up runs go one at a time, oldest first), and `ctx.shard` null.
   */
  shards?: number;
}

/** The validated options, with defaults filled in. This is what the store keeps (as `spec`). */
export interface NormalizedScheduleOptions {
  cron: string | null;
  timezone: string;
  every: string | null;
  repeat: string | null;
  type: string;
  payload: unknown;
  retries: number | null;
  priority: number;
  queue: string;
  tenantId: string | null;
  overlap: ScheduleOverlap;
  catchUp: number;
  shards: number;
}

const KNOWN_OPTIONS: ReadonlySet<string> = new Set([
  'cron',
  'timezone',
  'every',
  'repeat',
  'type',
  'payload',
  'retries',
  'priority',
  'queue',
  'tenantId',
  'overlap',
  'catchUp',
  'shards',
]);

/** Longest schedule name: it is part of every occurrence job's key (`sched:<name>@<iso>#<i>`). */
export const MAX_SCHEDULE_NAME_LENGTH = 128;
/** Largest payload of a schedule's jobs (the engine's default job payload limit). */
export const MAX_SCHEDULE_PAYLOAD_BYTES = 1024 * 1024;
/** Most shards per schedule. */
export const MAX_SHARDS = 1000;
/** Most missed occurrences `catchUp` replays. */
export const MAX_CATCH_UP = 1000;

/**
 * Checks a schedule name: non-empty, at most 128 characters, no control characters or unpaired
 * surrogates (as every name a store keeps). Names are exact: `nightly ` is not `nightly`.
 */
export function validateScheduleName(name: unknown): string {
  if (typeof name !== 'string' || name.trim() === '') {
    throw new ValidationError(
      'name',
      `a schedule needs a non-empty name, got ${JSON.stringify(name)}`,
    );
  }
  if (name.length > MAX_SCHEDULE_NAME_LENGTH) {
    throw new ValidationError(
      'name',
      `schedule name is longer than ${MAX_SCHEDULE_NAME_LENGTH} characters`,
    );
  }
  if (UNSTORABLE_IN_NAME.test(name)) {
    throw new ValidationError(
      'name',
      `schedule name ${JSON.stringify(name)} contains control characters or unpaired surrogates`,
    );
  }
  return name;
}

/**
 * Validates `options` of schedule `name` and fills in defaults. Throws `ValidationError` naming
 * the offending field (`cron`, `timezone`, `every`, `repeat`, `shards`, …) for invalid input,
 * unknown options, no trigger or more than one trigger.
 *
 * @example
 * validateScheduleOptions('report', { cron: '0 3 * * *', timezone: 'Europe/Berlin' });
 * validateScheduleOptions('bad', { cron: '61 * * * *' }); // throws ValidationError (field "cron")
 */
export function validateScheduleOptions(
  name: string,
  options: ScheduleOptions,
): NormalizedScheduleOptions {
  validateScheduleName(name);
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ValidationError(
      'options',
      `schedule ${JSON.stringify(name)} needs an options object`,
    );
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(key)) {
      throw new ValidationError(
        key,
        `unknown schedule option (known: ${[...KNOWN_OPTIONS].join(', ')})`,
      );
    }
  }
  const o = options as Record<string, unknown>;
  const triggers = (['cron', 'every', 'repeat'] as const).filter((k) => o[k] !== undefined);
  if (triggers.length === 0) {
    throw new ValidationError(
      'cron',
      `schedule ${JSON.stringify(name)} needs one trigger: cron, every or repeat`,
    );
  }
  if (triggers.length > 1) {
    throw new ValidationError(
      triggers[1] as string,
      `schedule ${JSON.stringify(name)} has more than one trigger (${triggers.join(' and ')}); give exactly one of cron, every, repeat`,
    );
  }

  const timezone = o.timezone === undefined ? 'UTC' : validateTimezone(o.timezone);
  let cron: string | null = null;
  let every: string | null = null;
  let repeat: string | null = null;
  if (o.cron !== undefined) cron = validateCron(o.cron, timezone);
  if (o.every !== undefined) {
    every = stringOption(o.every, 'every').trim().toUpperCase();
    assertSchedulableDuration(parseDuration(every, 'every'), 'every');
  }
  if (o.repeat !== undefined) {
    repeat = stringOption(o.repeat, 'repeat').trim();
    if (/^R-/i.test(repeat)) {
      throw new ValidationError(
        'repeat',
        `repetition count in ${JSON.stringify(repeat)} must not be negative`,
      );
    }
    const parsed = parseRepeat(repeat, 'repeat');
    if (parsed.repetitions === 0) {
      throw new ValidationError(
        'repeat',
        `${JSON.stringify(repeat)} repeats 0 times, so it would never fire; give R1 or more, or R/… for no end`,
      );
    }
    const start = parsed.start?.getTime();
    if (start !== undefined && (start < EARLIEST_DUE || start > LATEST_DUE)) {
      throw new ValidationError(
        'repeat',
        `the start of ${JSON.stringify(repeat)} must be between 1970-01-01 and 9999-12-31 (the times every store holds)`,
      );
    }
    assertSchedulableDuration(parsed.duration, 'repeat');
  }

  const type = assertText(o.type === undefined ? name : o.type, 'type');

  // Checked as a job's payload is: the jobs each occurrence creates must be storable.
  const payload = checkPayload(o.payload, MAX_SCHEDULE_PAYLOAD_BYTES);

  // As a job's: each occurrence job is one.
  const retries = o.retries === undefined ? null : intOption(o.retries, 'retries', 0, MAX_RETRIES);
  const priority =
    o.priority === undefined ? 0 : intOption(o.priority, 'priority', -1_000_000, 1_000_000);
  const queue = o.queue === undefined ? 'default' : assertText(o.queue, 'queue');
  const tenantId = o.tenantId === undefined ? null : assertText(o.tenantId, 'tenantId');

  let overlap: ScheduleOverlap = 'skip';
  if (o.overlap !== undefined) {
    if (o.overlap !== 'skip' && o.overlap !== 'coalesce' && o.overlap !== 'allow') {
      throw new ValidationError(
        'overlap',
        `must be "skip", "coalesce" or "allow", got ${JSON.stringify(o.overlap)}`,
      );
    }
    overlap = o.overlap;
  }
  const catchUp = o.catchUp === undefined ? 0 : intOption(o.catchUp, 'catchUp', 0, MAX_CATCH_UP);
  const shards = o.shards === undefined ? 1 : intOption(o.shards, 'shards', 1, MAX_SHARDS);

  return {
    cron,
    timezone,
    every,
    repeat,
    type,
    payload,
    retries,
    priority,
    queue,
    tenantId,
    overlap,
    catchUp,
    shards,
  };
}

/** Checks an IANA time zone name (`Europe/Berlin`, `UTC`). */
export function validateTimezone(value: unknown, field = 'timezone'): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ValidationError(
      field,
      `expected an IANA time zone like "Europe/Berlin", got ${JSON.stringify(value)}`,
    );
  }
  if (!IANAZone.isValidZone(value)) {
    throw new ValidationError(
      field,
      `unknown time zone ${JSON.stringify(value)} (expected an IANA name like "Europe/Berlin")`,
    );
  }
  return value;
}

function validateCron(value: unknown, timezone: string): string {
  const pattern = stringOption(value, 'cron').trim().replace(/\s+/g, ' ');
  let cron: Cron;
  try {
    cron = new Cron(pattern, { paused: true, timezone, mode: '5-or-6-parts' });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ValidationError(
      'cron',
      `${JSON.stringify(value)} is not a valid cron expression (5 fields, or 6 with seconds first): ${reason}`,
      { cause: error },
    );
  }
  // A pattern that parses but can never match (`0 0 31 2 *`) would silently never fire.
  if (cron.nextRun(new Date(Date.UTC(2000, 0, 1))) === null) {
    throw new ValidationError('cron', `${JSON.stringify(value)} never matches a date`);
  }
  return pattern;
}

/**
 * Calendar units (years, months, weeks, days) are added on the calendar, so they must be whole;
 * fractions belong in the time part (`PT12H`, not `P0.5D`).
 */
function assertSchedulableDuration(d: IsoDuration, field: string): void {
  for (const unit of ['years', 'months', 'weeks', 'days'] as const) {
    if (!Number.isInteger(d[unit])) {
      throw new ValidationError(
        field,
        `${unit} must be whole numbers in a schedule (use hours for fractions of a day)`,
      );
    }
  }
  const timeMs = ((d.hours * 60 + d.minutes) * 60 + d.seconds) * 1000;
  const calendar = d.years + d.months + d.weeks + d.days > 0;
  if (!calendar && timeMs < 1000) {
    throw new ValidationError(field, 'a schedule interval must be at least one second');
  }
  // Each next occurrence is stored as a time, and no store holds one after 9999-12-31
  // (PostgreSQL's and MySQL's time columns as the stores write them): an interval of
  // millennia would be saved by some stores and fail in others. A century is the longest
  // delay an enqueue takes too (`delayMs`).
  if (durationToMs(d) > MAX_DELAY_MS) {
    throw new ValidationError(field, 'a schedule interval must be at most a century (P100Y)');
  }
}

function stringOption(value: unknown, field: string): string {
  if (typeof value !== 'string') {
    throw new ValidationError(
      field,
      `expected a string, got ${value === null ? 'null' : typeof value}`,
    );
  }
  return value;
}

function intOption(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(
      field,
      `must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}
