import { makeNewJob } from '@jobs/conformance';
import type { NewJob } from '@jobs/core';
import Database from 'better-sqlite3';
import type { DataSourceOptions } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { TypeormJobStore } from '../src/index.js';
import { createTestDatabase, type Driver, openDataSource, type TestDatabase } from './databases.js';

const job = (over: Partial<NewJob> = {}): NewJob =>
  makeNewJob({ type: 'a', payload: { x: 1 }, ...over });

/**
 * Runs `test` on a migrated store over a fresh database of `driver` (its DataSource options
 * amended by `dataSourceOptions`), then closes the store and drops the database.
 */
async function withStore(
  driver: Driver,
  test: (store: TypeormJobStore, db: TestDatabase) => Promise<void>,
  dataSourceOptions: Record<string, unknown> = {},
): Promise<void> {
  const db = await createTestDatabase(driver);
  const options = { ...db.options, ...dataSourceOptions } as DataSourceOptions;
  const ds = await openDataSource({ ...db, options });
  const store = new TypeormJobStore({ dataSource: ds, destroyDataSourceOnClose: true });
  try {
    await store.migrate();
    await test(store, db);
  } finally {
    await store.close();
    await db.drop();
  }
}

describe.each(['better-sqlite3', 'postgres', 'mysql'] as const)('%s smoke', (driver) => {
  it('does the basics', async () => {
    await withStore(driver, async (store) => {
      await store.migrate();
      const now = await store.now();
      expect(Math.abs(now.getTime() - Date.now())).toBeLessThan(5000);
      const r = await store.enqueue([
        job({ key: 'k' }),
        job({ key: 'k' }),
        job({ priority: 5 }),
        job({ delayMs: 60_000 }),
      ]);
      expect(r.map((x) => x.created)).toEqual([true, false, true, true]);
      expect(r[3]?.job.state).toBe('timer');
      const got = await store.acquire({
        owner: 'o',
        limit: 10,
        leaseMs: 1000,
        types: ['a'],
        queues: null,
        tenants: null,
      });
      expect(got.map((j) => j.id)).toEqual([r[2]?.job.id, r[0]?.job.id]);
      expect(got[0]?.state).toBe('running');
      const refs = got.map((j) => ({ id: j.id, token: j.lockToken as string }));
      expect(await store.renewLeases('o', 2000, refs)).toEqual({ lost: [] });
      expect(await store.complete([refs[0]!, { id: refs[1]!.id, token: 'x' }])).toEqual({
        lost: [refs[1]!.id],
      });
      expect(
        await store.fail([
          { ...refs[1]!, error: { message: 'm', stack: 's' }, deadletter: false, retryDelayMs: 10 },
        ]),
      ).toEqual({ lost: [] });
      const failed = await store.getJob(refs[1]!.id);
      expect(failed?.state).toBe('timer');
      expect(failed?.lastError).toEqual({ message: 'm', stack: 's' });
      expect(await store.getJob('nope')).toBeNull();
      expect((await store.stats()).length).toBeGreaterThan(0);
      expect(await store.suspend({ type: 'a' })).toBe(2);
      expect(await store.activate({ type: 'a' })).toBe(2);
      const s = await store.saveSchedule({
        name: 's',
        spec: { a: 1 },
        nextAt: new Date(Date.now() - 1000),
        resetProgress: false,
      });
      expect(s!.version).toBe(1);
      expect((await store.dueSchedules(10)).map((x) => x.name)).toEqual(['s']);
      const f = await store.fireSchedule({
        name: 's',
        version: 1,
        nextAt: new Date(Date.now() + 60_000),
        overlap: 'skip',
        jobs: [job({ schedule: 's' })],
        occurrences: 1,
      });
      expect(f.status).toBe('fired');
      const f2 = await store.fireSchedule({
        name: 's',
        version: 2,
        nextAt: new Date(Date.now() + 60_000),
        overlap: 'skip',
        jobs: [job({ schedule: 's' })],
        occurrences: 1,
      });
      expect(f2.status).toBe('skipped');
      expect(
        (
          await store.fireSchedule({
            name: 's',
            version: 2,
            nextAt: null,
            overlap: 'skip',
            jobs: [],
            occurrences: 1,
          })
        ).status,
      ).toBe('conflict');
      expect(await store.nextDueAt({ types: ['a'], queues: null, tenants: null })).toBeInstanceOf(
        Date,
      );
      expect(await store.recoverExpiredLeases(10)).toEqual({ requeued: [], deadlettered: [] });
    });
  });
});

describe.each(['better-sqlite3', 'postgres', 'mysql'] as const)('%s large batches', (driver) => {
  it('settles 2,500 jobs in one call (statements are chunked under parameter limits)', async () => {
    await withStore(driver, async (store) => {
      await store.enqueue(Array.from({ length: 2_500 }, (_, i) => job({ payload: { i } })));
      const got = await store.acquire({
        owner: 'o',
        limit: 2_500,
        leaseMs: 60_000,
        types: ['a'],
        queues: null,
        tenants: null,
      });
      expect(got).toHaveLength(2_500);
      const refs = got.map((j) => ({ id: j.id, token: j.lockToken as string }));
      expect(await store.renewLeases('o', 60_000, refs)).toEqual({ lost: [] });
      const stale = { id: refs[0]!.id, token: 'stale' };
      expect(await store.complete([...refs.slice(1), stale])).toEqual({ lost: [refs[0]!.id] });
      expect((await store.stats()).map((s) => s.count)).toEqual([1]);
    });
  });
});

describe.each(['better-sqlite3', 'postgres', 'mysql'] as const)(
  '%s completeAndAcquire',
  (driver) => {
    it('deletes the finished jobs held with their tokens, reports stale and malformed refs lost, and leases the next ones', async () => {
      await withStore(driver, async (store) => {
        const [a, b, c] = await store.enqueue([job(), job(), job()]);
        const request = {
          owner: 'o',
          limit: 2,
          leaseMs: 60_000,
          types: ['a'],
          queues: null,
          tenants: null,
        };
        const first = await store.acquire(request);
        expect(first.map((j) => j.id)).toEqual([a!.job.id, b!.job.id]);
        const result = await store.completeAndAcquire(
          [
            { id: a!.job.id, token: first[0]!.lockToken as string },
            { id: b!.job.id, token: 'stale' },
            { id: 'abc', token: 'x' },
          ],
          { ...request, owner: 'o2' },
        );
        expect(result.lost).toEqual([b!.job.id, 'abc']);
        expect(result.jobs.map((j) => [j.id, j.lockOwner, j.state])).toEqual([
          [c!.job.id, 'o2', 'running'],
        ]);
        expect(await store.getJob(a!.job.id)).toBeNull();
        expect((await store.getJob(b!.job.id))?.lockOwner).toBe('o');
      });
    });
  },
);

describe('mysql schedule create', () => {
  it('a schedule MySQL cannot store fails loudly instead of being stored altered', async () => {
    await withStore('mysql', async (store) => {
      // DATETIME ends at 9999; a plain INSERT rejects the value, `INSERT IGNORE` would store a
      // zero date with a warning instead.
      const beyond = new Date('+010000-01-01T00:00:00.000Z');
      for (const expectedVersion of [undefined, null]) {
        await expect(
          store.saveSchedule({
            name: `far-${String(expectedVersion)}`,
            spec: { a: 1 },
            nextAt: beyond,
            resetProgress: false,
            expectedVersion,
          }),
        ).rejects.toThrow(/Incorrect datetime value.*next_at/);
      }
      expect(await store.listSchedules()).toEqual([]);
      // A name that exists still makes create-only return null and an upsert update in place.
      const base = { spec: { a: 1 }, nextAt: new Date(Date.now() + 60_000), resetProgress: false };
      expect(
        (await store.saveSchedule({ ...base, name: 's', expectedVersion: null }))?.version,
      ).toBe(1);
      expect(await store.saveSchedule({ ...base, name: 's', expectedVersion: null })).toBeNull();
      expect((await store.saveSchedule({ ...base, name: 's', spec: { a: 2 } }))?.spec).toEqual({
        a: 2,
      });
    });
  });
});

describe('better-sqlite3 acquire', () => {
  it('with nothing due, acquire reads without the write lock; with a due job it takes it', async () => {
    // A short busy timeout, so an acquisition that waits for the lock fails quickly.
    await withStore(
      'better-sqlite3',
      async (store, db) => {
        const request = {
          owner: 'o',
          limit: 10,
          leaseMs: 60_000,
          types: ['a'],
          queues: null,
          tenants: null,
        };
        const [due] = await store.enqueue([job({ type: 'other' }), job({ delayMs: 60_000 })]);
        // Another process holds the write lock, as a long write transaction would.
        const writer = new Database(String(db.options.database));
        writer.exec('BEGIN IMMEDIATE');
        try {
          // Nothing of type `a` is due: answered at once, not after the busy timeout.
          expect(await store.acquire(request)).toEqual([]);
          // A due `other` job is leased under the lock, so this one waits and gives up.
          await expect(store.acquire({ ...request, types: ['other'] })).rejects.toThrow(
            /locked|busy/i,
          );
        } finally {
          writer.exec('ROLLBACK');
          writer.close();
        }
        const got = await store.acquire({ ...request, types: ['other'] });
        expect(got.map((j) => j.id)).toEqual([due!.job.id]);
      },
      { timeout: 100 },
    );
  });
});
