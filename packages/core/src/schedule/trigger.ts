/**
 * Triggers: when a schedule's occurrences are. Cron is croner's (seconds, time zones, DST);
 * ISO-8601 `every` / `repeat` are `anchor + k × duration`, the calendar part added by luxon in
 * the schedule's time zone. Occurrence k is computed from the anchor, never by adding to the
 * previous one, so month ends do not drift (Jan 31 + P1M + P1M is Mar 31, not Mar 28).
 */
import { Cron } from 'croner';
import { DateTime } from 'luxon';
import { LATEST_DUE } from '../engine/validate.js';
import { durationToMs, type IsoDuration, parseDuration, parseRepeat } from './iso8601.js';
import type { NormalizedScheduleOptions } from './options.js';

/** The occurrences of a schedule, as instants in ms since the epoch. */
export interface Trigger {
  /** The first occurrence at or after `t`, or null when there is none. */
  atOrAfter(t: number): number | null;
  /** The first occurrence strictly after `t`, or null. */
  after(t: number): number | null;
  /** The last occurrence at or before `t`, or null. */
  atOrBefore(t: number): number | null;
}

/**
 * Builds the trigger of validated options. `anchor` (ms) is when the schedule was defined: the
 * origin of `every` and of `repeat` without a start. Occurrences after 9999-12-31 are none: no
 * store holds such a time (see `LATEST_DUE`), so a schedule ends there on every store alike.
 */
export function createTrigger(options: NormalizedScheduleOptions, anchor: number): Trigger {
  const trigger = unboundedTrigger(options, anchor);
  const storable = (t: number | null): number | null => (t !== null && t > LATEST_DUE ? null : t);
  return {
    after: (t) => storable(trigger.after(t)),
    atOrAfter: (t) => storable(trigger.atOrAfter(t)),
    atOrBefore: (t) => trigger.atOrBefore(Math.min(t, LATEST_DUE)),
  };
}

function unboundedTrigger(options: NormalizedScheduleOptions, anchor: number): Trigger {
  if (options.cron !== null) return new CronTrigger(options.cron, options.timezone);
  if (options.every !== null) {
    return new IntervalTrigger(
      parseDuration(options.every, 'every'),
      options.timezone,
      anchor,
      1,
      null,
    );
  }
  if (options.repeat !== null) {
    const repeat = parseRepeat(options.repeat, 'repeat');
    // Without a start the first fire is one interval after definition (Flowable's timer cycle);
    // with a start it is the start itself.
    const first = repeat.start === null ? 1 : 0;
    const origin = repeat.start === null ? anchor : repeat.start.getTime();
    const last = repeat.repetitions === null ? null : first + repeat.repetitions - 1;
    return new IntervalTrigger(repeat.duration, options.timezone, origin, first, last);
  }
  throw new TypeError('schedule options have no trigger');
}

class CronTrigger implements Trigger {
  private readonly cron: Cron;

  constructor(pattern: string, timezone: string) {
    this.cron = new Cron(pattern, { paused: true, timezone, mode: '5-or-6-parts' });
  }

  after(t: number): number | null {
    return this.cron.nextRun(new Date(t))?.getTime() ?? null;
  }

  atOrAfter(t: number): number | null {
    return this.after(t - 1);
  }

  atOrBefore(t: number): number | null {
    // croner's previousRuns is strictly before its reference.
    return this.cron.previousRuns(1, new Date(t + 1))[0]?.getTime() ?? null;
  }
}

class IntervalTrigger implements Trigger {
  private readonly timeMs: number;
  private readonly calendar: boolean;
  private readonly approxMs: number;

  constructor(
    private readonly duration: IsoDuration,
    private readonly zone: string,
    private readonly origin: number,
    private readonly first: number,
    /** Index of the last occurrence; null for unbounded. */
    private readonly last: number | null,
  ) {
    const d = duration;
    this.timeMs = Math.round(((d.hours * 60 + d.minutes) * 60 + d.seconds) * 1000);
    this.calendar = d.years + d.months + d.weeks + d.days > 0;
    this.approxMs = durationToMs(d);
  }

  /** Occurrence number k. */
  private at(k: number): number {
    if (!this.calendar) return this.origin + k * this.timeMs;
    const d = this.duration;
    return DateTime.fromMillis(this.origin, { zone: this.zone })
      .plus({ years: d.years * k, months: d.months * k, weeks: d.weeks * k, days: d.days * k })
      .plus({ milliseconds: this.timeMs * k })
      .toMillis();
  }

  /** The smallest k ≥ first with at(k) > t (may be past `last`). */
  private indexAfter(t: number): number {
    let k = Math.max(this.first, Math.floor((t - this.origin) / this.approxMs));
    // The estimate is exact for fixed durations and off by a few steps for calendar ones.
    while (k > this.first && this.at(k - 1) > t) k -= 1;
    while (this.at(k) <= t) k += 1;
    return k;
  }

  private valid(k: number): number | null {
    return this.last !== null && k > this.last ? null : this.at(k);
  }

  after(t: number): number | null {
    return this.valid(this.indexAfter(t));
  }

  atOrAfter(t: number): number | null {
    return this.after(t - 1);
  }

  atOrBefore(t: number): number | null {
    let k = this.indexAfter(t) - 1;
    if (k < this.first) return null;
    if (this.last !== null && k > this.last) k = this.last;
    return this.at(k);
  }
}

/**
 * The occurrences of `trigger` in `[from, to]`, at most the latest `max` of them, oldest first.
 * Walks forward a bounded number of steps, then jumps back from `to`, so a year of downtime on a
 * one-second schedule costs the same as a minute.
 */
export function latestOccurrences(
  trigger: Trigger,
  from: number,
  to: number,
  max: number,
): number[] {
  const out: number[] = [];
  let t = trigger.atOrAfter(from);
  let steps = 0;
  while (t !== null && t <= to && steps < max * 2 + 16) {
    out.push(t);
    if (out.length > max) out.shift();
    t = trigger.after(t);
    steps += 1;
  }
  if (t === null || t > to) return out;
  // Too many to walk: collect the latest `max` backwards from `to`.
  const back: number[] = [];
  let b = trigger.atOrBefore(to);
  while (b !== null && b >= from && back.length < max) {
    back.unshift(b);
    b = trigger.atOrBefore(b - 1);
  }
  return back;
}
