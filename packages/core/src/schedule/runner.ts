/**
 * The engine side of schedules: defines them in the store and fires due occurrences.
 *
 * Exactly once per occurrence: a fire reads the schedule's `version`, and `store.fireSchedule`
 * inserts the occurrence's jobs and moves the schedule to its next occurrence in one transaction
 * only if the version is unchanged. Of several runners (nodes) racing to fire an occurrence, one
 * wins; the others get `conflict`, re-read and move on. Each job also carries the key
 * `sched:<name>@<occurrence ISO>#<shard>`, so an unfinished occurrence job is never duplicated.
 * `define` compare-and-sets on the same version, so a redefinition never moves `nextAt` back
 * over an occurrence another node has just fired.
 *
 * Occurrences come from the store's clock, as due comparisons do: a pass reads `store.now()`
 * once it found due schedules and fires the occurrences due by then, and the fire carries its
 * latest occurrence (`ScheduleFire.dueAt`) for the store to check on its clock. So a node
 * whose clock is wrong, or was stepped, neither fires early nor skips occurrences.
 */
import { type Clock, systemClock } from '../clock.js';
import type { EngineEventName, EngineEvents, Logger } from '../engine/types.js';
import { NotFoundError, StoreError, ValidationError } from '../errors.js';
import { silentLogger } from '../logger.js';
import { DEFAULT_RETRIES } from '../retry.js';
import type { JobStore, NewJob, ScheduleFireStatus, ScheduleRecord } from '../store.js';
import {
  type NormalizedScheduleOptions,
  type ScheduleOptions,
  validateScheduleName,
  validateScheduleOptions,
} from './options.js';
import { createTrigger, latestOccurrences } from './trigger.js';

/** A schedule as `list()` and `define()` report it. */
export interface ScheduleInfo {
  name: string;
  /** The validated options, defaults filled in. */
  options: NormalizedScheduleOptions;
  /** Next fire time; null when the schedule has no more occurrences (`R5/…` done). */
  nextAt: Date | null;
  paused: boolean;
  /** An overlapping fire was coalesced; it runs once the previous occurrence finishes. */
  pendingMisfire: boolean;
  /** Occurrences that created jobs since the trigger was last changed. */
  fired: number;
  /** Fires dropped by overlap `skip`. */
  skipped: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface ScheduleRunnerOptions {
  store: JobStore;
  /**
   * Clock kept in step with the store's (the engine's), for when to look again (backoff, the
   * next wake-up). Occurrences are decided on the store's own clock. Default: the machine's.
   */
  clock?: Clock;
  logger?: Logger;
  /** Receives `schedule-fired` (one per occurrence fired, skipped or coalesced) and `error`. */
  emit?: <K extends EngineEventName>(event: K, payload: EngineEvents[K]) => void;
  /** Retries of an occurrence job when the schedule sets none. Default: 3 for every type. */
  defaultRetries?: (type: string) => number;
  /**
   * How soon `fireDue()` asks to be called again while a coalesced fire waits for the previous
   * occurrence to finish (the engine should also call `fireDue()` when a schedule's job ends).
   * Default 1000 ms.
   */
  misfirePollMs?: number;
  /** Schedules read per `dueSchedules` call. Default 100. */
  batchSize?: number;
}

/** What the store keeps as a schedule's `spec`. */
interface StoredSpec {
  v: 1;
  options: NormalizedScheduleOptions;
  /** When the trigger was defined (ISO): the origin of `every` and of `repeat` without a start. */
  anchor: string;
}

const UNFINISHED = ['timer', 'async', 'blocked', 'running'] as const;
const MAX_PASSES = 5;
/** Backoff of a schedule whose fire failed: from 1 s, doubling, at most a minute. */
const FAILED_FIRE_BACKOFF_MS = { first: 1_000, max: 60_000 };
/** Read–compute–save rounds of `define` before it gives up on a schedule others keep changing. */
const MAX_DEFINE_ATTEMPTS = 10;

/**
 * Defines, lists and fires schedules. The engine owns one and calls `fireDue()` when the time it
 * returned has come, and after a schedule's job finished (so a coalesced fire runs right away).
 *
 * @example
 * const runner = new ScheduleRunner({ store, clock });
 * await runner.define('nightly-report', { cron: '0 3 * * *', timezone: 'Europe/Berlin' });
 * const wakeAt = await runner.fireDue(); // fires what is due; the earliest next fire time
 */
export class ScheduleRunner {
  private readonly store: JobStore;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly emit: NonNullable<ScheduleRunnerOptions['emit']>;
  private readonly defaultRetries: (type: string) => number;
  private readonly misfirePollMs: number;
  private readonly batchSize: number;
  private inFlight: Promise<Date | null> | null = null;
  /** Schedules whose last fire failed: when to try again, and how many failures in a row. */
  private readonly failing = new Map<string, { retryAt: number; failures: number }>();
  private again = false;

  constructor(options: ScheduleRunnerOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? silentLogger;
    this.emit = options.emit ?? (() => {});
    this.defaultRetries = options.defaultRetries ?? (() => DEFAULT_RETRIES);
    this.misfirePollMs = options.misfirePollMs ?? 1000;
    this.batchSize = options.batchSize ?? 100;
  }

  /**
   * Creates schedule `name` or updates it in place. Idempotent: the same options again (from
   * any node) change nothing. Changed options that keep the trigger (payload, shards, overlap…)
   * keep the next fire time and the counters; a changed trigger (cron, timezone, every, repeat)
   * starts over from now. The save is a compare-and-set on the version read, so a fire on
   * another node in between is never undone; the definition is then worked out again. Throws a
   * `StoreError` if other nodes keep changing the schedule through 10 attempts.
   */
  async define(name: string, options: ScheduleOptions): Promise<ScheduleInfo> {
    const normalized = validateScheduleOptions(name, options);
    for (let attempt = 1; attempt <= MAX_DEFINE_ATTEMPTS; attempt += 1) {
      const existing = await this.store.getSchedule(name);
      const previous = existing ? readSpec(existing) : null;
      if (existing && previous && canonicalJson(previous.options) === canonicalJson(normalized)) {
        return toInfo(existing, previous);
      }
      let spec: StoredSpec;
      let nextAt: Date | null;
      let resetProgress: boolean;
      if (existing && previous && triggerKey(previous.options) === triggerKey(normalized)) {
        spec = { v: 1, options: normalized, anchor: previous.anchor };
        nextAt = existing.nextAt;
        resetProgress = false;
      } else {
        const now = (await this.store.now()).getTime();
        spec = { v: 1, options: normalized, anchor: new Date(now).toISOString() };
        const trigger = createTrigger(normalized, now);
        // A cron match at this very instant belongs to the past; a repeat starting now fires now.
        const first = normalized.cron !== null ? trigger.after(now) : trigger.atOrAfter(now);
        nextAt = first === null ? null : new Date(first);
        resetProgress = true;
      }
      // Compare-and-set on the version read: if another node fired or redefined the schedule
      // since, writing this `nextAt` would undo its fire (the occurrence would fire again), so
      // nothing is written and the definition is worked out again from a fresh read.
      const record = await this.store.saveSchedule({
        name,
        spec,
        nextAt,
        resetProgress,
        expectedVersion: existing?.version ?? null,
      });
      if (record === null) {
        this.logger.debug('schedule changed while being defined; reading it again', {
          schedule: name,
          attempt,
        });
        continue;
      }
      this.changed();
      this.logger.debug('schedule defined', {
        schedule: name,
        nextAt: record.nextAt?.toISOString() ?? null,
      });
      return toInfo(record, spec);
    }
    throw new StoreError(
      `[@jobs/core] schedule ${JSON.stringify(name)}: define gave up after ${MAX_DEFINE_ATTEMPTS} attempts; other nodes kept changing it between read and save`,
    );
  }

  /** Deletes the schedule; jobs it already created stay. False when there was none. */
  async remove(name: string): Promise<boolean> {
    validateScheduleName(name);
    return this.store.deleteSchedule(name);
  }

  /** Stops firing until `resume`. Throws `NotFoundError` for an unknown schedule. */
  async pause(name: string): Promise<ScheduleInfo> {
    return this.setPaused(name, true);
  }

  /**
   * Fires again. Occurrences missed while paused count as missed: one run by default, or the
   * latest `catchUp` of them.
   */
  async resume(name: string): Promise<ScheduleInfo> {
    return this.setPaused(name, false);
  }

  /** One schedule, or null. */
  async get(name: string): Promise<ScheduleInfo | null> {
    validateScheduleName(name);
    const record = await this.store.getSchedule(name);
    if (!record) return null;
    const spec = readSpec(record);
    if (!spec)
      throw new ValidationError(
        'spec',
        `stored spec of schedule ${JSON.stringify(name)} is unreadable`,
      );
    return toInfo(record, spec);
  }

  /** All schedules by name, with their next fire times. */
  async list(): Promise<ScheduleInfo[]> {
    const out: ScheduleInfo[] = [];
    for (const record of await this.store.listSchedules()) {
      const spec = readSpec(record);
      if (spec) out.push(toInfo(record, spec));
      else this.logger.warn('schedule has an unreadable spec; left out', { schedule: record.name });
    }
    return out;
  }

  /**
   * Fires every due schedule once: the due occurrence (missed ones coalesced, or the latest
   * `catchUp` of them), and coalesced fires whose previous occurrence has finished. Returns
   * when it should be called next: the earliest next fire time, sooner while a coalesced fire
   * waits; null when no schedule will fire. Concurrent calls share one run.
   */
  fireDue(): Promise<Date | null> {
    if (this.inFlight) {
      this.again = true;
      return this.inFlight;
    }
    const run = async (): Promise<Date | null> => {
      try {
        let wake: Date | null;
        do {
          this.again = false;
          wake = await this.fireDueOnce();
        } while (this.again);
        return wake;
      } finally {
        this.inFlight = null;
      }
    };
    this.inFlight = run();
    return this.inFlight;
  }

  /**
   * A schedule changed here: a `fireDue` in flight may have read the schedules before, so it
   * runs once more and its answer (the next wake-up) includes the change.
   */
  private changed(): void {
    if (this.inFlight) this.again = true;
  }

  private async fireDueOnce(): Promise<Date | null> {
    for (let pass = 0; pass < MAX_PASSES; pass += 1) {
      const due = await this.store.dueSchedules(this.batchSize);
      if (due.length === 0) break;
      // Read after the due schedules: what is due by this time is due when each fire lands.
      const storeNow = (await this.store.now()).getTime();
      let conflicts = 0;
      let progressed = 0;
      for (const record of due) {
        const status = await this.fireIsolated(record, storeNow);
        if (status === 'conflict') conflicts += 1;
        else if (status !== 'waiting' && status !== 'invalid' && status !== 'failed') {
          progressed += 1;
        }
      }
      // Another pass only when someone else moved a schedule under us, or the batch was full.
      if (conflicts === 0 && (due.length < this.batchSize || progressed === 0)) break;
    }
    return this.nextWake();
  }

  /**
   * Fires one schedule; a schedule that cannot fire (its jobs do not fit the store, the store
   * refuses a write) is reported and retried with backoff, and never stops the others
   * (invariant 17). A failure of the store as a whole fails every schedule the same way.
   */
  private async fireIsolated(
    record: ScheduleRecord,
    storeNow: number,
  ): Promise<ScheduleFireStatus | 'waiting' | 'invalid' | 'failed'> {
    const failing = this.failing.get(record.name);
    if (failing && failing.retryAt > this.clock.now()) return 'waiting';
    try {
      const status = await this.fireOne(record, storeNow);
      if (failing) {
        this.failing.delete(record.name);
        this.logger.info('schedule fires again', { schedule: record.name });
      }
      return status;
    } catch (error) {
      const failures = (failing?.failures ?? 0) + 1;
      const backoff = Math.min(
        FAILED_FIRE_BACKOFF_MS.max,
        FAILED_FIRE_BACKOFF_MS.first * 2 ** Math.min(failures - 1, 16),
      );
      this.failing.set(record.name, { retryAt: this.clock.now() + backoff, failures });
      if (failures === 1) {
        this.logger.warn('schedule could not fire; the others go on', {
          schedule: record.name,
          error,
        });
      }
      this.emit('error', { error, during: `schedule ${record.name}` });
      return 'failed';
    }
  }

  /** The earliest time a schedule needs attention. */
  private async nextWake(): Promise<Date | null> {
    let earliest: number | null = null;
    const now = this.clock.now();
    for (const record of await this.store.listSchedules()) {
      // An unreadable schedule is never fired, so it must not make the engine spin on it.
      if (record.paused || readSpec(record) === null) continue;
      let t = record.nextAt?.getTime() ?? null;
      if (record.pendingMisfire)
        t = Math.min(t ?? Number.POSITIVE_INFINITY, now + this.misfirePollMs);
      // A schedule that failed to fire is looked at again after its backoff, not at once.
      const failing = this.failing.get(record.name);
      if (failing && t !== null) t = Math.max(t, failing.retryAt);
      if (t !== null && (earliest === null || t < earliest)) earliest = t;
    }
    return earliest === null ? null : new Date(earliest);
  }

  /** Fires `record`'s due occurrence(s), as of `storeNow` on the store's clock. */
  private async fireOne(
    record: ScheduleRecord,
    storeNow: number,
  ): Promise<ScheduleFireStatus | 'waiting' | 'invalid'> {
    const spec = readSpec(record);
    if (!spec) {
      const error = new ValidationError(
        'spec',
        `stored spec of schedule ${JSON.stringify(record.name)} is unreadable`,
      );
      this.logger.error('schedule skipped: unreadable spec', { schedule: record.name });
      this.emit('error', { error, during: `schedule ${record.name}` });
      return 'invalid';
    }
    const { options } = spec;
    const trigger = createTrigger(options, Date.parse(spec.anchor));
    const nextAt = record.nextAt?.getTime() ?? null;
    // dueSchedules compared on the store's clock a moment before `storeNow` was read.
    const dueByTime = nextAt !== null && (nextAt <= storeNow || !record.pendingMisfire);
    if (dueByTime && nextAt !== null) {
      const now = Math.max(storeNow, nextAt);
      let occurrences = latestOccurrences(trigger, nextAt, now, Math.max(1, options.catchUp));
      if (occurrences.length === 0) occurrences = [nextAt];
      const following = trigger.after(now);
      return this.fire(
        record,
        options,
        occurrences,
        following === null ? null : new Date(following),
      );
    }
    // A coalesced fire: run the occurrence it stands for once the previous one has finished.
    const occurrence = trigger.atOrBefore(nextAt === null ? storeNow : nextAt - 1);
    if (occurrence === null) return 'waiting';
    if (options.overlap !== 'allow' && (await this.busy(record.name))) return 'waiting';
    return this.fire(record, options, [occurrence], record.nextAt);
  }

  private async busy(name: string): Promise<boolean> {
    const unfinished = await this.store.listJobs({
      schedule: name,
      state: UNFINISHED,
      limit: 1,
      offset: 0,
    });
    return unfinished.length > 0;
  }

  private async fire(
    record: ScheduleRecord,
    options: NormalizedScheduleOptions,
    occurrences: number[],
    nextAt: Date | null,
  ): Promise<ScheduleFireStatus> {
    const jobs = occurrences.flatMap((o) => this.occurrenceJobs(record.name, options, new Date(o)));
    const latest = new Date(occurrences[occurrences.length - 1] as number);
    const result = await this.store.fireSchedule({
      name: record.name,
      version: record.version,
      nextAt,
      overlap: options.overlap,
      jobs,
      occurrences: occurrences.length,
      dueAt: latest,
    });
    if (result.status === 'conflict') {
      this.logger.debug('schedule fire lost a race; another node fired it', {
        schedule: record.name,
      });
      return result.status;
    }
    if (result.status === 'fired') {
      for (const o of occurrences) {
        const occurrence = new Date(o);
        const own = result.jobs.filter((j) => j.occurrence?.getTime() === o);
        this.emit('schedule-fired', {
          schedule: record.name,
          occurrence,
          status: 'fired',
          jobs: own,
        });
      }
    } else {
      this.emit('schedule-fired', {
        schedule: record.name,
        occurrence: latest,
        status: result.status,
        jobs: [],
      });
    }
    this.logger.debug('schedule fire', {
      schedule: record.name,
      status: result.status,
      occurrence: latest.toISOString(),
      nextAt: nextAt?.toISOString() ?? null,
    });
    return result.status;
  }

  /** The jobs of one occurrence: one per shard. */
  private occurrenceJobs(
    name: string,
    options: NormalizedScheduleOptions,
    occurrence: Date,
  ): NewJob[] {
    const jobs: NewJob[] = [];
    const sharded = options.shards > 1;
    for (let i = 0; i < options.shards; i += 1) {
      jobs.push({
        type: options.type,
        payload: options.payload,
        dueAt: null,
        delayMs: 0,
        priority: options.priority,
        retries: options.retries ?? this.defaultRetries(options.type),
        // Shard i never runs twice at once; without shards, exclusivity keeps catch-up runs in
        // order and one at a time unless overlap is 'allow'.
        scope: `${name}#${i}`,
        exclusive: sharded || options.overlap !== 'allow',
        key: occurrenceKey(name, occurrence, i),
        tenantId: options.tenantId,
        queue: options.queue,
        retryPolicy: null,
        schedule: name,
        occurrence,
        shard: sharded ? { index: i, count: options.shards } : null,
      });
    }
    return jobs;
  }

  private async setPaused(name: string, paused: boolean): Promise<ScheduleInfo> {
    validateScheduleName(name);
    const record = await this.store.setSchedulePaused(name, paused);
    if (!record) throw new NotFoundError(`schedule ${JSON.stringify(name)} does not exist`);
    this.changed();
    const spec = readSpec(record);
    if (!spec)
      throw new ValidationError(
        'spec',
        `stored spec of schedule ${JSON.stringify(name)} is unreadable`,
      );
    return toInfo(record, spec);
  }
}

/** The unique key of shard `shard` of an occurrence: `sched:<name>@<occurrence ISO>#<shard>`. */
export function occurrenceKey(name: string, occurrence: Date, shard: number): string {
  return `sched:${name}@${occurrence.toISOString()}#${shard}`;
}

function toInfo(record: ScheduleRecord, spec: StoredSpec): ScheduleInfo {
  return {
    name: record.name,
    options: spec.options,
    nextAt: record.nextAt,
    paused: record.paused,
    pendingMisfire: record.pendingMisfire,
    fired: record.fired,
    skipped: record.skipped,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}

/** Reads and re-validates a stored spec; null when it is not one this version understands. */
function readSpec(record: ScheduleRecord): StoredSpec | null {
  const raw = record.spec as Partial<StoredSpec> | null;
  if (!raw || typeof raw !== 'object' || raw.v !== 1 || typeof raw.anchor !== 'string') return null;
  if (Number.isNaN(Date.parse(raw.anchor)) || !raw.options || typeof raw.options !== 'object')
    return null;
  const given: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw.options)) {
    if (value !== null) given[key] = value;
  }
  try {
    return {
      v: 1,
      options: validateScheduleOptions(record.name, given as ScheduleOptions),
      anchor: raw.anchor,
    };
  } catch {
    // Written by an incompatible version: reported by the caller, never fired blindly.
    return null;
  }
}

/** What decides the occurrences: changing it starts the schedule over. */
function triggerKey(o: NormalizedScheduleOptions): string {
  return JSON.stringify([o.cron, o.every, o.repeat, o.timezone]);
}

/** JSON with sorted object keys, so stores that reorder keys (jsonb) compare equal. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      return Object.fromEntries(
        Object.entries(v as Record<string, unknown>).sort(([a], [b]) =>
          a < b ? -1 : a > b ? 1 : 0,
        ),
      );
    }
    return v;
  });
}
