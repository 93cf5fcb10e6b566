import { describe, expect, it } from 'vitest';
import { FakeClock } from '../src/clock.js';
import { ValidationError } from '../src/errors.js';
import { MemoryJobStore } from '../src/memory-store.js';
import {
  type ScheduleOptions,
  ScheduleRunner,
  validateScheduleOptions,
} from '../src/schedule/index.js';
import { createTrigger } from '../src/schedule/trigger.js';

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).field;
  }
  throw new Error('expected a ValidationError');
}

const bad = (options: Record<string, unknown>, name = 'sched') =>
  fieldOf(() => validateScheduleOptions(name, options as ScheduleOptions));

describe('validateScheduleOptions', () => {
  it('fills in defaults: type is the name, overlap skip, one shard, no catch-up, UTC', () => {
    expect(validateScheduleOptions('report', { cron: '0  3 * * *' })).toEqual({
      cron: '0 3 * * *',
      timezone: 'UTC',
      every: null,
      repeat: null,
      type: 'report',
      payload: null,
      retries: null,
      priority: 0,
      queue: 'default',
      tenantId: null,
      overlap: 'skip',
      catchUp: 0,
      shards: 1,
    });
  });

  it('accepts 5- and 6-field cron, nicknames, every and repeat', () => {
    expect(validateScheduleOptions('a', { cron: '*/5 * * * * *' }).cron).toBe('*/5 * * * * *');
    expect(
      validateScheduleOptions('a', { cron: '@daily', timezone: 'Europe/Berlin' }).timezone,
    ).toBe('Europe/Berlin');
    expect(validateScheduleOptions('a', { every: 'pt10m' }).every).toBe('PT10M');
    expect(validateScheduleOptions('a', { repeat: 'R5/PT10M' }).repeat).toBe('R5/PT10M');
    expect(validateScheduleOptions('a', { repeat: 'R/P1D' }).repeat).toBe('R/P1D');
    expect(validateScheduleOptions('a', { repeat: 'R3/2026-01-01T00:00:00Z/PT1H' }).repeat).toBe(
      'R3/2026-01-01T00:00:00Z/PT1H',
    );
  });

  it('rejects an invalid cron naming the field "cron"', () => {
    expect(bad({ cron: '61 * * * *' })).toBe('cron');
    expect(bad({ cron: 'every day' })).toBe('cron');
    expect(bad({ cron: '* * * * * * *' })).toBe('cron');
    expect(bad({ cron: '0 0 31 2 *' })).toBe('cron');
    expect(bad({ cron: 5 })).toBe('cron');
  });

  it('rejects an unknown time zone naming "timezone"', () => {
    expect(bad({ cron: '0 3 * * *', timezone: 'Mars/Olympus' })).toBe('timezone');
    expect(bad({ every: 'PT1M', timezone: '' })).toBe('timezone');
  });

  it('rejects bad durations and repeats naming the field', () => {
    expect(bad({ every: '10 minutes' })).toBe('every');
    expect(bad({ every: 'PT0S' })).toBe('every');
    expect(bad({ every: 'PT0.5S' })).toBe('every');
    expect(bad({ every: 'P0.5D' })).toBe('every');
    expect(bad({ repeat: 'R-1/PT10M' })).toBe('repeat');
    expect(bad({ repeat: 'R5' })).toBe('repeat');
    expect(bad({ repeat: 'R5/PT' })).toBe('repeat');
    expect(bad({ repeat: 'R2/yesterday/PT1H' })).toBe('repeat');
  });

  it('rejects no trigger, and more than one trigger', () => {
    expect(bad({ type: 'x' })).toBe('cron');
    expect(bad({ cron: '* * * * *', every: 'PT1M' })).toBe('every');
    expect(bad({ every: 'PT1M', repeat: 'R/PT1M' })).toBe('repeat');
  });

  it('rejects unknown options naming them', () => {
    expect(bad({ cron: '* * * * *', sharding: 3 })).toBe('sharding');
    expect(bad({ cron: '* * * * *', runAt: new Date() })).toBe('runAt');
  });

  it('rejects bad shards, catchUp, overlap, retries, priority, type, payload and name', () => {
    expect(bad({ cron: '* * * * *', shards: 0 })).toBe('shards');
    expect(bad({ cron: '* * * * *', shards: 1.5 })).toBe('shards');
    expect(bad({ cron: '* * * * *', shards: 100_000 })).toBe('shards');
    expect(bad({ cron: '* * * * *', catchUp: -1 })).toBe('catchUp');
    expect(bad({ cron: '* * * * *', catchUp: '3' })).toBe('catchUp');
    expect(bad({ cron: '* * * * *', overlap: 'queue' })).toBe('overlap');
    expect(bad({ cron: '* * * * *', retries: -1 })).toBe('retries');
    expect(bad({ cron: '* * * * *', priority: 0.5 })).toBe('priority');
    expect(bad({ cron: '* * * * *', type: '' })).toBe('type');
    expect(bad({ cron: '* * * * *', payload: { n: 1n } })).toBe('payload.n');
    expect(bad({ cron: '* * * * *', payload: { s: new Set([1]) } })).toBe('payload.s');
    expect(bad({ cron: '* * * * *' }, '')).toBe('name');
    expect(bad({ cron: '* * * * *' }, 'x'.repeat(200))).toBe('name');
    expect(bad({ cron: '* * * * *' }, 'half \ud83d')).toBe('name');
  });

  it("bounds retries as a job's (0 to 1,000)", () => {
    expect(validateScheduleOptions('s', { every: 'PT1M', retries: 1000 }).retries).toBe(1000);
    expect(bad({ every: 'PT1M', retries: 1001 })).toBe('retries');
    expect(bad({ every: 'PT1M', retries: 1_000_000 })).toBe('retries');
  });

  it('refuses intervals longer than a century and starts outside 1970–9999: no store holds such a time', () => {
    expect(validateScheduleOptions('s', { every: 'P100Y' }).every).toBe('P100Y');
    expect(validateScheduleOptions('s', { every: 'P36500D' }).every).toBe('P36500D');
    for (const every of ['P101Y', 'P8000Y', 'P40000D', 'PT99999999999999999999H']) {
      expect(bad({ every }), every).toBe('every');
    }
    expect(bad({ repeat: 'R/P8000Y' })).toBe('repeat');
    expect(bad({ repeat: 'R3/+010000-01-01T00:00:00Z/PT1H' })).toBe('repeat');
    expect(bad({ repeat: 'R3/1969-12-31T00:00:00Z/PT1H' })).toBe('repeat');
    expect(validateScheduleOptions('s', { repeat: 'R3/9999-12-31T00:00:00Z/PT1H' }).repeat).toBe(
      'R3/9999-12-31T00:00:00Z/PT1H',
    );
  });

  it('refuses a repeat of R0 (it would never fire), with the field and why', () => {
    expect(() => validateScheduleOptions('s', { repeat: 'R0/PT1M' })).toThrow(/never fire/);
    expect(bad({ repeat: 'R0/PT1M' })).toBe('repeat');
    expect(validateScheduleOptions('s', { repeat: 'R1/PT1M' }).repeat).toBe('R1/PT1M');
  });

  it("a trigger has no occurrence after 9999-12-31, where every store's time column ends", () => {
    const options = validateScheduleOptions('s', { repeat: 'R/9999-12-31T22:00:00Z/PT1H' });
    const trigger = createTrigger(options, Date.UTC(2026, 0, 1));
    const last = Date.UTC(9999, 11, 31, 23);
    expect(trigger.atOrAfter(Date.UTC(2026, 0, 1))).toBe(Date.UTC(9999, 11, 31, 22));
    expect(trigger.after(Date.UTC(9999, 11, 31, 22))).toBe(last);
    expect(trigger.after(last)).toBeNull();
    expect(trigger.atOrBefore(Date.UTC(10_000, 5, 1))).toBe(last);
  });

  it('stores nothing when define() is given bad options', async () => {
    const store = new MemoryJobStore({ clock: new FakeClock() });
    const runner = new ScheduleRunner({ store, clock: new FakeClock() });
    await expect(
      runner.define('r', { cron: '0 3 * * *', timezone: 'Nowhere/Land' }),
    ).rejects.toThrow(ValidationError);
    await expect(runner.define('r', { cron: '0 3 * * *', every: 'PT1M' })).rejects.toThrow(
      /more than one trigger/,
    );
    expect(await store.listSchedules()).toEqual([]);
  });
});
