import type { JobStore, ScheduleFire, ScheduleRecord } from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, type Harness, makeNewJob, refOf, sleep, storeNow } from '../harness.js';

function fireOf(
  name: string,
  version: number,
  overrides: Partial<ScheduleFire> = {},
): ScheduleFire {
  return {
    name,
    version,
    nextAt: new Date(Date.UTC(2100, 0, 1)),
    overlap: 'allow',
    jobs: [
      makeNewJob({ type: 'tick', schedule: name, occurrence: new Date(Date.UTC(2026, 0, 1)) }),
    ],
    occurrences: 1,
    ...overrides,
  };
}

async function saved(store: JobStore, name: string, nextAt: Date | null): Promise<ScheduleRecord> {
  const record = await store.saveSchedule({
    name,
    spec: { every: 'PT1M', type: 'tick' },
    nextAt,
    resetProgress: false,
  });
  expect(record, `an unconditional save of ${name} returns the record`).not.toBeNull();
  return record as ScheduleRecord;
}

/**
 * Schedules, store side: upsert and versioned save, due, pause, and the compare-and-set fire
 * with overlap rules.
 */
export function schedulesGroup(h: Harness): void {
  it('saveSchedule inserts a new schedule unpaused at version 1 with no progress', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const nextAt = new Date(now + 60_000);
    const record = await store.saveSchedule({
      name: 'nightly',
      spec: { cron: '0 3 * * *', timezone: 'Europe/Berlin', payload: { deep: [1] } },
      nextAt,
      resetProgress: false,
    });
    expect(record).toMatchObject({
      name: 'nightly',
      spec: { cron: '0 3 * * *', timezone: 'Europe/Berlin', payload: { deep: [1] } },
      nextAt,
      paused: false,
      pendingMisfire: false,
      skipped: 0,
      fired: 0,
      version: 1,
    });
    expect(await store.getSchedule('nightly')).toEqual(record);
    expect(await store.getSchedule('missing')).toBeNull();
  });

  it('saveSchedule on an existing name updates spec and nextAt, bumps the version and keeps paused', async () => {
    const store = await h.open();
    await saved(store, 's', new Date(Date.UTC(2030, 0, 1)));
    await store.setSchedulePaused('s', true);
    await store.fireSchedule(fireOf('s', 2, { nextAt: new Date(Date.UTC(2030, 0, 2)) }));
    const next = new Date(Date.UTC(2031, 0, 1));
    const updated = await store.saveSchedule({
      name: 's',
      spec: { v: 2 },
      nextAt: next,
      resetProgress: false,
    });
    expect(updated).toMatchObject({
      spec: { v: 2 },
      nextAt: next,
      paused: true,
      fired: 1,
      version: 4,
    });
    const reset = await store.saveSchedule({
      name: 's',
      spec: { v: 3 },
      nextAt: null,
      resetProgress: true,
    });
    expect(reset).toMatchObject({
      spec: { v: 3 },
      nextAt: null,
      paused: true,
      fired: 0,
      skipped: 0,
      version: 5,
    });
    expect(reset!.createdAt).toEqual(updated!.createdAt);
    expect(reset!.updatedAt.getTime()).toBeGreaterThanOrEqual(updated!.updatedAt.getTime());
  });

  it('saveSchedule with a stale expectedVersion returns null and changes nothing', async () => {
    const store = await h.open();
    const created = await saved(store, 's', new Date(Date.UTC(2026, 0, 1)));
    // Another node fires between this caller's read (version 1) and its save.
    await store.fireSchedule(
      fireOf('s', created.version, { nextAt: new Date(Date.UTC(2026, 0, 2)) }),
    );
    const afterFire = await store.getSchedule('s');
    const result = await store.saveSchedule({
      name: 's',
      spec: { v: 2 },
      nextAt: created.nextAt,
      resetProgress: true,
      expectedVersion: created.version,
    });
    expect(result).toBeNull();
    expect(await store.getSchedule('s')).toEqual(afterFire);
    expect(afterFire).toMatchObject({ version: created.version + 1, fired: 1 });
    // A version that names no schedule never creates one.
    expect(
      await store.saveSchedule({
        name: 'missing',
        spec: {},
        nextAt: null,
        resetProgress: false,
        expectedVersion: 1,
      }),
    ).toBeNull();
    expect(await store.getSchedule('missing')).toBeNull();
  });

  it('saveSchedule with expectedVersion null creates a new schedule but returns null for an existing name', async () => {
    const store = await h.open();
    const nextAt = new Date(Date.UTC(2030, 0, 1));
    const created = await store.saveSchedule({
      name: 's',
      spec: { v: 1 },
      nextAt,
      resetProgress: false,
      expectedVersion: null,
    });
    expect(created).toMatchObject({ name: 's', spec: { v: 1 }, nextAt, version: 1, fired: 0 });
    const again = await store.saveSchedule({
      name: 's',
      spec: { v: 2 },
      nextAt: null,
      resetProgress: true,
      expectedVersion: null,
    });
    expect(again).toBeNull();
    expect(await store.getSchedule('s')).toEqual(created);
  });

  it('saveSchedule with the current expectedVersion updates, bumps the version and keeps paused', async () => {
    const store = await h.open();
    await saved(store, 's', new Date(Date.UTC(2030, 0, 1)));
    await store.fireSchedule(fireOf('s', 1, { nextAt: new Date(Date.UTC(2030, 0, 2)) }));
    const paused = await store.setSchedulePaused('s', true);
    const next = new Date(Date.UTC(2031, 0, 1));
    const updated = await store.saveSchedule({
      name: 's',
      spec: { v: 2 },
      nextAt: next,
      resetProgress: false,
      expectedVersion: paused!.version,
    });
    expect(updated).toMatchObject({
      spec: { v: 2 },
      nextAt: next,
      paused: true,
      fired: 1,
      version: paused!.version + 1,
    });
    expect(await store.getSchedule('s')).toEqual(updated);
    const reset = await store.saveSchedule({
      name: 's',
      spec: { v: 3 },
      nextAt: null,
      resetProgress: true,
      expectedVersion: updated!.version,
    });
    expect(reset).toMatchObject({
      spec: { v: 3 },
      nextAt: null,
      fired: 0,
      version: paused!.version + 2,
    });
  });

  it('listSchedules returns every schedule, deleteSchedule removes one and says whether it existed', async () => {
    const store = await h.open();
    await saved(store, 'b', null);
    await saved(store, 'a', null);
    expect((await store.listSchedules()).map((s) => s.name).sort()).toEqual(['a', 'b']);
    expect(await store.deleteSchedule('a')).toBe(true);
    expect(await store.deleteSchedule('a')).toBe(false);
    expect((await store.listSchedules()).map((s) => s.name)).toEqual(['b']);
  });

  it('dueSchedules returns unpaused schedules due now or with a pending misfire, by nextAt', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    await saved(store, 'later', new Date(now - 1_000));
    await saved(store, 'earlier', new Date(now - 5_000));
    await saved(store, 'future', new Date(now + 60_000));
    await saved(store, 'paused', new Date(now - 9_000));
    await saved(store, 'finished', null);
    await store.setSchedulePaused('paused', true);
    expect((await store.dueSchedules(10)).map((s) => s.name)).toEqual(['earlier', 'later']);
    expect((await store.dueSchedules(1)).map((s) => s.name)).toEqual(['earlier']);
    // A coalesced fire makes a not-yet-due schedule due.
    const future = (await store.getSchedule('future'))!;
    await store.enqueue([makeNewJob({ schedule: 'future' })]);
    const fired = await store.fireSchedule(
      fireOf('future', future.version, { overlap: 'coalesce', nextAt: new Date(now + 120_000) }),
    );
    expect(fired.status).toBe('coalesced');
    expect((await store.dueSchedules(10)).map((s) => s.name)).toContain('future');
  });

  it('setSchedulePaused pauses and resumes, bumps the version, and returns null for unknown names', async () => {
    const store = await h.open();
    const created = await saved(store, 's', new Date((await storeNow(store)) - 1000));
    const paused = await store.setSchedulePaused('s', true);
    expect(paused).toMatchObject({ paused: true, version: created.version + 1 });
    expect(await store.dueSchedules(10)).toEqual([]);
    const resumed = await store.setSchedulePaused('s', false);
    expect(resumed).toMatchObject({ paused: false, version: created.version + 2 });
    expect(await store.dueSchedules(10)).toHaveLength(1);
    expect(await store.setSchedulePaused('missing', true)).toBeNull();
  });

  it('fireSchedule inserts the occurrence’s jobs, moves nextAt, bumps version and counts the fire', async () => {
    const store = await h.open();
    const created = await saved(store, 's', new Date(Date.UTC(2026, 0, 1)));
    const nextAt = new Date(Date.UTC(2026, 0, 1, 0, 1));
    const occurrence = new Date(Date.UTC(2026, 0, 1));
    const result = await store.fireSchedule(
      fireOf('s', created.version, {
        nextAt,
        occurrences: 2,
        jobs: [0, 1].map((index) =>
          makeNewJob({
            type: 'tick',
            schedule: 's',
            occurrence,
            shard: { index, count: 2 },
            scope: `s#${index}`,
            exclusive: true,
          }),
        ),
      }),
    );
    expect(result.status).toBe('fired');
    expect(result.jobs.map((j) => j.shard)).toEqual([
      { index: 0, count: 2 },
      { index: 1, count: 2 },
    ]);
    for (const job of result.jobs) {
      await h.expectStored(store, job.id, {
        schedule: 's',
        occurrence,
        state: 'async',
        type: 'tick',
      });
    }
    expect(await store.getSchedule('s')).toMatchObject({
      nextAt,
      version: created.version + 1,
      fired: 2,
      pendingMisfire: false,
    });
  });

  it('fireSchedule with a stale version changes nothing and reports a conflict', async () => {
    const store = await h.open();
    const created = await saved(store, 's', new Date(Date.UTC(2026, 0, 1)));
    await store.setSchedulePaused('s', false); // version 2
    const result = await store.fireSchedule(fireOf('s', created.version));
    expect(result).toEqual({ status: 'conflict', jobs: [] });
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
    expect(await store.getSchedule('s')).toMatchObject({ version: 2, fired: 0 });
    expect((await store.fireSchedule(fireOf('s', 999))).status).toBe('conflict');
    expect((await store.fireSchedule(fireOf('missing', 1))).status).toBe('conflict');
  });

  it('fireSchedule with a dueAt ahead of the store’s clock changes nothing; at or before it, it fires', async () => {
    const store = await h.open();
    const now = await storeNow(store);
    const created = await saved(store, 's', new Date(now - 1_000));
    // A runner whose clock runs 40 s ahead computed an occurrence the store has not reached.
    const early = await store.fireSchedule(
      fireOf('s', created.version, { dueAt: new Date(now + 40_000) }),
    );
    expect(early).toEqual({ status: 'conflict', jobs: [] });
    expect(await store.listJobs({ limit: 10, offset: 0 })).toEqual([]);
    expect(await store.getSchedule('s')).toMatchObject({
      version: created.version,
      fired: 0,
      nextAt: new Date(now - 1_000),
    });
    const due = await store.fireSchedule(
      fireOf('s', created.version, { dueAt: new Date(now - 1_000) }),
    );
    expect(due.status).toBe('fired');
    expect(await store.getSchedule('s')).toMatchObject({ version: created.version + 1, fired: 1 });
  });

  it('overlap skip drops a fire while an occurrence is unfinished (timer, async or running) and counts it', async () => {
    const store = await h.open();
    let version = (await saved(store, 's', new Date(Date.UTC(2026, 0, 1)))).version;
    const first = await store.fireSchedule(fireOf('s', version, { overlap: 'skip' }));
    expect(first.status).toBe('fired');
    version += 1;
    // async
    const second = await store.fireSchedule(fireOf('s', version++, { overlap: 'skip' }));
    expect(second).toEqual({ status: 'skipped', jobs: [] });
    // running
    const [held] = await acquire(store, { types: ['tick'] });
    expect((await store.fireSchedule(fireOf('s', version++, { overlap: 'skip' }))).status).toBe(
      'skipped',
    );
    // timer (failed, waiting for retry)
    await store.fail([
      {
        ...refOf(held!),
        error: { message: 'x', stack: null },
        deadletter: false,
        retryDelayMs: 60_000,
      },
    ]);
    expect((await store.fireSchedule(fireOf('s', version++, { overlap: 'skip' }))).status).toBe(
      'skipped',
    );
    const nextAt = new Date(Date.UTC(2027, 0, 1));
    expect(
      (await store.fireSchedule(fireOf('s', version++, { overlap: 'skip', nextAt }))).status,
    ).toBe('skipped');
    expect(await store.getSchedule('s')).toMatchObject({ skipped: 4, fired: 1, version, nextAt });
    expect(await store.listJobs({ limit: 10, offset: 0 })).toHaveLength(1);
  });

  it('deadletter and suspended jobs of a schedule do not count as unfinished for overlap', async () => {
    const store = await h.open();
    let version = (await saved(store, 's', new Date(Date.UTC(2026, 0, 1)))).version;
    await store.fireSchedule(fireOf('s', version++, { overlap: 'skip' }));
    const [held] = await acquire(store, { types: ['tick'] });
    await store.fail([
      { ...refOf(held!), error: { message: 'x', stack: null }, deadletter: true, retryDelayMs: 0 },
    ]);
    const second = await store.fireSchedule(fireOf('s', version++, { overlap: 'skip' }));
    expect(second.status).toBe('fired');
    await store.suspend({ schedule: 's' });
    expect((await store.fireSchedule(fireOf('s', version++, { overlap: 'skip' }))).status).toBe(
      'fired',
    );
  });

  it('overlap coalesce marks a pending misfire while busy; the next successful fire clears it', async () => {
    const store = await h.open();
    let version = (await saved(store, 's', new Date(Date.UTC(2026, 0, 1)))).version;
    await store.fireSchedule(fireOf('s', version++, { overlap: 'coalesce' }));
    for (let i = 0; i < 3; i++) {
      const r = await store.fireSchedule(fireOf('s', version++, { overlap: 'coalesce' }));
      expect(r).toEqual({ status: 'coalesced', jobs: [] });
    }
    expect(await store.getSchedule('s')).toMatchObject({
      pendingMisfire: true,
      fired: 1,
      skipped: 0,
    });
    const [held] = await acquire(store, { types: ['tick'] });
    await store.complete([refOf(held!)]);
    const catchUp = await store.fireSchedule(fireOf('s', version++, { overlap: 'coalesce' }));
    expect(catchUp.status).toBe('fired');
    expect(catchUp.jobs).toHaveLength(1);
    expect(await store.getSchedule('s')).toMatchObject({
      pendingMisfire: false,
      fired: 2,
      version,
    });
  });

  it('overlap allow fires while an occurrence is still running', async () => {
    const store = await h.open();
    let version = (await saved(store, 's', new Date(Date.UTC(2026, 0, 1)))).version;
    await store.fireSchedule(fireOf('s', version++));
    await acquire(store, { types: ['tick'] });
    const again = await store.fireSchedule(fireOf('s', version++));
    expect(again.status).toBe('fired');
    expect(await store.listJobs({ limit: 10, offset: 0, schedule: 's' })).toHaveLength(2);
  });

  it('fired jobs follow enqueue rules for keys: an unfinished key holder is returned, not duplicated', async () => {
    const store = await h.open();
    let version = (await saved(store, 's', new Date(Date.UTC(2026, 0, 1)))).version;
    const jobs = [makeNewJob({ type: 'tick', schedule: 's', key: 'occurrence-1' })];
    const first = await store.fireSchedule(fireOf('s', version++, { jobs }));
    const second = await store.fireSchedule(fireOf('s', version++, { jobs }));
    expect(second.status).toBe('fired');
    expect(second.jobs.map((j) => j.id)).toEqual(first.jobs.map((j) => j.id));
    expect(await store.listJobs({ limit: 10, offset: 0 })).toHaveLength(1);
  });

  it(
    'peers saving the same new schedule at once all succeed and leave one schedule',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      for (let round = 0; round < Math.min(h.rounds, 5); round++) {
        const name = `race-${round}`;
        const records = await Promise.all(
          peers.map((peer, i) =>
            peer.saveSchedule({
              name,
              spec: { peer: i },
              nextAt: new Date(Date.UTC(2030, 0, 1)),
              resetProgress: false,
            }),
          ),
        );
        const versions = records.map((r) => r!.version).sort((a, b) => a - b);
        expect(versions, `round ${round}`).toEqual(
          Array.from({ length: peers.length }, (_, i) => i + 1),
        );
      }
      expect((await store.listSchedules()).length).toBe(Math.min(h.rounds, 5));
    },
    h.raceTimeout(),
  );

  it(
    'peers firing the same version at once: exactly one fires, the others conflict (many rounds)',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store);
      let version = (await saved(store, 's', new Date(Date.UTC(2026, 0, 1)))).version;
      for (let round = 0; round < h.rounds; round++) {
        const occurrence = new Date(Date.UTC(2026, 0, 1, 0, round));
        const results = await Promise.all(
          peers.map((peer, i) =>
            peer.fireSchedule(
              fireOf('s', version, {
                nextAt: new Date(occurrence.getTime() + 60_000),
                jobs: [0, 1].map((index) =>
                  makeNewJob({
                    type: 'tick',
                    schedule: 's',
                    occurrence,
                    payload: { peer: i },
                    shard: { index, count: 2 },
                  }),
                ),
              }),
            ),
          ),
        );
        const statuses = results.map((r) => r.status);
        expect(
          statuses.filter((st) => st === 'fired'),
          `round ${round}: ${statuses}`,
        ).toHaveLength(1);
        expect(
          statuses.filter((st) => st === 'conflict'),
          `round ${round}`,
        ).toHaveLength(peers.length - 1);
        version += 1;
      }
      const jobs = await store.listJobs({ limit: 1000, offset: 0 });
      expect(jobs).toHaveLength(h.rounds * 2);
      const occurrences = new Set(jobs.map((j) => j.occurrence!.getTime()));
      expect(occurrences.size).toBe(h.rounds);
      expect(await store.getSchedule('s')).toMatchObject({ fired: h.rounds, version });
    },
    h.raceTimeout(),
  );

  it(
    'a save with the version a racing fire also read never moves nextAt back behind the fired occurrence (many rounds)',
    async () => {
      const store = await h.open();
      const [firer, definer] = (await h.peers(store, 2)) as [JobStore, JobStore];
      const minute = 60_000;
      const start = Date.UTC(2026, 0, 1);
      await saved(store, 's', new Date(start));
      let fires = 0;
      for (let round = 0; round < h.rounds; round++) {
        // Both read the same version: the firer moves nextAt on by a minute, the definer keeps the
        // trigger (new spec, same nextAt). Exactly one may win.
        const read = (await store.getSchedule('s'))!;
        const occurrence = read.nextAt!;
        const fire = () =>
          firer.fireSchedule(
            fireOf('s', read.version, {
              nextAt: new Date(occurrence.getTime() + minute),
              jobs: [makeNewJob({ type: 'tick', schedule: 's', occurrence })],
            }),
          );
        const save = () =>
          definer.saveSchedule({
            name: 's',
            spec: { every: 'PT1M', type: 'tick', round },
            nextAt: occurrence,
            resetProgress: false,
            expectedVersion: read.version,
          });
        // Alternate which call starts first and stagger the other by 0–4 ms, so that on every
        // store either may reach it first (a one-statement save outruns a fire transaction).
        const lag = round % 5;
        const [fired, stored] = await Promise.all(
          round % 2 === 0
            ? ([fire(), sleep(lag).then(save)] as const)
            : ([sleep(lag).then(fire), save()] as const),
        );
        const after = (await store.getSchedule('s'))!;
        if (fired.status === 'fired') {
          fires += 1;
          expect(
            after.nextAt!.getTime(),
            `round ${round}: nextAt behind the fired occurrence`,
          ).toBe(occurrence.getTime() + minute);
          expect(stored, `round ${round}: the save with the stale version must fail`).toBeNull();
        } else {
          expect(fired.status, `round ${round}`).toBe('conflict');
          expect(stored, `round ${round}: one of the two must win`).not.toBeNull();
          expect(after.nextAt, `round ${round}`).toEqual(occurrence);
        }
        expect(after.version, `round ${round}: exactly one write`).toBe(read.version + 1);
      }
      const final = (await store.getSchedule('s'))!;
      expect(final.nextAt!.getTime()).toBe(start + fires * minute);
      expect(final.fired).toBe(fires);
      expect(await store.listJobs({ limit: 1000, offset: 0, schedule: 's' })).toHaveLength(fires);
    },
    h.raceTimeout(),
  );
}
