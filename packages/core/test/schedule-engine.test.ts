/**
 * Schedules through the JobEngine's public API, on MemoryJobStore with a fake clock: what the
 * handler sees, idempotent definition, the coalesced run right after the previous one ends,
 * and admin operations.
 */
import { describe, expect, it } from 'vitest';
import {
  FakeClock,
  type Job,
  type JobContext,
  JobEngine,
  MemoryJobStore,
  NotFoundError,
  ValidationError,
} from '../src/index.js';
import { engine, waitFor } from './helpers.js';

const iso = (d: Date | null | undefined) => d?.toISOString() ?? null;

function setup() {
  const clock = new FakeClock(new Date('2026-01-01T00:00:00Z'));
  const store = new MemoryJobStore({ clock });
  return { clock, store };
}

describe('engine.schedule', () => {
  it('handlers get ctx.occurrence and ctx.shard; each shard of each occurrence runs once', async () => {
    const { clock, store } = setup();
    const seen: { occurrence: string | null; shard: JobContext['shard']; payload: unknown }[] = [];
    const e = engine({
      store,
      clock,
      handlers: {
        report: (job: Job, ctx: JobContext) => {
          seen.push({ occurrence: iso(ctx.occurrence), shard: ctx.shard, payload: job.payload });
        },
      },
    });
    await e.start();
    const info = await e.schedule('nightly', {
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      type: 'report',
      payload: { title: 'sales' },
      shards: 3,
    });
    expect(iso(info.nextAt)).toBe('2026-01-01T02:00:00.000Z');
    for (let day = 0; day < 2; day++) {
      clock.advance(24 * 3600_000);
      e.poll();
      await waitFor(() => seen.length === 3 * (day + 1), `day ${day + 1}'s shards`);
    }
    const key = (s: (typeof seen)[number]) => `${s.occurrence}#${s.shard?.index}/${s.shard?.count}`;
    expect(seen.map(key).sort()).toEqual(
      ['2026-01-01T02:00:00.000Z', '2026-01-02T02:00:00.000Z'].flatMap((o) =>
        [0, 1, 2].map((i) => `${o}#${i}/3`),
      ),
    );
    expect(seen.every((s) => (s.payload as { title: string }).title === 'sales')).toBe(true);
    const [listed] = await e.admin.listSchedules();
    expect(listed).toMatchObject({ name: 'nightly', fired: 2, skipped: 0, paused: false });
    expect(iso(listed?.nextAt)).toBe('2026-01-03T02:00:00.000Z');
  });

  it('defining the same schedule from two engines is idempotent', async () => {
    const { clock, store } = setup();
    const a = engine({ store, clock, handlers: { t: () => {} } });
    const b = engine({ store, clock, handlers: { t: () => {} } });
    await a.schedule('s', { every: 'PT1M', type: 't' });
    const version = (await store.getSchedule('s'))?.version;
    clock.advance(30_000);
    const again = await b.schedule('s', { every: 'PT1M', type: 't' });
    expect((await store.getSchedule('s'))?.version).toBe(version);
    expect(iso(again.nextAt)).toBe('2026-01-01T00:01:00.000Z');
  });

  it('overlap coalesce: the missed fire runs as soon as the running occurrence finishes', async () => {
    const { clock, store } = setup();
    const runs: string[] = [];
    let release: (() => void) | null = null;
    const e = engine({
      store,
      clock,
      handlers: {
        slow: async (_job: Job, ctx: JobContext) => {
          runs.push(iso(ctx.occurrence) as string);
          if (runs.length === 1) await new Promise<void>((r) => (release = r));
        },
      },
    });
    await e.start();
    await e.schedule('c', { every: 'PT1M', type: 'slow', overlap: 'coalesce' });
    clock.advance(60_000);
    e.poll();
    await waitFor(() => runs.length === 1, 'the first occurrence to start');
    for (let i = 0; i < 3; i++) {
      clock.advance(60_000); // 00:02, 00:03, 00:04 fire while the first still runs
      e.poll();
      await waitFor(
        async () => (await store.getSchedule('c'))?.nextAt?.getUTCMinutes() === 3 + i,
        `fire ${i}`,
      );
    }
    expect((await store.getSchedule('c'))?.pendingMisfire).toBe(true);
    expect(runs).toHaveLength(1);
    (release as unknown as () => void)();
    // No clock movement: the coalesced run is triggered by the end of the previous one.
    await waitFor(() => runs.length === 2, 'the coalesced run');
    expect(runs).toEqual(['2026-01-01T00:01:00.000Z', '2026-01-01T00:04:00.000Z']);
    const record = await store.getSchedule('c');
    expect(record?.pendingMisfire).toBe(false);
    expect(record?.fired).toBe(2);
  });

  it('pause, resume and unschedule through the engine', async () => {
    const { clock, store } = setup();
    const runs: string[] = [];
    const e = engine({
      store,
      clock,
      handlers: {
        t: (_job: Job, ctx: JobContext) => void runs.push(iso(ctx.occurrence) as string),
      },
    });
    await e.start();
    await e.schedule('p', { every: 'PT1M', type: 't' });
    expect((await e.pauseSchedule('p')).paused).toBe(true);
    clock.advance(3 * 60_000);
    e.poll();
    await new Promise((r) => setTimeout(r, 30));
    expect(runs).toEqual([]);
    expect((await e.resumeSchedule('p')).paused).toBe(false);
    e.poll();
    await waitFor(() => runs.length === 1, 'the run after resume');
    expect(runs).toEqual(['2026-01-01T00:03:00.000Z']); // missed occurrences coalesced into one
    expect(await e.unschedule('p')).toBe(true);
    expect(await e.admin.listSchedules()).toEqual([]);
    await expect(e.pauseSchedule('p')).rejects.toThrow(NotFoundError);
  });

  it('bad options are rejected with a ValidationError naming the field, nothing stored', async () => {
    const { store } = setup();
    const client = new JobEngine({ store });
    const field = async (p: Promise<unknown>) => {
      const error = await p.then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ValidationError);
      return (error as ValidationError).field;
    };
    expect(await field(client.schedule('x', { cron: '0 25 * * *' }))).toBe('cron');
    expect(
      await field(client.schedule('x', { cron: '0 3 * * *', timezone: 'Europe/Berlni' })),
    ).toBe('timezone');
    expect(await field(client.schedule('x', { every: 'PT-5M' }))).toBe('every');
    expect(await field(client.schedule('x', { repeat: 'R-1/PT10M' }))).toBe('repeat');
    expect(await field(client.schedule('x', {}))).toBe('cron');
    expect(await field(client.schedule('x', { cron: '* * * * *', every: 'PT1M' }))).toBe('every');
    expect(await field(client.schedule('x', { every: 'PT1M', shard: 2 } as never))).toBe('shard');
    expect(await store.listSchedules()).toEqual([]);
  });
});
