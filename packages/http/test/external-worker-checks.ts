/**
 * The external-worker group: the store invariants (DESIGN 24) held through the HTTP API, over
 * real sockets, on a real store. `runExternalWorkerChecks(name, createStore)` defines it for one
 * store; each store's test file is a few lines. Tests share one migrated store and use job types
 * of their own, so they never see each other's jobs. Leases are short (200 ms) and waits end on
 * events (a long-poll that returns a job), never on sleeps.
 */
import {
  ChildJobError,
  type Job,
  JobAdmin,
  type JobContext,
  JobEngine,
  type JobStore,
} from '@jobs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  newToken,
  newType,
  post,
  type Served,
  type StoreFactory,
  serveApi,
  snapshot,
} from './harness.js';

const LEASE_MS = 200;

export function runExternalWorkerChecks(name: string, createStore: StoreFactory): void {
  describe(`external workers over HTTP (${name})`, () => {
    let store: JobStore;
    let drop: () => Promise<void>;
    let engine: JobEngine;
    let admin: JobAdmin;
    let served: Served;
    // One type per test, each client allowed the types of its test.
    const types = {
      owner: newType('owner'),
      fused: newType('fused'),
      stale: newType('stale'),
      lapse: newType('lapse'),
      cancel: newType('cancel'),
      retry: newType('retry'),
      scope: newType('scope'),
      hostile: newType('hostile'),
      other: newType('other'),
      wake: newType('wake'),
      history: newType('history'),
      rate: newType('rate'),
      parent: newType('parent'),
      child: newType('child'),
    };
    const worker = newToken();
    const otherWorker = newToken();

    beforeAll(async () => {
      ({ store, drop } = await createStore());
      // A client engine (no handlers): it enqueues and nothing else; no engine runs jobs.
      engine = new JobEngine({ store });
      admin = new JobAdmin(store);
      served = await serveApi({
        store,
        clients: [
          {
            token: worker,
            name: 'worker',
            types: Object.values(types).filter((t) => t !== types.other),
          },
          { token: otherWorker, name: 'other', types: [types.other, types.lapse] },
        ],
        pollMs: 50,
        history: { keep: 'all' },
        ...(store.rateLimits ? { rateLimits: { [types.rate]: { max: 2, perMs: 60_000 } } } : {}),
        logger: { debug() {}, info() {}, warn() {}, error() {} },
      });
    });

    afterAll(async () => {
      await served?.close();
      await store?.close();
      await drop?.();
    });

    const acquire = (token: string, body: object) => post(`${served.url}/acquire`, token, body);
    const act = (id: string, action: string, token: string | null, body: unknown) =>
      post(`${served.url}/jobs/${id}/${action}`, token, body);

    it('acquire never hands one job to two remote workers', async () => {
      const jobs = [];
      for (let n = 0; n < 20; n++) jobs.push(await engine.enqueue(types.owner, { n }));
      const answers = await Promise.all(
        ['a', 'b', 'c', 'd'].map((w) =>
          acquire(worker, { types: [types.owner], max: 10, leaseMs: 5_000, worker: w }),
        ),
      );
      const ids = answers.flatMap((a) => a.body.jobs.map((j: { id: string }) => j.id));
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.sort()).toEqual(jobs.map((j) => j.id).sort());
      const held = answers.flatMap((a) => a.body.jobs);
      for (const job of held)
        expect((await act(job.id, 'complete', worker, { token: job.token })).status).toBe(200);
      expect(await store.getJob(held[0].id)).toBeNull();
    });

    it('a batch completion settles each job on its own: a stale token in it changes only its answer', async () => {
      const jobs = [];
      for (let n = 0; n < 3; n++) jobs.push(await engine.enqueue(types.owner, { n }));
      const held = (await acquire(worker, { types: [types.owner], max: 3, leaseMs: 5_000 })).body
        .jobs;
      expect(held).toHaveLength(3);
      const [a, b, c] = held;
      const answer = await post(`${served.url}/complete`, worker, {
        jobs: [
          { id: a.id, token: a.token, result: { n: 1 } },
          { id: b.id, token: 'not-its-token' },
          { id: c.id, token: c.token },
        ],
      });
      expect(answer.status).toBe(200);
      expect(answer.body.results).toEqual([
        { id: a.id, outcome: 'completed' },
        {
          id: b.id,
          problem: expect.objectContaining({ type: 'urn:jobs:http:lease-lost', status: 409 }),
        },
        { id: c.id, outcome: 'completed' },
      ]);
      expect(await store.getJob(a.id)).toBeNull();
      expect((await store.getJob(b.id))?.lockToken).toBe(b.token);
      expect(await store.getJob(c.id)).toBeNull();
      const other = await post(`${served.url}/complete`, otherWorker, {
        jobs: [{ id: b.id, token: b.token }],
      });
      expect(other.body.results[0].problem.status).toBe(403);
      expect((await act(b.id, 'complete', worker, { token: b.token })).status).toBe(200);
    });

    it('an acquire carrying completions settles each on its own, then acquires: a stale token in it changes only its answer', async () => {
      const jobs = [];
      for (let n = 0; n < 4; n++) jobs.push(await engine.enqueue(types.owner, { n }));
      const held = (await acquire(worker, { types: [types.owner], max: 2, leaseMs: 5_000 })).body
        .jobs;
      expect(held).toHaveLength(2);
      const [a, b] = held;
      const next = await acquire(worker, {
        types: [types.owner],
        max: 2,
        leaseMs: 5_000,
        complete: [
          { id: a.id, token: a.token, result: { n: 1 } },
          { id: b.id, token: 'not-its-token' },
        ],
      });
      expect(next.status).toBe(200);
      expect(next.body.results).toEqual([
        { id: a.id, outcome: 'completed' },
        {
          id: b.id,
          problem: expect.objectContaining({ type: 'urn:jobs:http:lease-lost', status: 409 }),
        },
      ]);
      expect(await store.getJob(a.id)).toBeNull();
      expect((await store.getJob(b.id))?.lockToken).toBe(b.token);
      const rest = next.body.jobs;
      expect(rest.map((j: { id: string }) => j.id).sort()).toEqual(
        jobs
          .slice(2)
          .map((j) => j.id)
          .sort(),
      );
      // Only the jobs it names are completed; none acquired is, and a job twice is a 400.
      expect(
        (
          await acquire(worker, {
            types: [types.owner],
            complete: [
              { id: b.id, token: b.token },
              { id: b.id, token: b.token },
            ],
          })
        ).status,
      ).toBe(400);
      const last = await acquire(worker, {
        types: [types.owner],
        complete: [b, ...rest].map((j: { id: string; token: string }) => ({
          id: j.id,
          token: j.token,
        })),
      });
      expect(last.body.results.map((r: { outcome?: string }) => r.outcome)).toEqual([
        'completed',
        'completed',
        'completed',
      ]);
      expect(last.body.jobs).toEqual([]);
      for (const job of jobs) expect(await store.getJob(job.id)).toBeNull();
      // Without `complete`, the answer has no `results`: old clients see what they saw.
      expect((await acquire(worker, { types: [types.owner] })).body).toEqual({ jobs: [] });
    });

    it('an acquire carrying completions refuses, each on its own, a job of a type the client may not work and a job whose cancel came after it was acquired', async () => {
      const jobs = [];
      for (let n = 0; n < 3; n++) jobs.push(await engine.enqueue(types.fused, { n }));
      const held = (await acquire(worker, { types: [types.fused], max: 3, leaseMs: 5_000 })).body
        .jobs;
      expect(held).toHaveLength(3);
      const [a, b, c] = held;
      // Another client may not end this client's job, even with its token.
      const foreign = await acquire(otherWorker, {
        types: [types.other],
        complete: [{ id: a.id, token: a.token }],
      });
      expect(foreign.status).toBe(200);
      expect(foreign.body.results).toEqual([
        {
          id: a.id,
          problem: expect.objectContaining({ type: 'urn:jobs:http:forbidden', status: 403 }),
        },
      ]);
      expect(foreign.body.jobs).toEqual([]);
      expect((await store.getJob(a.id))?.lockToken).toBe(a.token);
      // A cancel requested while the worker held the job wins over its completion.
      const cancellable = store.cancellation !== undefined;
      if (cancellable) expect(await admin.cancel(b.id)).toBe('requested');
      const next = await acquire(worker, {
        types: [types.fused],
        complete: held.map((j: { id: string; token: string }) => ({ id: j.id, token: j.token })),
      });
      expect(next.status).toBe(200);
      expect(next.body.results).toEqual([
        { id: a.id, outcome: 'completed' },
        cancellable
          ? {
              id: b.id,
              problem: expect.objectContaining({ type: 'urn:jobs:http:cancelled', status: 409 }),
            }
          : { id: b.id, outcome: 'completed' },
        { id: c.id, outcome: 'completed' },
      ]);
      expect(next.body.jobs).toEqual([]);
      for (const job of jobs) expect(await store.getJob(job.id)).toBeNull();
      // Their tokens end nothing now.
      expect((await act(c.id, 'complete', worker, { token: c.token })).status).toBe(409);
    });

    it('a stale or foreign token is refused with 409 and changes nothing', async () => {
      const a = await engine.enqueue(types.stale, { n: 1 });
      const b = await engine.enqueue(types.stale, { n: 2 });
      // Two acquisitions: a store may give every job of one batch the same token.
      const [first] = (await acquire(worker, { types: [types.stale], leaseMs: 5_000 })).body.jobs;
      const [second] = (await acquire(worker, { types: [types.stale], leaseMs: 5_000 })).body.jobs;
      const before = snapshot(await store.getJob(first.id));
      for (const action of ['extend', 'complete', 'fail', 'release']) {
        const answer = await act(first.id, action, worker, {
          token: second.token, // another lease's token
          ...(action === 'fail' ? { error: 'boom' } : {}),
        });
        expect(answer.status, action).toBe(409);
        expect(answer.type).toBe('application/problem+json');
        expect(answer.body.type).toBe('urn:jobs:http:lease-lost');
      }
      expect((await act(first.id, 'complete', worker, { token: 'made-up-token' })).status).toBe(
        409,
      );
      expect(snapshot(await store.getJob(first.id))).toEqual(before);
      expect((await act(first.id, 'complete', worker, { token: first.token })).status).toBe(200);
      // The token of a finished lease changes nothing either.
      expect((await act(first.id, 'complete', worker, { token: first.token })).status).toBe(409);
      expect((await act(second.id, 'release', worker, { token: second.token })).status).toBe(200);
      expect((await store.getJob(second.id))?.state).toBe('async');
      expect([a.id, b.id].sort()).toEqual([first.id, second.id].sort());
    });

    it('a lapsed lease goes to another remote worker, and the first one can no longer settle', async () => {
      const job = await engine.enqueue(types.lapse, {});
      const [mine] = (
        await acquire(worker, { types: [types.lapse], leaseMs: LEASE_MS, worker: 'slow' })
      ).body.jobs;
      expect(mine.id).toBe(job.id);
      // No engine runs: the API itself recovers the lapsed lease for the waiting acquire.
      const taken = await acquire(otherWorker, {
        types: [types.lapse],
        leaseMs: 5_000,
        waitMs: 10_000,
        worker: 'fast',
      });
      expect(taken.body.jobs.map((j: { id: string }) => j.id)).toEqual([job.id]);
      const theirs = taken.body.jobs[0];
      expect(theirs.token).not.toBe(mine.token);
      expect(theirs.attempt).toBe(2);
      expect((await act(job.id, 'extend', worker, { token: mine.token })).status).toBe(409);
      expect((await act(job.id, 'complete', worker, { token: mine.token })).status).toBe(409);
      expect((await store.getJob(job.id))?.lockOwner).toBe('http:other/fast');
      expect((await act(job.id, 'complete', otherWorker, { token: theirs.token })).status).toBe(
        200,
      );
    });

    it('an extend answers cancelRequested, and the job then ends as cancelled', async (ctx) => {
      if (!store.cancellation) {
        ctx.skip(); // the store cannot cancel jobs (no `cancellation`)
        return;
      }
      const job = await engine.enqueue(types.cancel, {});
      const [held] = (await acquire(worker, { types: [types.cancel], leaseMs: 5_000 })).body.jobs;
      const quiet = await act(job.id, 'extend', worker, {
        token: held.token,
        progress: { pct: 10 },
      });
      expect(quiet.status).toBe(200);
      expect(quiet.body.cancelRequested).toBe(false);
      expect(Date.parse(quiet.body.leaseExpiresAt)).toBeGreaterThan(Date.now());
      expect(await admin.cancel(job.id)).toBe('requested');
      const told = await act(job.id, 'extend', worker, { token: held.token });
      expect(told.body.cancelRequested).toBe(true);
      // Completing after the cancel request does not win over it.
      const refused = await act(job.id, 'complete', worker, { token: held.token, result: 1 });
      expect(refused.status).toBe(409);
      expect(refused.body.type).toBe('urn:jobs:http:cancelled');
      expect(await store.getJob(job.id)).toBeNull();
    });

    it('failures are retried with the engine’s rules, then dead-lettered', async () => {
      const job = await engine.enqueue(types.retry, {}, { retries: 1 });
      const [first] = (await acquire(worker, { types: [types.retry], leaseMs: 5_000 })).body.jobs;
      const retried = await act(job.id, 'fail', worker, {
        token: first.token,
        error: { message: 'disk full', stack: 'at script.sh:3' },
        retryInMs: 0,
      });
      expect(retried.body).toMatchObject({ outcome: 'retry', retryInMs: 0, retriesLeft: 0 });
      const [second] = (
        await acquire(worker, { types: [types.retry], leaseMs: 5_000, waitMs: 5_000 })
      ).body.jobs;
      expect(second.attempt).toBe(2);
      const dead = await act(job.id, 'fail', worker, { token: second.token, error: 'still full' });
      expect(dead.body).toMatchObject({ outcome: 'deadletter', retryInMs: null });
      const stored = await store.getJob(job.id);
      expect(stored?.state).toBe('deadletter');
      expect(stored?.lastError?.message).toBe('still full');

      // unrecoverable: straight to the dead-letter area, retries left or not.
      const other = await engine.enqueue(types.retry, {}, { retries: 5 });
      const [held] = (await acquire(worker, { types: [types.retry], leaseMs: 5_000 })).body.jobs;
      expect(held.id).toBe(other.id);
      const gone = await act(other.id, 'fail', worker, {
        token: held.token,
        error: 'bad input',
        unrecoverable: true,
      });
      expect(gone.body.outcome).toBe('deadletter');
      expect((await store.getJob(other.id))?.state).toBe('deadletter');

      // Without retryInMs the job's own policy sets the backoff.
      const timed = await engine.enqueue(
        types.retry,
        {},
        { retries: 2, retry: { kind: 'fixed', delayMs: 60_000 } },
      );
      const [t] = (await acquire(worker, { types: [types.retry], leaseMs: 5_000 })).body.jobs;
      const backoff = await act(timed.id, 'fail', worker, { token: t.token, error: 'later' });
      expect(backoff.body).toMatchObject({ outcome: 'retry', retryInMs: 60_000, retriesLeft: 1 });
      expect((await store.getJob(timed.id))?.state).toBe('timer');
    });

    it('scope limits hold for remote workers', async () => {
      const scope = newType('scope');
      const jobs = [];
      for (let n = 0; n < 3; n++)
        jobs.push(await engine.enqueue(types.scope, { n }, { scope, exclusive: true }));
      const first = (await acquire(worker, { types: [types.scope], max: 3, leaseMs: 5_000 })).body
        .jobs;
      expect(first.map((j: { id: string }) => j.id)).toEqual([jobs[0]?.id]);
      expect(
        (await acquire(worker, { types: [types.scope], max: 3, leaseMs: 5_000 })).body.jobs,
      ).toEqual([]);
      expect((await act(first[0].id, 'complete', worker, { token: first[0].token })).status).toBe(
        200,
      );
      const next = (
        await acquire(worker, { types: [types.scope], max: 3, leaseMs: 5_000, waitMs: 5_000 })
      ).body.jobs;
      expect(next.map((j: { id: string }) => j.id)).toEqual([jobs[1]?.id]);
      await act(next[0].id, 'complete', worker, { token: next[0].token });
      const last = (await acquire(worker, { types: [types.scope], leaseMs: 5_000, waitMs: 5_000 }))
        .body.jobs;
      await act(last[0].id, 'complete', worker, { token: last[0].token });
    });

    it('rate limits hold for remote workers: jobs over the window wait, no attempt counted', async (ctx) => {
      if (!store.rateLimits) {
        ctx.skip(); // the store keeps no rate limits (no `rateLimits`)
        return;
      }
      const jobs = [];
      for (let n = 0; n < 3; n++) jobs.push(await engine.enqueue(types.rate, { n }));
      const got = (await acquire(worker, { types: [types.rate], max: 3, leaseMs: 5_000 })).body
        .jobs;
      expect(got).toHaveLength(2);
      const waiting = jobs.find((j) => !got.some((g: { id: string }) => g.id === j.id));
      const deferred = await store.getJob(waiting?.id as string);
      expect(deferred?.state).toBe('timer');
      expect(deferred?.attempts).toBe(0);
      expect(
        (await acquire(worker, { types: [types.rate], max: 3, leaseMs: 5_000 })).body.jobs,
      ).toEqual([]);
      for (const job of got) await act(job.id, 'complete', worker, { token: job.token });
    });

    it('hostile requests get a clear 4xx and change nothing', async () => {
      const job = await engine.enqueue(types.hostile, {});
      const foreign = await engine.enqueue(types.other, {});
      // No token, an unknown token, a token for other types: nothing acquired.
      expect((await acquire(null as unknown as string, { types: [types.hostile] })).status).toBe(
        401,
      );
      expect((await acquire(newToken(), { types: [types.hostile] })).status).toBe(401);
      const forbidden = await acquire(otherWorker, { types: [types.hostile] });
      expect(forbidden.status).toBe(403);
      expect(forbidden.body.type).toBe('urn:jobs:http:forbidden');
      expect((await store.getJob(job.id))?.state).toBe('async');
      // Malformed and oversized JSON.
      const malformed = await post(`${served.url}/acquire`, worker, '{"types": [');
      expect(malformed.status).toBe(400);
      expect(malformed.type).toBe('application/problem+json');
      const huge = await post(`${served.url}/acquire`, worker, {
        types: [types.hostile],
        pad: 'x'.repeat(2 * 1024 * 1024),
      });
      expect(huge.status).toBe(413);
      expect((await acquire(worker, { types: [types.hostile], max: 0 })).status).toBe(400);
      expect((await acquire(worker, { types: [types.hostile], typo: 1 })).status).toBe(400);
      expect((await store.getJob(job.id))?.state).toBe('async');

      const [held] = (await acquire(worker, { types: [types.hostile], leaseMs: 5_000 })).body.jobs;
      const [theirs] = (await acquire(otherWorker, { types: [types.other], leaseMs: 5_000 })).body
        .jobs;
      const before = snapshot(await store.getJob(held.id));
      const theirsBefore = snapshot(await store.getJob(foreign.id));
      // Another client completing this job, even with its real token: 403.
      expect((await act(held.id, 'complete', otherWorker, { token: held.token })).status).toBe(403);
      expect((await act(foreign.id, 'complete', worker, { token: theirs.token })).status).toBe(403);
      expect((await act(held.id, 'complete', null, { token: held.token })).status).toBe(401);
      expect((await act(held.id, 'fail', worker, { token: held.token, error: '' })).status).toBe(
        400,
      );
      expect((await act(held.id, 'complete', worker, '[1,2')).status).toBe(400);
      expect((await act('not-an-id', 'complete', worker, { token: held.token })).status).toBe(400);
      // A malformed escape in the path is the caller's mistake too, not a server error.
      expect((await act('%zz', 'complete', worker, { token: held.token })).status).toBe(400);
      expect((await act(held.id, 'explode', worker, { token: held.token })).status).toBe(404);
      expect(
        (await act(held.id, 'extend', worker, { token: held.token, progress: 'x'.repeat(9_000) }))
          .status,
      ).toBe(store.capabilities.progress ? 400 : 200);
      expect(snapshot(await store.getJob(held.id))).toMatchObject({
        ...(before as object),
        lockExpiresAt: expect.any(Number),
      });
      expect(snapshot(await store.getJob(foreign.id))).toEqual(theirsBefore);
      expect((await act(held.id, 'complete', worker, { token: held.token })).status).toBe(200);
      expect((await act(foreign.id, 'complete', otherWorker, { token: theirs.token })).status).toBe(
        200,
      );
    });

    it('a long-polling acquire wakes on enqueue, not on a poll', async (ctx) => {
      if (!store.capabilities.notifications) {
        ctx.skip(); // the store tells nobody of enqueues: waiters poll (pollMs)
        return;
      }
      // A second API on the same store that would poll only every minute.
      const slow = await serveApi({
        store,
        clients: [{ token: worker, types: [types.wake] }],
        pollMs: 60_000,
      });
      try {
        const waiting = post(`${slow.url}/acquire`, worker, {
          types: [types.wake],
          waitMs: 20_000,
          leaseMs: 5_000,
        });
        // Enqueue once the acquire is waiting (the metrics gauge says so).
        for (;;) {
          const metrics = await (await fetch(`${slow.url}/metrics`)).text();
          if (/jobs_http_waiting_acquires 1/.test(metrics)) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
        const job = await engine.enqueue(types.wake, {});
        const answer = await waiting;
        expect(answer.body.jobs.map((j: { id: string }) => j.id)).toEqual([job.id]);
        await post(`${slow.url}/jobs/${job.id}/complete`, worker, {
          token: answer.body.jobs[0].token,
        });
      } finally {
        await slow.close();
      }
    });

    it('a job worked over HTTP as a workflow child resumes its parent: its result, a ChildJobError when it fails for good, a cancel of the parent seen on extend', async (ctx) => {
      if (!store.steps || !store.waits) {
        ctx.skip(); // the store has no `steps` and `waits`: no workflow children
        return;
      }
      // The parent's engine keeps no completed jobs in history, so a child's result can reach
      // the parent only through the outcome sent with its completion; the parent looks at its
      // children on its own only after a minute, so only the settle's wake-up resumes it in time.
      const outcomes: unknown[] = [];
      const parents = new JobEngine({
        store,
        history: { keep: 'failed' },
        childRecheckMs: 60_000,
        logger: { debug() {}, info() {}, warn() {}, error() {} },
        handlers: {
          [types.parent]: async (job: Job<{ retries: number }>, run: JobContext) => {
            try {
              outcomes.push(
                await run.run('remote', types.child, { n: 21 }, { retries: job.payload.retries }),
              );
            } catch (error) {
              // Anything else (the park that waits for the child) is the engine's to handle.
              if (!(error instanceof ChildJobError)) throw error;
              outcomes.push(`ChildJobError ${error.outcome}`);
            }
          },
        },
      });
      const ended = (id: string) =>
        new Promise<string>((resolve) => {
          for (const event of ['completed', 'deadlettered', 'cancelled'] as const) {
            parents.on(event, ({ job }) => {
              if (job.id === id) resolve(event);
            });
          }
        });
      const remoteChild = async () => {
        const answer = await acquire(worker, {
          types: [types.child],
          leaseMs: 5_000,
          waitMs: 10_000,
        });
        expect(answer.body.jobs).toHaveLength(1);
        return answer.body.jobs[0];
      };
      parents.start();
      try {
        // Completed over HTTP: the parent resumes with the child's result.
        const first = await parents.enqueue(types.parent, { retries: 0 });
        const firstEnded = ended(first.id);
        const child = await remoteChild();
        expect(child.payload).toEqual({ n: 21 });
        const done = await act(child.id, 'complete', worker, {
          token: child.token,
          result: { doubled: 42 },
        });
        expect(done.status).toBe(200);
        expect(await firstEnded).toBe('completed');
        expect(outcomes).toEqual([{ doubled: 42 }]);

        // Failed for good over HTTP: ctx.run throws ChildJobError in the parent.
        const second = await parents.enqueue(types.parent, { retries: 0 });
        const secondEnded = ended(second.id);
        const failing = await remoteChild();
        const failed = await act(failing.id, 'fail', worker, {
          token: failing.token,
          error: 'script exited 2',
        });
        expect(failed.body.outcome).toBe('deadletter');
        expect(await secondEnded).toBe('completed');
        expect(outcomes).toEqual([{ doubled: 42 }, 'ChildJobError deadletter']);

        // A cancel of the parent reaches the remote worker on its next extend.
        if (store.cancellation) {
          const third = await parents.enqueue(types.parent, { retries: 0 });
          const running = await remoteChild();
          // The parent parks for its child (state timer) once the child is enqueued.
          for (;;) {
            if ((await store.getJob(third.id))?.state === 'timer') break;
            await new Promise((resolve) => setImmediate(resolve));
          }
          expect(await admin.cancel(third.id)).toBe('cancelled');
          const told = await act(running.id, 'extend', worker, { token: running.token });
          expect(told.status).toBe(200);
          expect(told.body.cancelRequested).toBe(true);
          const refused = await act(running.id, 'complete', worker, {
            token: running.token,
            result: 1,
          });
          expect(refused.body.type).toBe('urn:jobs:http:cancelled');
          expect(await store.getJob(running.id)).toBeNull();
          expect(await store.getJob(third.id)).toBeNull();
          expect(outcomes).toHaveLength(2);
        }
      } finally {
        await parents.stop();
        // Back to what the other tests of this store expect.
        store.history?.configure({ keep: 'all', retentionMs: 7 * 86_400_000 });
      }
    });

    it('a completion keeps its result and duration in history', async (ctx) => {
      if (!store.history) {
        ctx.skip(); // the store keeps no history
        return;
      }
      const job = await engine.enqueue(types.history, {});
      const [held] = (await acquire(worker, { types: [types.history], leaseMs: 5_000 })).body.jobs;
      await act(job.id, 'complete', worker, { token: held.token, result: { rows: 3 } });
      const record = (await admin.getJob(job.id)) as {
        outcome?: string;
        result?: unknown;
        durationMs?: number | null;
      };
      expect(record?.outcome).toBe('completed');
      expect(record?.result).toEqual({ rows: 3 });
      expect(typeof record?.durationMs).toBe('number');
    });
  });
}
