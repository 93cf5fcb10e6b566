/**
 * Acquisition walks resumed after the last job leased (`@jobs/core/sql` `dialects/postgres.ts`), on a
 * real server. They resume only when walking from the head is slow (dead row versions a held
 * xmin horizon keeps: `pnpm bench long-tx`), which these small tables never make it: each test
 * lowers the thresholds so that every full batch resumes, and checks the statements sent.
 */
import { type AcquireRequest, type Job, JobEngine, refOf, silentLogger } from '@jobs/core';
import { walkResumeTuning } from '@jobs/core/sql';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PostgresJobStore } from '../src/index.js';
import {
  dropSchema,
  newJob,
  openStore,
  randomSchema,
  reachable,
  recordStatements,
  sql,
} from './helpers.js';

/** A resumed walk's own condition, as the statements carry it. */
const RESUMED = /j\.priority = \$(\d+)::int\s+AND j\.due_at >= to_timestamp/;

describe.skipIf(!reachable)('@jobs/postgres: acquisition walks resumed after the last job', () => {
  const tuning = { ...walkResumeTuning };
  let recorded: ReturnType<typeof recordStatements>;
  let schema: string;
  let store: PostgresJobStore;
  let warnings: string[];

  beforeAll(() => {
    recorded = recordStatements();
  });

  afterAll(() => {
    recorded.restore();
  });

  beforeEach(async () => {
    // Every full batch resumes, and no walk goes back to the head within a test unless it asks.
    Object.assign(walkResumeTuning, {
      slowHeadMs: 0,
      slowHeadMsPerJob: 0,
      minResumeBatch: 1,
      headEveryMinMs: 60_000,
      headEveryMaxMs: 60_000,
      resumedCostAtMost: Number.POSITIVE_INFINITY,
    });
    schema = randomSchema('resume');
    warnings = [];
    store = openStore(schema, { onWarning: (message) => warnings.push(message) });
    await store.migrate();
    recorded.sent.length = 0;
  });

  afterEach(async () => {
    Object.assign(walkResumeTuning, tuning);
    await store.close();
    await dropSchema(schema);
  });

  const request = (limit: number, owner = 'w1'): AcquireRequest => ({
    owner,
    limit,
    leaseMs: 30_000,
    types: ['w'],
    queues: null,
    tenants: null,
  });
  const resumedSent = () => recorded.sent.filter((s) => RESUMED.test(s.text));
  /** The ids of a batch, sorted: which jobs, not the order a statement returned them in. */
  const idsOf = (jobs: readonly Job[]): string[] => jobs.map((j) => j.id).sort();

  it('takes the jobs after the last one leased, every priority in order; one of its priority due before it waits for the walk from the head', async () => {
    const low = await store.enqueue(Array.from({ length: 30 }, () => newJob('w')));
    const lowIds = low.map((r) => r.job.id);

    const first = await store.acquire(request(10));
    expect(idsOf(first)).toEqual(lowIds.slice(0, 10).sort());
    expect(resumedSent()).toEqual([]);

    // A higher priority is walked from the head of its own; the same priority due before the
    // point (as a transaction that committed late, or a job given back) is behind it.
    const [high] = await store.enqueue([newJob('w', { priority: 9 })]);
    const [early] = await store.enqueue([newJob('w', { dueAt: new Date(Date.now() - 60_000) })]);
    const second = await store.acquire(request(10));
    expect(resumedSent()).toHaveLength(1);
    expect(idsOf(second)).toEqual([high?.job.id, ...lowIds.slice(10, 19)].sort());

    // The rest of the priority; not the job behind the point.
    const third = await store.acquire(request(20));
    expect(resumedSent()).toHaveLength(2);
    expect(idsOf(third)).toEqual(lowIds.slice(19).sort());

    // A lower priority is after the point too.
    const [lowest] = await store.enqueue([newJob('w', { priority: -5 })]);
    const fourth = await store.acquire(request(20));
    expect(resumedSent()).toHaveLength(3);
    expect(idsOf(fourth)).toEqual([lowest?.job.id]);

    // The next walk from the head takes the job behind the point.
    walkResumeTuning.headEveryMaxMs = 0;
    const fifth = await store.acquire(request(20));
    expect(resumedSent()).toHaveLength(3);
    expect(idsOf(fifth)).toEqual([early?.job.id]);

    const all = [first, second, third, fourth, fifth].flatMap((batch) => batch.map((j) => j.id));
    expect(new Set(all).size).toBe(33);
    // The operator hears of it once (at most every 10 minutes), with what to look for.
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/acquisitions now resume their walks.*pg_stat_activity/);
  });

  it('its plan starts the walk at the point: priority and due time are index conditions of jobs_acquire', async () => {
    await store.enqueue(Array.from({ length: 20 }, () => newJob('w')));
    await store.acquire(request(10));
    await store.acquire(request(5));
    const statement = resumedSent()[0];
    if (!statement) throw new Error('no resumed walk was sent');
    const plan = await sql<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement.text}`, statement.values);
    const lines = plan.map((row) => row['QUERY PLAN']);
    const conditions = lines.flatMap((line, i) =>
      /Index Scan using jobs_acquire/.test(line) ? [lines[i + 1] ?? ''] : [],
    );
    // Higher priorities, the resumed one, lower priorities: each starts where it must.
    expect(conditions, lines.join('\n')).toHaveLength(3);
    expect(conditions[0]).toMatch(/Index Cond: .*priority > /);
    expect(conditions[1]).toMatch(/Index Cond: .*priority = .*due_at >= /);
    expect(conditions[2]).toMatch(/Index Cond: .*priority < /);
  });

  for (const history of [false, true]) {
    it(`completing and acquiring in one statement resumes too (history ${history ? 'on' : 'off'})`, async () => {
      if (history) store.history.configure({ keep: 'all', retentionMs: 3_600_000 });
      const queued = await store.enqueue(Array.from({ length: 25 }, () => newJob('w')));
      const ids = queued.map((r) => r.job.id);
      const first = await store.acquire(request(10));
      const done = store.completeAndAcquire;
      if (!done) throw new Error('@jobs/postgres has completeAndAcquire');
      const second = await done.call(store, first.map(refOf), request(10));
      expect(second.lost).toEqual([]);
      expect(idsOf(second.jobs)).toEqual(ids.slice(10, 20).sort());
      const third = await done.call(store, second.jobs.map(refOf), request(10));
      expect(idsOf(third.jobs)).toEqual(ids.slice(20).sort());
      const resumed = resumedSent();
      expect(resumed.length).toBeGreaterThanOrEqual(2);
      // The point's parameters follow the statement's own: 12 and 13 without history records,
      // 14 and 15 with their result and duration arrays.
      expect(resumed.every((s) => s.text.match(RESUMED)?.[1] === (history ? '14' : '12'))).toBe(
        true,
      );
      expect(await store.getJob(ids[0] as string)).toBeNull();
      if (history) expect(await store.history.get(ids[0] as string)).toMatchObject({ id: ids[0] });
    });
  }

  it('two engines resuming their walks run each of 1,500 jobs once, every priority', async () => {
    const ran = new Map<string, number>();
    const stores = [openStore(schema), openStore(schema)];
    const engines = stores.map(
      (engineStore, n) =>
        new JobEngine({
          store: engineStore,
          owner: `engine-${n}`,
          logger: silentLogger,
          concurrency: 10,
          handlers: {
            w: async (job) => {
              ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
            },
          },
        }),
    );
    await store.enqueue(Array.from({ length: 1_500 }, (_, i) => newJob('w', { priority: i % 3 })));
    recorded.sent.length = 0;
    try {
      await Promise.all(engines.map((e) => e.start()));
      const started = Date.now();
      while (ran.size < 1_500 && Date.now() - started < 30_000) {
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await Promise.all(engines.map((e) => e.stop()));
      await Promise.all(stores.map((s) => s.close()));
    }
    expect(resumedSent().length).toBeGreaterThan(0);
    expect(ran.size).toBe(1_500);
    expect([...ran.values()].every((n) => n === 1)).toBe(true);
  });
});
