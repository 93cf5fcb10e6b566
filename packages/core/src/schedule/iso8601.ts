/**
 * ISO-8601 durations (`PT10M`, `P1DT2H`) and repeating intervals (`R5/PT10M`, `R/PT1H`,
 * `R3/2026-01-01T00:00:00Z/PT1H`), as Flowable's `failedJobRetryTimeCycle` and timer cycles use.
 */
import { ValidationError } from '../errors.js';

export interface IsoDuration {
  years: number;
  months: number;
  weeks: number;
  days: number;
  hours: number;
  minutes: number;
  seconds: number;
}

export interface IsoRepeat {
  /** Number of repetitions; null for unbounded (`R/…`). */
  repetitions: number | null;
  /** Optional start of the first interval. */
  start: Date | null;
  duration: IsoDuration;
}

const DURATION =
  /^P(?!$)(?:(\d+(?:[.,]\d+)?)Y)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)W)?(?:(\d+(?:[.,]\d+)?)D)?(?:T(?=\d)(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/;

function num(part: string | undefined): number {
  return part === undefined ? 0 : Number(part.replace(',', '.'));
}

/** Parses `PnYnMnWnDTnHnMnS`. Throws `ValidationError` naming `field` on anything else. */
export function parseDuration(text: string, field = 'duration'): IsoDuration {
  if (typeof text !== 'string') {
    throw new ValidationError(
      field,
      `expected an ISO-8601 duration like "PT10M", got ${typeof text}`,
    );
  }
  const m = DURATION.exec(text.trim().toUpperCase());
  if (!m) {
    throw new ValidationError(
      field,
      `${JSON.stringify(text)} is not an ISO-8601 duration (expected e.g. "PT10M", "P1DT2H", "PT0.5S")`,
    );
  }
  const d: IsoDuration = {
    years: num(m[1]),
    months: num(m[2]),
    weeks: num(m[3]),
    days: num(m[4]),
    hours: num(m[5]),
    minutes: num(m[6]),
    seconds: num(m[7]),
  };
  if (durationToMs(d) <= 0) {
    throw new ValidationError(
      field,
      `${JSON.stringify(text)} is a zero duration; it must be positive`,
    );
  }
  return d;
}

/**
 * The length of a duration in ms, taking a day as 24 h, a month as 30 days and a year as 365
 * days. Exact for `PT…` durations; calendar-aware arithmetic is `addDuration` in schedules.
 */
export function durationToMs(d: IsoDuration): number {
  const days = d.years * 365 + d.months * 30 + d.weeks * 7 + d.days;
  return Math.round(((days * 24 + d.hours) * 60 + d.minutes) * 60_000 + d.seconds * 1000);
}

/** Parses `Rn/duration`, `R/duration` or `Rn/start/duration`. */
export function parseRepeat(text: string, field = 'repeat'): IsoRepeat {
  if (typeof text !== 'string') {
    throw new ValidationError(
      field,
      `expected an ISO-8601 repeating interval like "R5/PT10M", got ${typeof text}`,
    );
  }
  const parts = text.trim().split('/');
  const head = parts[0] ?? '';
  const rm = /^R(\d*)$/i.exec(head);
  if (!rm || parts.length < 2 || parts.length > 3) {
    throw new ValidationError(
      field,
      `${JSON.stringify(text)} is not an ISO-8601 repeating interval (expected "R5/PT10M", "R/PT1H" or "R3/2026-01-01T00:00:00Z/PT1H")`,
    );
  }
  const repetitions = rm[1] === '' ? null : Number(rm[1]);
  if (repetitions !== null && (!Number.isSafeInteger(repetitions) || repetitions < 0)) {
    throw new ValidationError(
      field,
      `repetition count in ${JSON.stringify(text)} must be a whole number ≥ 0`,
    );
  }
  let start: Date | null = null;
  if (parts.length === 3) {
    start = new Date(parts[1] as string);
    if (Number.isNaN(start.getTime())) {
      throw new ValidationError(
        field,
        `start ${JSON.stringify(parts[1])} in ${JSON.stringify(text)} is not an ISO-8601 date-time`,
      );
    }
  }
  const duration = parseDuration(parts[parts.length - 1] as string, field);
  return { repetitions, start, duration };
}
