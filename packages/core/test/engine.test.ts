import { describe, expect, it } from 'vitest';
import {
  FakeClock,
  type Job,
  type JobContext,
  JobEngine,
  LockLostError,
  MemoryJobStore,
  UnrecoverableError,
  ValidationError,
} from '../src/index.js';
import { engine, sleep, waitFor } from './helpers.js';

describe('enqueue validation', () => {
  const store = new MemoryJobStore();
  const client = new JobEngine({ store });

  const bad: Array<[string, () => Promise<unknown>, string]> = [
    ['empty type', () => client.enqueue('', {}), 'type'],
    ['non-string type', () => client.enqueue(42 as unknown as string, {}), 'type'],
    ['function in payload', () => client.enqueue('t', { f: () => 1 }), 'payload.f'],
    ['BigInt payload', () => client.enqueue('t', { n: 1n }), 'payload.n'],
    [
      'circular payload',
      () => {
        const a: Record<string, unknown> = {};
        a.self = a;
        return client.enqueue('t', a);
      },
      'payload.self',
    ],
    ['Map in the payload', () => client.enqueue('t', { m: new Map() }), 'payload.m'],
    ['oversize payload', () => client.enqueue('t', 'x'.repeat(2 * 1024 * 1024)), 'payload'],
    ['unknown option', () => client.enqueue('t', {}, { priorty: 1 } as never), 'options.priorty'],
    ['invalid runAt', () => client.enqueue('t', {}, { runAt: new Date('nope') }), 'runAt'],
    ['negative delay', () => client.enqueue('t', {}, { delayMs: -5 }), 'delayMs'],
    [
      'runAt and delayMs',
      () => client.enqueue('t', {}, { runAt: new Date(), delayMs: 5 }),
      'delayMs',
    ],
    ['fractional retries', () => client.enqueue('t', {}, { retries: 1.5 }), 'retries'],
    ['exclusive without scope', () => client.enqueue('t', {}, { exclusive: true }), 'exclusive'],
    ['bad retry cycle', () => client.enqueue('t', {}, { retry: 'R-1/PT1M' }), 'retry'],
    ['bad retry duration', () => client.enqueue('t', {}, { retry: 'R3/10 minutes' }), 'retry'],
    ['retry cycle over a year', () => client.enqueue('t', {}, { retry: 'R3/P366D' }), 'retry'],
    [
      'retry cycle of 1,001 retries',
      () => client.enqueue('t', {}, { retry: { kind: 'cycle', cycle: 'R1001/PT1M' } }),
      'retry.cycle',
    ],
  ];

  for (const [name, call, field] of bad) {
    it(`rejects ${name} with a ValidationError naming ${field}, writing nothing`, async () => {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).field).toBe(field);
      expect((await client.admin.stats()).total).toBe(0);
    });
  }

  it('enqueueMany writes nothing when one item is bad', async () => {
    const error = await client
      .enqueueMany([
        { type: 'ok', payload: 1 },
        { type: '', payload: 2 },
      ])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toContain('items[1]');
    expect((await client.admin.stats()).total).toBe(0);
  });

  it('enqueueMany rejects an item with options beside type and payload instead of in options', async () => {
    const error = await client
      .enqueueMany([{ type: 'ok', payload: 1, scope: 'acct-1', exclusive: true } as never])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('item.scope');
    expect((error as Error).message).toMatch(
      /unknown option \(expected one of type, payload, options\)/,
    );
    expect((await client.admin.stats()).total).toBe(0);
  });

  it('rejects unknown engine options', () => {
    expect(() => new JobEngine({ store, concurency: 3 } as never)).toThrow(/concurency/);
  });

  it('accepts retry cycles of up to a year and 1,000 retries', async () => {
    const job = await client.enqueue('t', {}, { retry: 'R1000/P365D' });
    expect(job.retriesLeft).toBe(1000);
    expect(await client.admin.deleteJob(job.id)).toBe(true);
  });

  it('checks handler names, queues and tenants as enqueue checks types, queues and tenants', () => {
    const handler = async () => {};
    const fieldOf = (options: object): unknown => {
      try {
        new JobEngine({ store, ...options });
      } catch (error) {
        expect(error).toBeInstanceOf(ValidationError);
        return (error as ValidationError).field;
      }
      return 'accepted';
    };
    for (const name of ['a\u0000b', 'tab\there', 'x'.repeat(256), '', '  ', '\udc00']) {
      expect(fieldOf({ handlers: { [name]: handler } }), JSON.stringify(name)).toBe('handlers');
    }
    expect(fieldOf({ handlers: { ' w ': handler, ['x'.repeat(255)]: handler } })).toBe('accepted');
    expect(fieldOf({ queues: ['ok', 'q\u0000'] })).toBe('queues.1');
    expect(fieldOf({ tenants: [''] })).toBe('tenants.0');
    expect(fieldOf({ tenants: 'acme' })).toBe('tenants');
    expect(fieldOf({ queues: ['a ', 'a'], tenants: [] })).toBe('accepted');
  });
});

describe('JobEngine', () => {
  it('runs a job enqueued through a running engine at once, without waiting for a poll', async () => {
    const store = new MemoryJobStore();
    const ran: string[] = [];
    // A poll interval of an hour: only immediate dispatch can run the job within the test.
    const e = engine({
      store,
      pollIntervalMs: 3600_000,
      handlers: { hello: (job) => void ran.push(job.id) },
    });
    await e.start();
    await sleep(20);
    const job = await e.enqueue('hello', { name: 'x' });
    await waitFor(() => ran.includes(job.id), 'the job to run');
    await waitFor(async () => (await store.getJob(job.id)) === null, 'the job to be deleted');
  });

  /**
   * Drains 500 jobs through a memory store whose calls each take 2 ms (a network round trip),
   * counting the engine's `complete` and `completeAndAcquire` calls (not the store's own
   * `complete` inside `completeAndAcquire`).
   */
  async function countSettleCalls(concurrentCalls: boolean) {
    const store = new MemoryJobStore();
    const capabilities = { ...store.capabilities, concurrentCalls };
    const calls = { complete: 0, completed: 0, completeAndAcquire: 0, carried: 0 };
    const counting = new Proxy(store, {
      get(target, prop) {
        if (prop === 'capabilities') return capabilities;
        if (prop === 'complete') {
          return (refs: Parameters<MemoryJobStore['complete']>[0]) => {
            calls.complete += 1;
            calls.completed += refs.length;
            return sleep(2).then(() => target.complete(refs));
          };
        }
        if (prop === 'completeAndAcquire') {
          return (...args: Parameters<MemoryJobStore['completeAndAcquire']>) => {
            calls.completeAndAcquire += 1;
            calls.carried += args[0].length;
            return sleep(2).then(() => target.completeAndAcquire(...args));
          };
        }
        const value = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        if (prop === 'subscribe') return value.bind(target);
        // Every other call takes a network round trip's time, as on a real database.
        return async (...args: unknown[]) => {
          await sleep(2);
          return value.apply(target, args);
        };
      },
    });
    const total = 500;
    await new JobEngine({ store }).enqueueMany(
      Array.from({ length: total }, (_, n) => ({ type: 'noop', payload: { n } })),
    );
    let ran = 0;
    const e = engine({
      store: counting,
      handlers: {
        noop: async () => {
          ran += 1;
        },
      },
      concurrency: 10,
    });
    await e.start();
    await waitFor(async () => (await store.stats()).length === 0, 'every job to be completed');
    expect(ran).toBe(total);
    return { calls, total };
  }

  it('writes most completions together with the next acquisition (completeAndAcquire)', async () => {
    const { calls, total } = await countSettleCalls(false);
    // Without folding every batch costs a complete and an acquire; with it, most completions
    // ride on an acquisition and separate complete calls are the exception.
    expect(calls.carried, JSON.stringify(calls)).toBeGreaterThan(total / 2);
    expect(calls.complete, JSON.stringify(calls)).toBeLessThan(calls.completeAndAcquire);
  });

  it('writes completions on their own, beside acquisitions, on a store with concurrentCalls', async () => {
    const { calls, total } = await countSettleCalls(true);
    // The pool runs them at once on other connections: nothing waits for an acquisition.
    expect(calls.completeAndAcquire, JSON.stringify(calls)).toBe(0);
    expect(calls.completed, JSON.stringify(calls)).toBe(total);
    // Still batched: a completion call in flight collects the ones that finish meanwhile.
    expect(calls.complete, JSON.stringify(calls)).toBeLessThan(total / 5);
  });

  it('an engine started later picks up jobs enqueued by a client', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store });
    const ids = await Promise.all([1, 2, 3].map((n) => client.enqueue('work', { n })));
    const done: string[] = [];
    const e = engine({ store, handlers: { work: (job) => void done.push(job.id) } });
    await e.start();
    await waitFor(() => done.length === 3, 'three jobs');
    expect(done.sort()).toEqual(ids.map((j) => j.id).sort());
  });

  it('retries a failing job with its policy, keeps the error, then deadletters it', async () => {
    const store = new MemoryJobStore();
    const attempts: number[] = [];
    const events: string[] = [];
    const e = engine({
      store,
      handlers: {
        flaky: (_job, ctx) => {
          attempts.push(ctx.attempt);
          throw new Error(`boom ${ctx.attempt}`);
        },
      },
      retry: { kind: 'fixed', delayMs: 10 },
    });
    for (const name of ['failed', 'retried', 'deadlettered'] as const)
      e.on(name, () => events.push(name));
    await e.start();
    const job = await e.enqueue('flaky', null, { retries: 2 });
    await waitFor(async () => (await store.getJob(job.id))?.state === 'deadletter', 'deadletter');
    const dead = (await e.admin.getJob(job.id)) as Job;
    expect(attempts).toEqual([1, 2, 3]);
    expect(dead.retriesLeft).toBe(0);
    expect(dead.lastError?.message).toBe('boom 3');
    expect(dead.lastError?.stack).toContain('engine.test.ts');
    expect(events).toEqual(['failed', 'retried', 'failed', 'retried', 'failed', 'deadlettered']);
  });

  it('sends a job that throws UnrecoverableError straight to the dead-letter area', async () => {
    const store = new MemoryJobStore();
    let runs = 0;
    const e = engine({
      store,
      handlers: {
        doomed: () => {
          runs += 1;
          throw new UnrecoverableError('no such user');
        },
      },
    });
    await e.start();
    const job = await e.enqueue('doomed', {}, { retries: 5 });
    await waitFor(async () => (await store.getJob(job.id))?.state === 'deadletter', 'deadletter');
    expect(runs).toBe(1);
    expect((await store.getJob(job.id))?.retriesLeft).toBe(5);
  });

  it('uses an ISO-8601 retry cycle per job: R2/PT0.05S allows two retries 50 ms apart', async () => {
    const store = new MemoryJobStore();
    const failed: number[] = [];
    const e = engine({ store, handlers: { t: () => Promise.reject(new Error('no')) } });
    e.on('failed', (ev) => failed.push(ev.retryDelayMs));
    await e.start();
    const job = await e.enqueue('t', {}, { retry: 'R2/PT0.05S' });
    expect(job.retriesLeft).toBe(2);
    await waitFor(async () => (await store.getJob(job.id))?.state === 'deadletter', 'deadletter');
    expect(failed).toEqual([50, 50, 0]);
  });

  it('admin.retry moves a dead job back to async with fresh retries and it runs again', async () => {
    const store = new MemoryJobStore();
    let fail = true;
    let succeeded = 0;
    const e = engine({
      store,
      handlers: {
        t: () => {
          if (fail) throw new Error('down');
          succeeded += 1;
        },
      },
    });
    await e.start();
    const job = await e.enqueue('t', {}, { retries: 0 });
    await waitFor(async () => (await store.getJob(job.id))?.state === 'deadletter', 'deadletter');
    expect(await e.admin.listJobs({ state: 'deadletter' })).toHaveLength(1);
    fail = false;
    const retried = await e.admin.retry(job.id, { retries: 1 });
    expect(retried.retriesLeft).toBe(1);
    await waitFor(() => succeeded === 1, 'the retried job to succeed');
    await expect(e.admin.retry(job.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('renews the lease of a job that runs 3x its lease, so it runs once while two engines poll', async () => {
    // A lease of 1 s: renewals every third of it stay ahead of the event-loop stalls of a busy
    // 2-core machine (a 300 ms lease was lost there, correctly, when a stall outlasted it).
    const store = new MemoryJobStore();
    let runs = 0;
    const handler = async () => {
      runs += 1;
      await sleep(3_000);
    };
    const a = engine({ store, leaseMs: 1_000, handlers: { long: handler } });
    const b = engine({ store, leaseMs: 1_000, handlers: { long: handler } });
    await a.start();
    await b.start();
    const job = await a.enqueue('long', {});
    await waitFor(
      async () => runs === 1 && (await store.getJob(job.id)) === null,
      'the long job',
      15_000,
    );
    expect(runs).toBe(1);
  });

  it('aborts ctx.signal with LockLostError when the lease is lost', async () => {
    const store = new MemoryJobStore();
    let reason: unknown;
    let started = false;
    const e = engine({
      store,
      leaseMs: 90,
      handlers: {
        t: (_job: Job, ctx: JobContext) =>
          new Promise<void>((resolve) => {
            started = true;
            ctx.signal.addEventListener('abort', () => {
              reason = ctx.signal.reason;
              resolve();
            });
          }),
      },
    });
    const lost: string[] = [];
    e.on('lease-lost', (ev) => lost.push(ev.job.id));
    await e.start();
    const job = await e.enqueue('t', {});
    await waitFor(() => started, 'start');
    // Someone else's hand took the job away: its lease is given back under the engine's feet.
    const leased = await store.getJob(job.id);
    await store.release([{ id: job.id, token: leased?.lockToken as string }]);
    await waitFor(() => reason !== undefined, 'abort');
    expect(reason).toBeInstanceOf(LockLostError);
    expect(lost).toEqual([job.id]);
  });

  it('runs higher priority first, then earlier due time, then insertion order', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store });
    await client.enqueue('t', 'low', { priority: -1 });
    await client.enqueue('t', 'a', {});
    await client.enqueue('t', 'b', {});
    await client.enqueue('t', 'high', { priority: 5 });
    const order: unknown[] = [];
    const e = engine({
      store,
      concurrency: 1,
      prefetch: 0,
      handlers: { t: (job) => void order.push(job.payload) },
    });
    await e.start();
    await waitFor(() => order.length === 4, 'all jobs');
    expect(order).toEqual(['high', 'a', 'b', 'low']);
  });

  it('never runs two exclusive jobs of one scope at once across engines, and starts them in order', async () => {
    const store = new MemoryJobStore();
    const active = new Map<string, number>();
    let overlap = false;
    const seen: Record<string, number[]> = { s1: [], s2: [] };
    const handler = async (job: Job<{ n: number }>) => {
      const scope = job.scope as string;
      active.set(scope, (active.get(scope) ?? 0) + 1);
      if ((active.get(scope) ?? 0) > 1) overlap = true;
      seen[scope]?.push(job.payload.n);
      await sleep(3);
      active.set(scope, (active.get(scope) ?? 0) - 1);
    };
    const es = [0, 1, 2].map(() => engine({ store, concurrency: 4, handlers: { x: handler } }));
    const client = new JobEngine({ store });
    const jobs = [];
    for (let n = 0; n < 20; n++) {
      jobs.push({
        type: 'x',
        payload: { n },
        options: { scope: n % 2 ? 's1' : 's2', exclusive: true },
      });
    }
    await client.enqueueMany(jobs);
    await Promise.all(es.map((e) => e.start()));
    await waitFor(
      () => (seen.s1?.length ?? 0) + (seen.s2?.length ?? 0) === 20,
      'all exclusive jobs',
    );
    expect(overlap).toBe(false);
    expect(seen.s1).toEqual([1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
    expect(seen.s2).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
  });

  it('returns the existing job for a unique key while it is unfinished', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store });
    const first = await client.enqueue('t', { v: 1 }, { key: 'order-7' });
    const second = await client.enqueue('t', { v: 2 }, { key: 'order-7' });
    expect(second.id).toBe(first.id);
    expect(second.payload).toEqual({ v: 1 });
    expect((await client.admin.stats()).total).toBe(1);
  });

  it('acquires only job types it has handlers for, and only its queues', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store });
    await client.enqueue('a', 1);
    await client.enqueue('b', 2);
    await client.enqueue('a', 3, { queue: 'slow' });
    const ranA: unknown[] = [];
    const e = engine({
      store,
      queues: ['default'],
      handlers: { a: (job) => void ranA.push(job.payload) },
    });
    await e.start();
    await waitFor(() => ranA.length === 1, 'job a');
    await sleep(50);
    expect(ranA).toEqual([1]);
    const stats = await client.admin.stats();
    expect(stats.byType.b?.async).toBe(1);
    expect(stats.byType.a?.async).toBe(1);
  });

  it('does not run suspended jobs until they are activated', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store });
    await client.enqueue('t', 1, { scope: 'acct-1' });
    await client.enqueue('t', 2, { scope: 'acct-2' });
    expect(await client.admin.suspend({ scope: 'acct-1' })).toBe(1);
    const ran: unknown[] = [];
    const e = engine({ store, handlers: { t: (job) => void ran.push(job.payload) } });
    await e.start();
    await waitFor(() => ran.length === 1, 'unsuspended job');
    await sleep(50);
    expect(ran).toEqual([2]);
    expect(await e.admin.activate({ scope: 'acct-1' })).toBe(1);
    await waitFor(() => ran.length === 2, 'activated job');
  });

  it('honours due times on a fake clock', async () => {
    const clock = new FakeClock();
    const store = new MemoryJobStore({ clock });
    const ran: unknown[] = [];
    const e = engine({ store, clock, handlers: { t: (job) => void ran.push(job.payload) } });
    await e.start();
    const job = await e.enqueue('t', 'later', { delayMs: 60_000 });
    expect(job.state).toBe('timer');
    await sleep(50);
    expect(ran).toEqual([]);
    clock.advance(60_000);
    e.poll();
    await waitFor(() => ran.length === 1, 'the timer job');
  });

  it('stop() releases prefetched jobs without counting an attempt and lets running ones finish', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store });
    await client.enqueueMany(Array.from({ length: 6 }, (_, n) => ({ type: 't', payload: n })));
    let started = 0;
    let finished = 0;
    const e = engine({
      store,
      concurrency: 2,
      prefetch: 4,
      handlers: {
        t: async () => {
          started += 1;
          await sleep(100);
          finished += 1;
        },
      },
    });
    await e.start();
    await waitFor(() => started === 2, 'two running');
    await e.stop({ timeoutMs: 5000 });
    expect(finished).toBe(2);
    const left = await client.admin.listJobs({});
    expect(left).toHaveLength(4);
    for (const job of left) {
      expect(job.state).toBe('async');
      expect(job.attempts).toBe(0);
      expect(job.lockOwner).toBeNull();
    }
  });

  it('stop() aborts handlers that outlive the timeout and releases their jobs', async () => {
    const store = new MemoryJobStore();
    let started = false;
    let aborted = false;
    const e = engine({
      store,
      handlers: {
        t: (_job: Job, ctx: JobContext) =>
          new Promise<void>((_resolve, reject) => {
            started = true;
            ctx.signal.addEventListener('abort', () => {
              aborted = true;
              reject(ctx.signal.reason);
            });
          }),
      },
    });
    await e.start();
    const job = await e.enqueue('t', {});
    // The handler itself: the row says running from the acquisition on (a start mark).
    await waitFor(() => started, 'the handler to start');
    await e.stop({ timeoutMs: 50 });
    expect(aborted).toBe(true);
    const after = await store.getJob(job.id);
    expect(after?.state).toBe('async');
    expect(after?.attempts).toBe(0);
  });

  it('emits typed events through the lifecycle', async () => {
    const store = new MemoryJobStore();
    const seen: string[] = [];
    const e = engine({ store, handlers: { t: () => undefined } });
    for (const name of ['enqueued', 'acquired', 'started', 'completed'] as const) {
      e.on(name, () => seen.push(name));
    }
    await e.start();
    await e.enqueue('t', {});
    await waitFor(() => seen.includes('completed'), 'completed');
    expect(seen).toEqual(['enqueued', 'acquired', 'started', 'completed']);
  });

  it('recovers a job whose owner died: requeued after the lease with an attempt counted', async () => {
    const store = new MemoryJobStore();
    const client = new JobEngine({ store });
    const job = await client.enqueue('t', {}, { retries: 2 });
    // A "dead" owner: acquires and never renews.
    await store.acquire({
      owner: 'dead',
      limit: 1,
      leaseMs: 50,
      types: ['t'],
      queues: null,
      tenants: null,
    });
    const ran: Job[] = [];
    const e = engine({ store, leaseMs: 100, handlers: { t: (j) => void ran.push(j) } });
    await e.start();
    await waitFor(() => ran.length === 1, 'takeover');
    expect(ran[0]?.id).toBe(job.id);
    expect(ran[0]?.attempts).toBe(2);
    expect(ran[0]?.retriesLeft).toBe(1);
  });

  it('an engine without handlers is a client: start() runs nothing', async () => {
    const store = new MemoryJobStore();
    const client = engine({ store });
    await client.start();
    const job = await client.enqueue('t', {});
    await sleep(30);
    expect((await store.getJob(job.id))?.state).toBe('async');
  });
});
