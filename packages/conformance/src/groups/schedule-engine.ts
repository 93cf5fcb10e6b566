/**
 * Schedules driven by the engine's `ScheduleRunner` on a real store: each occurrence fires
 * exactly once however many runners (nodes) race for it, overlap and misfire rules hold, and
 * the stored occurrence jobs carry their schedule, occurrence, shard, scope and key.
 *
 * A SQL store's clock cannot be faked, so these tests use one-second schedules and short real
 * waits, measured on the store's clock (`StoreSyncedClock`), never on the test machine's.
 * One test steps this process's wall clock (`Date`, faked by vitest) under a real engine.
 */
import {
  type Job,
  JobEngine,
  type JobStore,
  type ScheduleOptions,
  ScheduleRunner,
  StoreSyncedClock,
  silentLogger,
} from '@jobs/core';
import { expect, it, vi } from 'vitest';
import { type Harness, refOf, sleep, storeNow, waitFor } from '../harness.js';

/** A runner on `store` with a clock synced to the store's. */
async function runnerOn(store: JobStore): Promise<ScheduleRunner> {
  const clock = new StoreSyncedClock(() => store.now());
  await clock.sync();
  return new ScheduleRunner({ store, clock });
}

/** Waits until the store's clock reaches `at` (plus a small margin). */
async function untilStoreTime(store: JobStore, at: Date | null): Promise<void> {
  if (at === null) throw new Error('schedule has no next fire time');
  const target = at.getTime() + 5;
  for (;;) {
    const now = await storeNow(store);
    if (now >= target) return;
    await sleep(Math.min(200, target - now));
  }
}

/** Wall-clock steps the engine must ride out: ahead, back to true, behind, back to true. */
const WALL_CLOCK_STEPS_MS = [40_000, -40_000, -3_600_000, 3_600_000];

/**
 * `store` with `getSchedule` answering `ms` late, like a slow link: it holds a reader's
 * read–compute–save window open long enough for another node's fire to land inside it, on
 * every store (an in-process store otherwise never yields between the read and the save).
 */
function withSlowScheduleReads(store: JobStore, ms: number): JobStore {
  return new Proxy(store, {
    get(target, property) {
      if (property === 'getSchedule') {
        return async (name: string) => {
          const record = await target.getSchedule(name);
          await sleep(ms);
          return record;
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

async function scheduleJobs(store: JobStore, name: string): Promise<Job[]> {
  return store.listJobs({ schedule: name, limit: 1000, offset: 0 });
}

const iso = (d: Date | null) => d?.toISOString() ?? null;

export function scheduleEngineGroup(h: Harness): void {
  it(
    'a step of this machine’s wall clock (+40 s, −40 s, −1 h, +1 h) neither fires a schedule early nor skips an occurrence',
    async (ctx) => {
      const store = await h.open();
      // Only `Date` is faked (it moves on with real time, in 20 ms ticks); timers and
      // `performance.now()` stay real, as they do when NTP or an operator steps the clock.
      vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true, advanceTimeDelta: 20 });
      try {
        const before = await storeNow(store);
        vi.setSystemTime(Date.now() + 3_600_000);
        const stepped = (await storeNow(store)) - before > 1_800_000;
        vi.setSystemTime(Date.now() - 3_600_000);
        if (stepped) {
          ctx.skip(
            'the store’s clock is this process’s `Date`: a step of it is a step of the store’s time',
          );
        }
        const runs: Job[] = [];
        const engine = new JobEngine({
          store,
          handlers: { tick: async (job: Job) => void runs.push(job) },
          logger: silentLogger,
        });
        h.defer(() => engine.stop({ timeoutMs: 1_000 }));
        await engine.start();
        // `allow` and a catch-up of 3: a run a little late under load is replayed, not dropped,
        // so a gap can only come from the clock.
        await engine.schedule('steps', {
          every: 'PT1S',
          type: 'tick',
          overlap: 'allow',
          catchUp: 3,
        });
        // Each step comes right after a run, so the next fire is worked out after the step.
        const nextRun = (what: string) => {
          const seen = runs.length;
          return waitFor(what, async () => runs.length > seen, h.timeoutMs / 3);
        };
        await nextRun('the first occurrence');
        for (const step of WALL_CLOCK_STEPS_MS) {
          vi.setSystemTime(Date.now() + step);
          await nextRun(`the next occurrence after a wall-clock step of ${step / 1000} s`);
        }
        await engine.stop({ timeoutMs: 5_000 });
        const occurrences = runs
          .map((j) => j.occurrence?.getTime() as number)
          .sort((a, b) => a - b);
        expect(new Set(occurrences).size, 'an occurrence ran twice').toBe(occurrences.length);
        for (let i = 1; i < occurrences.length; i++) {
          expect(
            (occurrences[i] as number) - (occurrences[i - 1] as number),
            `occurrences skipped after ${new Date(occurrences[i - 1] as number).toISOString()}`,
          ).toBe(1000);
        }
        for (const job of runs) {
          // `createdAt` is the fire, on the store's clock.
          expect(
            job.createdAt.getTime(),
            `occurrence ${job.occurrence?.toISOString()} fired early`,
          ).toBeGreaterThanOrEqual(job.occurrence?.getTime() as number);
        }
      } finally {
        vi.useRealTimers();
      }
    },
    h.timeout(2),
  );

  it('racing runners on peers fire each occurrence of a one-second schedule exactly once', async () => {
    const store = await h.open();
    const peers = await h.peers(store);
    const runners = await Promise.all(peers.map((p) => runnerOn(p)));
    const options: ScheduleOptions = {
      cron: '* * * * * *',
      overlap: 'allow',
      shards: 2,
      type: 'work',
    };
    await Promise.all(runners.map((r) => r.define('race', options)));
    const start = await storeNow(store);
    // Every runner fires as fast as it can for a little over two seconds.
    await Promise.all(
      runners.map(async (runner) => {
        while ((await storeNow(store)) < start + 2_300) {
          await runner.fireDue();
          await sleep(5);
        }
      }),
    );
    const jobs = await scheduleJobs(store, 'race');
    const keys = jobs.map((j) => j.key);
    expect(new Set(keys).size, 'no occurrence shard created twice').toBe(keys.length);
    const occurrences = [...new Set(jobs.map((j) => j.occurrence?.getTime()))].sort();
    expect(occurrences.length).toBeGreaterThanOrEqual(2);
    expect(jobs).toHaveLength(occurrences.length * 2);
    for (let i = 1; i < occurrences.length; i++) {
      expect(
        (occurrences[i] as number) - (occurrences[i - 1] as number),
        'consecutive seconds',
      ).toBe(1000);
    }
    const record = await store.getSchedule('race');
    expect(record?.fired).toBe(occurrences.length);
  });

  it('redefining a schedule (same trigger, new payload) while another peer fires it never fires an occurrence twice', async () => {
    const store = await h.open();
    const [definerStore, firerStore] = (await h.peers(store, 2)) as [JobStore, JobStore];
    const definer = await runnerOn(withSlowScheduleReads(definerStore, 20));
    const clock = new StoreSyncedClock(() => firerStore.now());
    await clock.sync();
    const firedOccurrences: number[] = [];
    const firer = new ScheduleRunner({
      store: firerStore,
      clock,
      emit: (event, payload) => {
        if (event !== 'schedule-fired') return;
        const fire = payload as { status: string; occurrence: Date };
        if (fire.status === 'fired') firedOccurrences.push(fire.occurrence.getTime());
      },
    });
    const options = (n: number): ScheduleOptions => ({
      cron: '* * * * * *',
      overlap: 'allow',
      type: 'redefined-work',
      payload: { n },
    });
    await definer.define('redef', options(0));
    const start = await storeNow(store);
    const until = start + 2_300;
    // Finished jobs free their occurrence key, so a second fire of an occurrence would create a
    // second job rather than return the first one.
    const ran: Job[] = [];
    let redefinitions = 0;
    await Promise.all([
      (async () => {
        while ((await storeNow(store)) < until) {
          redefinitions += 1;
          await definer.define('redef', options(redefinitions));
        }
      })(),
      (async () => {
        while ((await storeNow(store)) < until) {
          await firer.fireDue();
          await sleep(5);
        }
      })(),
      (async () => {
        while ((await storeNow(store)) < until + 200) {
          const held = await store.acquire({
            owner: 'consumer',
            limit: 100,
            leaseMs: 30_000,
            types: ['redefined-work'],
            queues: null,
            tenants: null,
          });
          if (held.length > 0) await store.complete(held.map(refOf));
          ran.push(...held);
          await sleep(5);
        }
      })(),
    ]);
    const jobs = [...ran, ...(await scheduleJobs(store, 'redef'))];
    const byOccurrence = jobs.map((j) => j.occurrence?.getTime() as number);
    expect(firedOccurrences.length, 'the schedule fired while being redefined').toBeGreaterThan(0);
    expect(new Set(firedOccurrences).size, 'an occurrence fired twice').toBe(
      firedOccurrences.length,
    );
    expect(new Set(byOccurrence).size, 'an occurrence job created twice').toBe(jobs.length);
    expect(jobs).toHaveLength(firedOccurrences.length);
    const info = await definer.get('redef');
    expect(info?.fired).toBe(firedOccurrences.length);
    expect(info?.options.payload, 'the last redefinition is the one stored').toEqual({
      n: redefinitions,
    });
  });

  it('defining the same schedule on several peers at once leaves one schedule; again changes nothing', async () => {
    const store = await h.open();
    const peers = await h.peers(store);
    const runners = await Promise.all(peers.map((p) => runnerOn(p)));
    const options: ScheduleOptions = {
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      payload: { a: 1, b: 'x' },
    };
    await Promise.all(runners.map((r) => r.define('nightly', options)));
    const all = await store.listSchedules();
    expect(all.map((s) => s.name)).toEqual(['nightly']);
    const before = all[0];
    const info = await (runners[0] as ScheduleRunner).define('nightly', {
      payload: { b: 'x', a: 1 },
      timezone: 'Europe/Berlin',
      cron: '0 3 * * *',
    });
    expect((await store.getSchedule('nightly'))?.version).toBe(before?.version);
    expect(info.nextAt?.getTime()).toBe(before?.nextAt?.getTime());
    // 03:00 in Berlin is 01:00 or 02:00 UTC.
    expect([1, 2]).toContain(info.nextAt?.getUTCHours());
    expect(info.nextAt?.getUTCMinutes()).toBe(0);
  });

  it('occurrence jobs are stored with schedule, occurrence, shard, exclusive scope and key', async () => {
    const store = await h.open();
    const runner = await runnerOn(store);
    const info = await runner.define('rep', {
      every: 'PT1S',
      shards: 3,
      type: 'report',
      payload: { n: 1 },
    });
    await untilStoreTime(store, info.nextAt);
    await runner.fireDue();
    const jobs = await scheduleJobs(store, 'rep');
    expect(jobs).toHaveLength(3);
    for (const [i, job] of jobs.entries()) {
      await h.expectStored(store, job.id, {
        type: 'report',
        payload: { n: 1 },
        state: 'async',
        schedule: 'rep',
        occurrence: info.nextAt as Date,
        shard: { index: i, count: 3 },
        scope: `rep#${i}`,
        exclusive: true,
        key: `sched:rep@${iso(info.nextAt)}#${i}`,
      });
    }
  });

  it('overlap skip drops fires while an occurrence is unfinished; coalesce runs them once after it', async () => {
    const store = await h.open();
    const runner = await runnerOn(store);
    // Both schedules tick together, so one set of waits checks both policies.
    await runner.define('s', { cron: '* * * * * *', type: 'skipped-work' });
    let info = await runner.define('c', {
      cron: '* * * * * *',
      type: 'coalesced-work',
      overlap: 'coalesce',
    });
    await untilStoreTime(store, info.nextAt);
    await runner.fireDue();
    const held = await store.acquire({
      owner: 'o',
      limit: 10,
      leaseMs: 30_000,
      types: ['skipped-work', 'coalesced-work'],
      queues: null,
      tenants: null,
    });
    expect(held).toHaveLength(2);
    info = (await runner.get('c')) as NonNullable<typeof info>;
    const busyFire = info.nextAt;
    await untilStoreTime(store, busyFire);
    await runner.fireDue();
    expect(await scheduleJobs(store, 's')).toHaveLength(1);
    expect(await scheduleJobs(store, 'c')).toHaveLength(1);
    expect((await store.getSchedule('s'))?.skipped).toBe(1);
    expect((await store.getSchedule('c'))?.pendingMisfire).toBe(true);
    await store.complete(held.map(refOf));
    // Right after the occurrence ended (the engine calls fireDue then), before the next tick:
    // the coalesced fire runs, the skipped one stays dropped.
    await runner.fireDue();
    expect((await scheduleJobs(store, 'c')).map((j) => iso(j.occurrence))).toEqual([iso(busyFire)]);
    expect((await store.getSchedule('c'))?.pendingMisfire).toBe(false);
    const next = (await store.getSchedule('s'))?.nextAt ?? null;
    if ((await storeNow(store)) < (next?.getTime() ?? 0)) {
      expect(await scheduleJobs(store, 's')).toEqual([]);
    }
    await untilStoreTime(store, next);
    await runner.fireDue();
    const skipJobs = await scheduleJobs(store, 's');
    expect(skipJobs.length).toBeGreaterThanOrEqual(1);
    expect(skipJobs.every((j) => (j.occurrence?.getTime() ?? 0) > (busyFire?.getTime() ?? 0))).toBe(
      true,
    );
  });

  it('occurrences missed while no runner ran coalesce into one run; catchUp replays the latest n', async () => {
    const store = await h.open();
    const runner = await runnerOn(store);
    const one = await runner.define('down', { cron: '* * * * * *', overlap: 'allow' });
    const many = await runner.define('down2', {
      cron: '* * * * * *',
      overlap: 'allow',
      catchUp: 2,
    });
    // Two occurrences pass with nobody firing.
    const lastDefined = Math.max((one.nextAt as Date).getTime(), (many.nextAt as Date).getTime());
    await untilStoreTime(store, new Date(lastDefined + 1_000));
    await runner.fireDue();
    const single = await scheduleJobs(store, 'down');
    expect(single).toHaveLength(1);
    const latest = single[0]?.occurrence?.getTime() as number;
    expect(latest).toBeGreaterThanOrEqual((one.nextAt as Date).getTime() + 1_000);
    const replayed = (await scheduleJobs(store, 'down2')).map(
      (j) => j.occurrence?.getTime() as number,
    );
    expect(replayed).toHaveLength(2);
    expect(replayed[1]).toBeGreaterThanOrEqual((many.nextAt as Date).getTime() + 1_000);
    expect(replayed[0]).toBe((replayed[1] as number) - 1000);
    const record = await store.getSchedule('down');
    expect(record?.nextAt?.getTime()).toBe(latest + 1000);
  });

  it('a paused schedule is not fired by any peer until resumed', async () => {
    const store = await h.open();
    const peers = await h.peers(store, 2);
    const [a, b] = await Promise.all(peers.map((p) => runnerOn(p)));
    const info = await (a as ScheduleRunner).define('p', { every: 'PT1S' });
    await (b as ScheduleRunner).pause('p');
    await untilStoreTime(store, info.nextAt);
    await Promise.all([(a as ScheduleRunner).fireDue(), (b as ScheduleRunner).fireDue()]);
    expect(await scheduleJobs(store, 'p')).toEqual([]);
    await (a as ScheduleRunner).resume('p');
    await waitFor('the resumed schedule to fire', async () => {
      await (b as ScheduleRunner).fireDue();
      return (await scheduleJobs(store, 'p')).length === 1;
    });
  });
}
