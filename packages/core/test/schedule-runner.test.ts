import { describe, expect, it } from 'vitest';
import { FakeClock } from '../src/clock.js';
import type { EngineEvents } from '../src/engine/types.js';
import { NotFoundError, StoreError, ValidationError } from '../src/errors.js';
import { MemoryJobStore } from '../src/memory-store.js';
import { ScheduleRunner } from '../src/schedule/index.js';
import type { Job } from '../src/store.js';

const T0 = new Date('2026-01-01T00:00:00Z');

function setup(start: Date = T0) {
  const clock = new FakeClock(start);
  const store = new MemoryJobStore({ clock });
  const events: EngineEvents['schedule-fired'][] = [];
  const runner = new ScheduleRunner({
    store,
    clock,
    emit: (event, payload) => {
      if (event === 'schedule-fired') events.push(payload as EngineEvents['schedule-fired']);
    },
  });
  const allJobs = () => store.listJobs({ limit: 1000, offset: 0 });
  const acquire = (types: string[], limit = 100) =>
    store.acquire({
      owner: 'w',
      limit,
      leaseMs: 24 * 3600_000,
      types,
      queues: null,
      tenants: null,
    });
  const completeAll = async (jobs: Job[]) => {
    const r = await store.complete(jobs.map((j) => ({ id: j.id, token: j.lockToken as string })));
    expect(r.lost).toEqual([]);
  };
  return { clock, store, runner, events, allJobs, acquire, completeAll };
}

const iso = (d: Date | null) => d?.toISOString() ?? null;

describe('ScheduleRunner.define', () => {
  it('stores the schedule with its first fire time and returns it', async () => {
    const { runner, store } = setup(new Date('2026-01-01T10:17:00Z'));
    const info = await runner.define('report', { cron: '0 3 * * *', timezone: 'Europe/Berlin' });
    // 03:00 in Berlin (CET, UTC+1) is 02:00 UTC, the next day.
    expect(iso(info.nextAt)).toBe('2026-01-02T02:00:00.000Z');
    expect(info.options.type).toBe('report');
    expect(info.paused).toBe(false);
    expect((await store.getSchedule('report'))?.nextAt?.toISOString()).toBe(
      '2026-01-02T02:00:00.000Z',
    );
  });

  it('is idempotent: the same options again change nothing, also from another runner', async () => {
    const { runner, store, clock } = setup();
    await runner.define('hb', { every: 'PT10M', payload: { a: 1, b: [2] } });
    const before = await store.getSchedule('hb');
    clock.advance(3 * 60_000);
    const other = new ScheduleRunner({ store, clock });
    const again = await other.define('hb', { payload: { b: [2], a: 1 }, every: 'PT10M' });
    const after = await store.getSchedule('hb');
    expect(after?.version).toBe(before?.version);
    expect(iso(again.nextAt)).toBe('2026-01-01T00:10:00.000Z');
  });

  it('keeps next fire time and counters when only non-trigger options change', async () => {
    const { runner, store, clock } = setup();
    await runner.define('hb', { every: 'PT1M', payload: 1, overlap: 'allow' });
    clock.advance(60_000);
    await runner.fireDue();
    const updated = await runner.define('hb', {
      every: 'PT1M',
      payload: 2,
      shards: 2,
      overlap: 'allow',
    });
    expect(iso(updated.nextAt)).toBe('2026-01-01T00:02:00.000Z');
    expect(updated.fired).toBe(1);
    expect(updated.options.payload).toBe(2);
    clock.advance(60_000);
    await runner.fireDue();
    const jobs = await store.listJobs({ schedule: 'hb', limit: 10, offset: 0 });
    expect(jobs.map((j) => [j.payload, iso(j.occurrence)])).toEqual([
      [1, '2026-01-01T00:01:00.000Z'],
      [2, '2026-01-01T00:02:00.000Z'],
      [2, '2026-01-01T00:02:00.000Z'],
    ]);
  });

  it('starts over from now when the trigger changes', async () => {
    const { runner, clock } = setup();
    await runner.define('hb', { every: 'PT1M' });
    clock.advance(60_000);
    await runner.fireDue();
    clock.advance(30_000);
    const changed = await runner.define('hb', { every: 'PT5M' });
    expect(iso(changed.nextAt)).toBe('2026-01-01T00:06:30.000Z');
    expect(changed.fired).toBe(0);
  });

  it('a fire by another runner between its read and its save is not undone: it reads again', async () => {
    const { runner, store, clock, allJobs } = setup();
    await runner.define('hb', { every: 'PT1M', payload: 1, overlap: 'allow' });
    clock.advance(60_000);
    const other = new ScheduleRunner({ store, clock });
    const read = store.getSchedule.bind(store);
    let reads = 0;
    store.getSchedule = async (name) => {
      const record = await read(name);
      // The other runner fires the 00:01 occurrence right after the first read.
      reads += 1;
      if (reads === 1) await other.fireDue();
      return record;
    };
    const info = await runner.define('hb', { every: 'PT1M', payload: 2, overlap: 'allow' });
    expect(reads).toBe(2);
    expect(iso(info.nextAt)).toBe('2026-01-01T00:02:00.000Z');
    expect(info.fired).toBe(1);
    expect(info.options.payload).toBe(2);
    await runner.fireDue();
    expect((await allJobs()).map((j) => iso(j.occurrence))).toEqual(['2026-01-01T00:01:00.000Z']);
  });

  it('gives up with a StoreError naming the schedule when every save finds it changed', async () => {
    const { runner, store } = setup();
    let saves = 0;
    store.saveSchedule = async () => {
      saves += 1;
      return null;
    };
    const defining = runner.define('busy', { every: 'PT1M' });
    await expect(defining).rejects.toThrow(StoreError);
    await expect(defining).rejects.toThrow(/"busy"/);
    expect(saves).toBe(10);
  });

  it('pause, resume, remove, get and list', async () => {
    const { runner } = setup();
    await runner.define('b', { cron: '* * * * *' });
    await runner.define('a', { every: 'PT1H' });
    expect((await runner.pause('a')).paused).toBe(true);
    expect((await runner.list()).map((s) => [s.name, s.paused, iso(s.nextAt)])).toEqual([
      ['a', true, '2026-01-01T01:00:00.000Z'],
      ['b', false, '2026-01-01T00:01:00.000Z'],
    ]);
    expect((await runner.resume('a')).paused).toBe(false);
    expect(await runner.remove('a')).toBe(true);
    expect(await runner.remove('a')).toBe(false);
    expect(await runner.get('a')).toBeNull();
    await expect(runner.pause('a')).rejects.toThrow(NotFoundError);
  });
});

describe('ScheduleRunner.fireDue', () => {
  it('fires nothing before the due time and returns the next fire time', async () => {
    const { runner, clock, allJobs } = setup();
    await runner.define('tick', { cron: '*/10 * * * * *' });
    clock.advance(9_999);
    expect(iso(await runner.fireDue())).toBe('2026-01-01T00:00:10.000Z');
    expect(await allJobs()).toEqual([]);
  });

  it('a runner whose clock runs 40 s ahead of the store fires on the store’s clock: not early, nothing skipped', async () => {
    const storeClock = new FakeClock(T0);
    const store = new MemoryJobStore({ clock: storeClock });
    const ahead = { now: () => storeClock.now() + 40_000 };
    const runner = new ScheduleRunner({ store, clock: ahead });
    const info = await runner.define('tick', { every: 'PT1S', overlap: 'allow' });
    expect(iso(info.nextAt), 'the first occurrence counts from the store’s now').toBe(
      '2026-01-01T00:00:01.000Z',
    );
    for (let second = 1; second <= 3; second++) {
      storeClock.advance(1_000);
      await runner.fireDue();
    }
    const jobs = await store.listJobs({ limit: 100, offset: 0 });
    expect(jobs.map((j) => iso(j.occurrence))).toEqual([
      '2026-01-01T00:00:01.000Z',
      '2026-01-01T00:00:02.000Z',
      '2026-01-01T00:00:03.000Z',
    ]);
    expect(iso((await store.getSchedule('tick'))?.nextAt ?? null)).toBe('2026-01-01T00:00:04.000Z');
  });

  it('creates one async job per occurrence with its key, scope, occurrence and schedule', async () => {
    const { runner, clock, allJobs, events } = setup();
    await runner.define('tick', {
      cron: '*/10 * * * * *',
      type: 'work',
      payload: { x: 1 },
      priority: 5,
      retries: 7,
    });
    clock.advance(10_000);
    expect(iso(await runner.fireDue())).toBe('2026-01-01T00:00:20.000Z');
    const [job, ...rest] = await allJobs();
    expect(rest).toEqual([]);
    expect(job).toMatchObject({
      type: 'work',
      payload: { x: 1 },
      state: 'async',
      priority: 5,
      retriesLeft: 7,
      scope: 'tick#0',
      exclusive: true,
      key: 'sched:tick@2026-01-01T00:00:10.000Z#0',
      schedule: 'tick',
      shard: null,
    });
    expect(iso(job?.occurrence ?? null)).toBe('2026-01-01T00:00:10.000Z');
    expect(events.map((e) => [e.schedule, iso(e.occurrence), e.status, e.jobs.length])).toEqual([
      ['tick', '2026-01-01T00:00:10.000Z', 'fired', 1],
    ]);
    // Calling again at the same time fires nothing more.
    await runner.fireDue();
    expect(await allJobs()).toHaveLength(1);
  });

  it('coalesces occurrences missed during downtime into one run for the latest', async () => {
    const { runner, clock, allJobs, store } = setup();
    await runner.define('m', { cron: '* * * * *', overlap: 'allow' });
    clock.advance(10 * 60_000 + 5_000); // 10 occurrences missed
    expect(iso(await runner.fireDue())).toBe('2026-01-01T00:11:00.000Z');
    const jobs = await allJobs();
    expect(jobs.map((j) => iso(j.occurrence))).toEqual(['2026-01-01T00:10:00.000Z']);
    expect((await store.getSchedule('m'))?.fired).toBe(1);
  });

  it('catchUp: n replays the latest n missed occurrences, oldest first, one at a time', async () => {
    const { runner, clock, allJobs, acquire, completeAll } = setup();
    await runner.define('m', { cron: '* * * * *', catchUp: 3 });
    clock.advance(10 * 60_000 + 5_000);
    await runner.fireDue();
    const jobs = await allJobs();
    expect(jobs.map((j) => iso(j.occurrence))).toEqual([
      '2026-01-01T00:08:00.000Z',
      '2026-01-01T00:09:00.000Z',
      '2026-01-01T00:10:00.000Z',
    ]);
    // They share the exclusive scope, so they run in order, one at a time.
    const order: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const got = await acquire(['m']);
      expect(got).toHaveLength(1);
      order.push(iso((got[0] as Job).occurrence) as string);
      await completeAll(got);
    }
    expect(order).toEqual(jobs.map((j) => iso(j.occurrence)));
  });

  it('catchUp replays at most what was missed, and handles a year of one-second downtime', async () => {
    const { runner, clock, allJobs } = setup();
    await runner.define('s', { every: 'PT1S', catchUp: 5, overlap: 'allow' });
    clock.advance(2_500);
    await runner.fireDue();
    expect((await allJobs()).map((j) => iso(j.occurrence))).toEqual([
      '2026-01-01T00:00:01.000Z',
      '2026-01-01T00:00:02.000Z',
    ]);
    const { runner: r2, clock: c2, allJobs: all2 } = setup();
    await r2.define('c', { cron: '* * * * * *', catchUp: 2, overlap: 'allow' });
    c2.advance(365 * 24 * 3600 * 1000);
    expect(iso(await r2.fireDue())).toBe('2027-01-01T00:00:01.000Z');
    expect((await all2()).map((j) => iso(j.occurrence))).toEqual([
      '2026-12-31T23:59:59.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
  });

  it('overlap skip drops fires while the previous occurrence is unfinished and counts them', async () => {
    const { runner, clock, store, acquire, completeAll, events } = setup();
    await runner.define('s', { every: 'PT1M' });
    clock.advance(60_000);
    await runner.fireDue();
    const running = await acquire(['s']);
    clock.advance(60_000);
    await runner.fireDue();
    clock.advance(60_000);
    await runner.fireDue();
    expect(await store.listJobs({ schedule: 's', limit: 10, offset: 0 })).toHaveLength(1);
    expect((await store.getSchedule('s'))?.skipped).toBe(2);
    await completeAll(running);
    clock.advance(60_000);
    await runner.fireDue();
    const jobs = await store.listJobs({ schedule: 's', limit: 10, offset: 0 });
    expect(jobs.map((j) => iso(j.occurrence))).toEqual(['2026-01-01T00:04:00.000Z']);
    expect(events.map((e) => e.status)).toEqual(['fired', 'skipped', 'skipped', 'fired']);
  });

  it('a job waiting for a retry also counts as unfinished', async () => {
    const { runner, clock, store, acquire } = setup();
    await runner.define('s', { every: 'PT1M', retries: 2 });
    clock.advance(60_000);
    await runner.fireDue();
    const [job] = await acquire(['s']);
    await store.fail([
      {
        id: job?.id as string,
        token: job?.lockToken as string,
        error: { message: 'x', stack: null },
        deadletter: false,
        retryDelayMs: 600_000,
      },
    ]);
    clock.advance(60_000);
    await runner.fireDue();
    expect((await store.getSchedule('s'))?.skipped).toBe(1);
  });

  it('overlap coalesce runs once, right after the previous occurrence ends, for the latest fire', async () => {
    const { runner, clock, store, acquire, completeAll } = setup();
    await runner.define('c', { every: 'PT1M', overlap: 'coalesce' });
    clock.advance(60_000);
    await runner.fireDue();
    const first = await acquire(['c']);
    clock.advance(60_000);
    await runner.fireDue(); // 00:02 coalesced
    clock.advance(60_000);
    await runner.fireDue(); // 00:03 coalesced
    let record = await store.getSchedule('c');
    expect(record?.pendingMisfire).toBe(true);
    clock.advance(10_000);
    // Still busy: waits without writing, and asks to be called again soon.
    const wake = await runner.fireDue();
    expect(iso(wake)).toBe('2026-01-01T00:03:11.000Z');
    expect((await store.getSchedule('c'))?.version).toBe(record?.version);
    await completeAll(first);
    await runner.fireDue(); // the engine calls this when a schedule's job ends
    const jobs = await store.listJobs({ schedule: 'c', limit: 10, offset: 0 });
    expect(jobs.map((j) => iso(j.occurrence))).toEqual(['2026-01-01T00:03:00.000Z']);
    record = await store.getSchedule('c');
    expect(record?.pendingMisfire).toBe(false);
    expect(iso(record?.nextAt ?? null)).toBe('2026-01-01T00:04:00.000Z');
    expect(record?.fired).toBe(2);
  });

  it('overlap allow lets occurrences run at the same time', async () => {
    const { runner, clock, acquire } = setup();
    await runner.define('a', { every: 'PT1M', overlap: 'allow' });
    clock.advance(60_000);
    await runner.fireDue();
    const first = await acquire(['a']);
    clock.advance(60_000);
    await runner.fireDue();
    const second = await acquire(['a']);
    expect(first).toHaveLength(1);
    expect(second).toHaveLength(1);
    expect(second[0]?.exclusive).toBe(false);
  });

  it('shards: one fire creates n exclusive jobs on scopes name#i with shard index and count', async () => {
    const { runner, clock, allJobs, acquire } = setup();
    await runner.define('rep', { every: 'PT1M', shards: 3, overlap: 'allow', type: 'report' });
    clock.advance(60_000);
    await runner.fireDue();
    const jobs = await allJobs();
    expect(jobs.map((j) => [j.type, j.scope, j.exclusive, j.shard, j.key])).toEqual(
      [0, 1, 2].map((i) => [
        'report',
        `rep#${i}`,
        true,
        { index: i, count: 3 },
        `sched:rep@2026-01-01T00:01:00.000Z#${i}`,
      ]),
    );
    // With overlap allow the next occurrence's shards wait for the same shard of the previous one.
    const first = await acquire(['report']);
    expect(first).toHaveLength(3);
    clock.advance(60_000);
    await runner.fireDue();
    expect(await acquire(['report'])).toEqual([]);
  });

  it('repeat R3/PT10M fires three times and then never again', async () => {
    const { runner, clock, allJobs, store } = setup();
    await runner.define('r', { repeat: 'R3/PT10M', overlap: 'allow' });
    const wakes: (string | null)[] = [];
    for (let i = 0; i < 5; i += 1) {
      clock.advance(10 * 60_000);
      wakes.push(iso(await runner.fireDue()));
    }
    expect((await allJobs()).map((j) => iso(j.occurrence))).toEqual([
      '2026-01-01T00:10:00.000Z',
      '2026-01-01T00:20:00.000Z',
      '2026-01-01T00:30:00.000Z',
    ]);
    expect(wakes).toEqual([
      '2026-01-01T00:20:00.000Z',
      '2026-01-01T00:30:00.000Z',
      null,
      null,
      null,
    ]);
    expect((await store.getSchedule('r'))?.nextAt).toBeNull();
  });

  it('repeat with a start fires at the start, skipping occurrences already past at definition', async () => {
    const { runner, clock, allJobs } = setup(new Date('2026-01-01T01:30:00Z'));
    const info = await runner.define('r', {
      repeat: 'R4/2026-01-01T00:00:00Z/PT1H',
      overlap: 'allow',
    });
    expect(iso(info.nextAt)).toBe('2026-01-01T02:00:00.000Z');
    clock.advance(2 * 3600_000);
    await runner.fireDue();
    expect((await allJobs()).map((j) => iso(j.occurrence))).toEqual(['2026-01-01T03:00:00.000Z']);
    expect(await runner.fireDue()).toBeNull();
  });

  it('a paused schedule does not fire; on resume missed occurrences coalesce into one run', async () => {
    const { runner, clock, allJobs } = setup();
    await runner.define('p', { every: 'PT1M' });
    await runner.pause('p');
    clock.advance(5 * 60_000);
    expect(await runner.fireDue()).toBeNull();
    expect(await allJobs()).toEqual([]);
    await runner.resume('p');
    await runner.fireDue();
    expect((await allJobs()).map((j) => iso(j.occurrence))).toEqual(['2026-01-01T00:05:00.000Z']);
  });

  it('a schedule defined while fireDue is in flight is in the wake-up time fireDue returns', async () => {
    const { runner } = setup();
    const firing = runner.fireDue();
    const info = await runner.define('late', { every: 'PT1M' });
    expect(iso(await firing)).toBe(iso(info.nextAt));
  });

  it('a schedule with an unreadable spec is reported, never fired, and blocks no other', async () => {
    const { store, clock, allJobs } = setup();
    const errors: unknown[] = [];
    const runner = new ScheduleRunner({
      store,
      clock,
      emit: (event, payload) => {
        if (event === 'error') errors.push((payload as EngineEvents['error']).error);
      },
    });
    await store.saveSchedule({ name: 'alien', spec: { v: 99 }, nextAt: T0, resetProgress: false });
    await runner.define('ok', { every: 'PT1M', overlap: 'allow' });
    clock.advance(60_000);
    // The wake-up time ignores the unreadable (and overdue) schedule.
    expect(iso(await runner.fireDue())).toBe('2026-01-01T00:02:00.000Z');
    expect((await allJobs()).map((j) => j.schedule)).toEqual(['ok']);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(ValidationError);
    expect((await runner.list()).map((s) => s.name)).toEqual(['ok']);
    await expect(runner.get('alien')).rejects.toThrow(/unreadable/);
  });

  it('racing runners on one store create exactly one job per occurrence', async () => {
    const { store, clock, allJobs } = setup();
    const runners = Array.from({ length: 5 }, () => new ScheduleRunner({ store, clock }));
    await Promise.all(
      runners.map((r) => r.define('race', { cron: '* * * * * *', overlap: 'allow', shards: 2 })),
    );
    for (let second = 0; second < 50; second += 1) {
      clock.advance(1000);
      await Promise.all(runners.flatMap((r) => [r.fireDue(), r.fireDue()]));
    }
    const jobs = await allJobs();
    const keys = jobs.map((j) => j.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect(jobs).toHaveLength(100);
    expect((await store.getSchedule('race'))?.fired).toBe(50);
  });
});

describe('daylight saving time (Europe/Berlin)', () => {
  async function fireDaily(
    options: Parameters<ScheduleRunner['define']>[1],
    from: string,
    days: number,
  ) {
    const { runner, clock, allJobs } = setup(new Date(from));
    await runner.define('dst', { ...options, overlap: 'allow' });
    for (let i = 0; i < days * 4; i += 1) {
      clock.advance(6 * 3600_000);
      await runner.fireDue();
    }
    return (await allJobs()).map((j) => iso(j.occurrence));
  }

  it('cron 02:30 daily: runs at 03:00 on the spring-forward day and once on the fall-back day', async () => {
    expect(
      await fireDaily({ cron: '30 2 * * *', timezone: 'Europe/Berlin' }, '2026-03-27T12:00:00Z', 3),
    ).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 02:30 does not exist: 03:00 CEST
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
    expect(
      await fireDaily({ cron: '30 2 * * *', timezone: 'Europe/Berlin' }, '2026-10-24T12:00:00Z', 3),
    ).toEqual([
      '2026-10-25T00:30:00.000Z', // the first 02:30 (CEST) only
      '2026-10-26T01:30:00.000Z', // 02:30 CET
      '2026-10-27T01:30:00.000Z',
    ]);
  });

  it('cron every 30 minutes runs on both 02:00 and 02:30 of the repeated fall-back hour', async () => {
    const { runner, clock, allJobs } = setup(new Date('2026-10-24T23:50:00Z'));
    await runner.define('half', {
      cron: '*/30 * * * *',
      timezone: 'Europe/Berlin',
      overlap: 'allow',
    });
    for (let i = 0; i < 12; i += 1) {
      clock.advance(15 * 60_000);
      await runner.fireDue();
    }
    expect((await allJobs()).map((j) => iso(j.occurrence))).toEqual([
      '2026-10-25T00:00:00.000Z', // 02:00 CEST
      '2026-10-25T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T01:00:00.000Z', // 02:00 CET
      '2026-10-25T01:30:00.000Z', // 02:30 CET
      '2026-10-25T02:00:00.000Z',
      '2026-10-25T02:30:00.000Z',
    ]);
  });

  it('every P1D keeps the wall-clock time across DST; PT24H keeps the interval', async () => {
    expect(
      await fireDaily({ every: 'P1D', timezone: 'Europe/Berlin' }, '2026-03-27T11:00:00Z', 3),
    ).toEqual([
      '2026-03-28T11:00:00.000Z', // 12:00 CET
      '2026-03-29T10:00:00.000Z', // 12:00 CEST
      '2026-03-30T10:00:00.000Z',
    ]);
    expect(
      await fireDaily({ every: 'PT24H', timezone: 'Europe/Berlin' }, '2026-03-27T11:00:00Z', 3),
    ).toEqual(['2026-03-28T11:00:00.000Z', '2026-03-29T11:00:00.000Z', '2026-03-30T11:00:00.000Z']);
  });

  it('every P1M from January 31 stays at month ends without drifting', async () => {
    const { runner, clock, allJobs } = setup(new Date('2026-01-31T08:00:00Z'));
    await runner.define('monthly', { every: 'P1M', overlap: 'allow' });
    for (let i = 0; i < 4; i += 1) {
      const next = await runner.fireDue();
      clock.set(next as Date);
      await runner.fireDue();
    }
    expect((await allJobs()).map((j) => iso(j.occurrence))).toEqual([
      '2026-02-28T08:00:00.000Z',
      '2026-03-31T08:00:00.000Z',
      '2026-04-30T08:00:00.000Z',
      '2026-05-31T08:00:00.000Z',
    ]);
  });
});
