/**
 * Limited (exclusive) scopes under races that a snapshot-only check gets wrong, on every SQL
 * database: while peers acquire, another connection inserts higher-priority exclusive jobs into
 * the same scope and completes what is running (after every round, at most one job of the scope
 * runs); and four stores race over jobs whose due times cross now (no two exclusive jobs of a
 * scope run at once). Were `packages/postgres/test/exclusive-race.test.ts` and a test of
 * `packages/mysql/test/store.test.ts`, each on its own database only.
 */
import { makeNewJob, sleep } from '@jobs/conformance';
import { type AcquireRequest, type Job, refOf } from '@jobs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, type Place, type SqlStore } from './databases.js';

const ROUNDS = 40;
const PEERS = 4;

describe.each(DATABASES)('$name: limited scopes under racing acquirers and inserters', (db) => {
  let place: Place;
  let store: SqlStore;
  let peers: SqlStore[] = [];

  beforeAll(async () => {
    if (db.missing) return;
    place = await db.create();
    store = place.open();
    await store.migrate();
    peers = Array.from({ length: PEERS }, () => place.open({ connections: 2 }));
  });
  afterAll(async () => {
    await Promise.all(peers.map((p) => p.close()));
    await store?.close();
    await place?.drop();
  });

  it.skipIf(db.missing)(
    'never runs two jobs of one scope, whatever is inserted or completed meanwhile',
    async () => {
      const request = (owner: string): AcquireRequest => ({
        owner,
        limit: 3,
        leaseMs: 60_000,
        types: ['a'],
        queues: null,
        tenants: null,
      });
      const limited = (priority = 0) =>
        makeNewJob({ type: 'a', scope: 's', exclusive: true, priority });
      await store.enqueue(Array.from({ length: 5 }, () => limited()));
      let held: Job[] = [];
      let started = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const [acquired] = await Promise.all([
          Promise.all(peers.map((p, i) => p.acquire(request(`p${i}`)))),
          // A new head of the scope appears (higher priority) while peers decide.
          store.enqueue([limited(round)]),
          // …and what ran so far finishes, now or never.
          round % 2 === 0
            ? store.complete(held.map((j) => ({ id: j.id, token: j.lockToken as string })))
            : Promise.resolve({ lost: [] }),
        ]);
        const got = acquired.flat();
        started += got.length;
        expect(got.length).toBeLessThanOrEqual(1);
        if (round % 2 === 0) held = [];
        held.push(...got);
        const running = await place.sql(
          `SELECT count(*) AS n FROM ${place.jobs} WHERE scope = 's' AND state = 'running'`,
        );
        expect(Number(running[0]?.n)).toBeLessThanOrEqual(1);
      }
      // Not vacuous: jobs did start while racing (how many depends on who wins each race: a
      // loaded machine lets the completions land late, and few start), and once what runs
      // is completed, the scope's next job starts.
      expect(started).toBeGreaterThan(0);
      await store.complete(held.map((j) => ({ id: j.id, token: j.lockToken as string })));
      const next = (await Promise.all(peers.map((p, i) => p.acquire(request(`p${i}`))))).flat();
      expect(next).toHaveLength(1);
    },
  );
  it.skipIf(db.missing)(
    'four stores racing, with due times crossing now, never run two exclusive jobs of a scope at once',
    async () => {
      await store.enqueue(
        Array.from({ length: 200 }, (_, i) =>
          makeNewJob({
            scope: `r${i % 5}`,
            exclusive: i % 7 !== 0,
            priority: i % 3,
            // some due in the past, some becoming due while the race runs
            delayMs: i % 4 === 0 ? 20 + (i % 13) * 15 : -(i % 11) * 10,
            payload: { i },
          }),
        ),
      );
      const running = new Map<string, string>(); // scope → job id of the running exclusive job
      const violations: string[] = [];
      let done = 0;
      const worker = async (peer: SqlStore, n: number): Promise<void> => {
        let idle = 0;
        while (done < 200 && idle < 400) {
          const got = await peer.acquire({
            owner: `racer-${n}`,
            limit: 4,
            leaseMs: 30_000,
            types: ['work'],
            queues: null,
            tenants: null,
          });
          if (got.length === 0) {
            idle += 1;
            await sleep(2);
            continue;
          }
          idle = 0;
          for (const job of got) {
            if (job.exclusive && job.scope) {
              const holder = running.get(job.scope);
              if (holder) violations.push(`${job.scope}: ${job.id} while ${holder}`);
              running.set(job.scope, job.id);
            }
          }
          await sleep(Math.random() * 3);
          for (const job of got) {
            if (job.exclusive && job.scope && running.get(job.scope) === job.id) {
              running.delete(job.scope);
            }
          }
          const { lost } = await peer.complete(got.map(refOf));
          expect(lost).toEqual([]);
          done += got.length;
        }
      };
      await Promise.all([store, ...peers.slice(0, 3)].map((p, n) => worker(p, n)));
      expect(violations).toEqual([]);
      expect(done).toBe(200);
      expect(await store.listJobs({ type: 'work', limit: 10, offset: 0 })).toEqual([]);
    },
  );
});
