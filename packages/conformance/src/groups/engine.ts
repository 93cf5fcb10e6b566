import {
  type EngineOptions,
  type Job,
  JobEngine,
  type JobStore,
  LockLostError,
  StoreError,
  silentLogger,
} from '@jobs/core';
import { expect, it } from 'vitest';
import { acquire, enqueueJobs, type Harness, sleep, waitFor } from '../harness.js';
import { spawnEnginePeer } from '../process-peer.js';

/** Starts an engine on `store` and stops it after the test (before the stores close). */
async function startEngine(h: Harness, store: JobStore, options: Omit<EngineOptions, 'store'>) {
  const engine = new JobEngine({ store, ...options });
  h.defer(() => engine.stop({ timeoutMs: 1_000 }));
  await engine.start();
  return engine;
}

/**
 * `inner` behind a network that can go silent: after `silence()` every call goes nowhere and is
 * never answered (a black hole), until `restore()` fails the calls left hanging.
 */
export function behindSilentNetwork(inner: JobStore) {
  let silent = false;
  const hanging: ((error: Error) => void)[] = [];
  const store = new Proxy(inner, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      if (property === 'subscribe') return value.bind(target);
      return (...args: unknown[]) =>
        silent ? new Promise((_, reject) => hanging.push(reject)) : value.apply(target, args);
    },
  });
  return {
    store,
    silence: () => {
      silent = true;
    },
    restore: () => {
      silent = false;
      for (const reject of hanging.splice(0)) {
        reject(
          new StoreError('[@jobs/conformance] silent network restored: this call was dropped'),
        );
      }
    },
  };
}

async function isEmpty(store: JobStore): Promise<boolean> {
  return (await store.listJobs({ limit: 1, offset: 0 })).length === 0;
}

/** Counts handler runs per job id. */
function runCounter() {
  const runs = new Map<string, number>();
  return {
    runs,
    record(job: Job): void {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
    },
    twice(): string[] {
      return [...runs].filter(([, n]) => n > 1).map(([id]) => id);
    },
  };
}

/**
 * A real `JobEngine` from `@jobs/core` on the store: the invariants as users meet them
 * (1, 3, 4, 6, 8, 15 end to end).
 */
export function engineGroup(h: Harness): void {
  it(
    'many jobs enqueued through engines on several peers each run exactly once',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store, 3);
      const counter = runCounter();
      const handlers = { work: async (job: Job) => counter.record(job) };
      const engines = await Promise.all(
        peers.map((peer) => startEngine(h, peer, { handlers, concurrency: 4, leaseMs: 5_000 })),
      );
      const total = 150;
      const ids: string[] = [];
      for (let i = 0; i < total; i += 25) {
        const batch = Array.from({ length: 25 }, (_, j) => ({
          type: 'work',
          payload: { n: i + j },
        }));
        ids.push(...(await engines[i % engines.length]!.enqueueMany(batch)).map((j) => j.id));
      }
      await waitFor(
        'every job to run',
        async () => counter.runs.size === total && isEmpty(store),
        h.timeoutMs,
      );
      expect(counter.twice()).toEqual([]);
      expect([...counter.runs.keys()].sort()).toEqual([...ids].sort());
    },
    h.timeout(2),
  );

  it('a payload enqueue returns is the caller’s own: changed and enqueued again, by the engine or the store, the new job holds the change', async () => {
    const store = await h.open();
    const engine = new JobEngine({ store, logger: silentLogger });
    const [job] = await engine.enqueueMany([
      { type: 'client', payload: { list: [1, 2] } },
      { type: 'client', payload: { list: [5] } },
    ]);
    const payload = job!.payload as { list: number[] };
    expect(payload).toEqual({ list: [1, 2] });
    payload.list.push(3);
    const again = await engine.enqueue('client', payload);
    payload.list.push(4);
    const [direct] = await enqueueJobs(store, [{ payload }]);
    expect((await store.getJob(job!.id))?.payload).toEqual({ list: [1, 2] });
    expect((await store.getJob(again.id))?.payload).toEqual({ list: [1, 2, 3] });
    expect(again.payload).toEqual({ list: [1, 2, 3] });
    expect((await store.getJob(direct!.id))?.payload).toEqual({ list: [1, 2, 3, 4] });
    // The payload of `again` is its own too.
    (again.payload as { list: number[] }).list.push(9);
    const [later] = await enqueueJobs(store, [{ payload: again.payload }]);
    expect((await store.getJob(later!.id))?.payload).toEqual({ list: [1, 2, 3, 9] });
  });

  it('a job enqueued by a client engine is run by a worker engine on another connection', async () => {
    const store = await h.open();
    const [clientStore, workerStore] = await h.peers(store, 2);
    const client = await startEngine(h, clientStore!, {});
    const ran: string[] = [];
    await startEngine(h, workerStore!, {
      handlers: { work: async (job: Job) => void ran.push(job.id) },
      leaseMs: 5_000,
    });
    const job = await client.enqueue('work', { hello: 'world' });
    await waitFor(
      'the worker to run it',
      async () => ran.length === 1 && isEmpty(store),
      h.timeoutMs / 2,
    );
    expect(ran).toEqual([job.id]);
  });

  it('errors no database could store as thrown (NUL, 100 KB) are recorded sanitised; every failure of the batch lands', async () => {
    const store = await h.open();
    const engine = await startEngine(h, store, {
      concurrency: 8,
      leaseMs: 5_000,
      retries: 0,
      handlers: {
        work: async (job: Job) => {
          const n = (job.payload as { n: number }).n;
          throw new Error(n % 2 ? `NUL\u0000in message ${n}` : `${'x'.repeat(100_000)} ${n}`);
        },
      },
    });
    const jobs = await engine.enqueueMany(
      Array.from({ length: 8 }, (_, n) => ({ type: 'work', payload: { n } })),
    );
    const dead = await waitFor(
      'every job in the dead-letter area',
      async () => {
        const found = await store.listJobs({ state: 'deadletter', limit: 100, offset: 0 });
        return found.length === jobs.length && found;
      },
      h.timeoutMs / 2,
    );
    for (const job of dead) {
      const message = job.lastError?.message ?? '';
      expect(message).not.toContain('\u0000');
      expect(message.length).toBeLessThanOrEqual(4_000);
    }
    expect(dead.some((job) => job.lastError?.message.startsWith('NULin message'))).toBe(true);
  });

  it('mixed worker pools: each engine runs only the types it has handlers for', async () => {
    const store = await h.open();
    const [pa, pb] = await h.peers(store, 2);
    const ranBy = new Map<string, string>();
    const record = (engine: string) => async (job: Job) => {
      ranBy.set(`${job.type}:${job.id}`, engine);
    };
    const a = await startEngine(h, pa!, { handlers: { alpha: record('a') }, leaseMs: 5_000 });
    await startEngine(h, pb!, { handlers: { beta: record('b') }, leaseMs: 5_000 });
    await a.enqueueMany(
      Array.from({ length: 20 }, (_, i) => ({ type: i % 2 === 0 ? 'alpha' : 'beta' })),
    );
    await waitFor(
      'every job to run',
      async () => ranBy.size === 20 && isEmpty(store),
      h.timeoutMs / 2,
    );
    for (const [key, engine] of ranBy) {
      expect(engine, key).toBe(key.startsWith('alpha') ? 'a' : 'b');
    }
  });

  it('a job running 3 times its lease runs once: the engine keeps renewing its lease', async () => {
    const store = await h.open();
    const peers = await h.peers(store, 2);
    // Long enough that a renewal delayed by a loaded CI machine (two suites, the database and
    // the peers on two cores) still lands inside the lease; the claim is about renewing, not speed.
    const leaseMs = 1_200;
    const counter = runCounter();
    const lost: string[] = [];
    const handlers = {
      work: async (job: Job) => {
        counter.record(job);
        await sleep(leaseMs * 3);
      },
    };
    const engines = await Promise.all(
      peers.map((peer) => startEngine(h, peer, { handlers, concurrency: 2, leaseMs })),
    );
    for (const engine of engines) engine.on('lease-lost', ({ job }) => lost.push(job.id));
    const job = await engines[0]!.enqueue('work', {});
    await waitFor(
      'the long job to finish',
      async () => counter.runs.size === 1 && isEmpty(store),
      h.timeoutMs / 2,
    );
    // A second run would have kept the row until it finished: none started.
    expect(counter.runs.get(job.id)).toBe(1);
    expect(lost).toEqual([]);
  });

  it('stop releases prefetched jobs at once, without counting an attempt', async () => {
    const store = await h.open();
    let unblock: () => void = () => {};
    const blocker = new Promise<void>((resolve) => {
      unblock = resolve;
    });
    const started: string[] = [];
    const engine = await startEngine(h, store, {
      handlers: {
        work: async (job: Job) => {
          started.push(job.id);
          await blocker;
        },
      },
      concurrency: 1,
      prefetch: 4,
      leaseMs: 10_000,
    });
    const jobs = await engine.enqueueMany(Array.from({ length: 5 }, () => ({ type: 'work' })));
    await waitFor('one running and the rest prefetched', async () => {
      const s = engine.snapshot();
      return s.executing === 1 && s.prefetched === 4;
    });
    const stopping = engine.stop({ timeoutMs: 10_000 });
    // Released while the running job still runs.
    await waitFor('the prefetched jobs to be released', async () => {
      const waiting = await store.listJobs({ state: 'async', limit: 10, offset: 0 });
      return waiting.length === 4 ? waiting : undefined;
    });
    unblock();
    await stopping;
    expect(started).toEqual([jobs[0]!.id]);
    await h.expectStored(store, jobs[0]!.id, null);
    for (const job of jobs.slice(1)) {
      await h.expectStored(store, job.id, {
        state: 'async',
        attempts: 0,
        retriesLeft: job.retriesLeft,
        lockToken: null,
        lockOwner: null,
      });
    }
  });

  it('a stop that times out aborts the handler’s signal and releases its job', async () => {
    const store = await h.open();
    const engine = await startEngine(h, store, {
      handlers: {
        work: (_job: Job, ctx) =>
          new Promise((_, reject) => {
            ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
          }),
      },
      concurrency: 1,
      leaseMs: 10_000,
    });
    const job = await engine.enqueue('work', {});
    await waitFor('the job to start', async () => engine.snapshot().executing === 1);
    await engine.stop({ timeoutMs: 100 });
    await h.expectStored(store, job.id, { state: 'async', attempts: 0, lockToken: null });
  });

  it('the job of a crashed owner is run by an engine once its lease expires', async () => {
    const store = await h.open();
    const [job] = await enqueueJobs(store, [{}]);
    const [stranded] = await acquire(store, { owner: 'crashed', leaseMs: 200 });
    expect(stranded!.id).toBe(job!.id);
    const attempts: number[] = [];
    await startEngine(h, store, {
      handlers: { work: async (_job: Job, ctx) => void attempts.push(ctx.attempt) },
      leaseMs: 300,
    });
    await waitFor(
      'the stranded job to run',
      async () => attempts.length === 1 && isEmpty(store),
      h.timeoutMs / 2,
    );
    expect(attempts).toEqual([2]);
  });

  it('a failing job is retried after its backoff, then dead-lettered with its error', async () => {
    const store = await h.open();
    const attempts: number[] = [];
    const engine = await startEngine(h, store, {
      handlers: {
        work: async (_job: Job, ctx) => {
          attempts.push(ctx.attempt);
          throw new Error(`attempt ${ctx.attempt} failed`);
        },
      },
      retry: { kind: 'fixed', delayMs: 30 },
      leaseMs: 5_000,
    });
    const job = await engine.enqueue('work', {}, { retries: 2 });
    const dead = await waitFor('the job to be dead-lettered', async () => {
      const current = await store.getJob(job.id);
      return current?.state === 'deadletter' ? current : undefined;
    });
    expect(attempts).toEqual([1, 2, 3]);
    expect(dead).toMatchObject({ attempts: 3, retriesLeft: 0, lockToken: null });
    expect(dead.lastError?.message).toBe('attempt 3 failed');
  });

  it(
    'exclusive jobs of one scope never run at once across engines, and start in order',
    async () => {
      const store = await h.open();
      const peers = await h.peers(store, 3);
      const active = new Map<string, number>();
      const order = new Map<string, number[]>();
      const overlaps: string[] = [];
      let done = 0;
      const handlers = {
        work: async (job: Job<{ scope: string; n: number }>) => {
          const { scope, n } = job.payload;
          const now = (active.get(scope) ?? 0) + 1;
          active.set(scope, now);
          if (now > 1) overlaps.push(`${scope}#${n}`);
          order.set(scope, [...(order.get(scope) ?? []), n]);
          await sleep(2);
          active.set(scope, (active.get(scope) ?? 1) - 1);
          done += 1;
        },
      };
      const engines = await Promise.all(
        peers.map((peer) => startEngine(h, peer, { handlers, concurrency: 4, leaseMs: 5_000 })),
      );
      const perScope = 12;
      const scopes = ['a', 'b'];
      await engines[0]!.enqueueMany(
        Array.from({ length: perScope * scopes.length }, (_, i) => {
          const scope = scopes[i % scopes.length]!;
          const n = Math.floor(i / scopes.length);
          return { type: 'work', payload: { scope, n }, options: { scope, exclusive: true } };
        }),
      );
      await waitFor(
        'every exclusive job to run',
        async () => done === perScope * scopes.length && isEmpty(store),
        h.timeoutMs,
      );
      expect(overlaps).toEqual([]);
      for (const scope of scopes) {
        expect(order.get(scope)).toEqual(Array.from({ length: perScope }, (_, n) => n));
      }
    },
    h.timeout(2),
  );

  it('a handler whose lease is lost sees its signal aborted with LockLostError', async () => {
    const store = await h.open();
    let reason: unknown;
    let started = false;
    const engine = await startEngine(h, store, {
      handlers: {
        work: (_job: Job, ctx) =>
          new Promise<void>((resolve) => {
            started = true;
            ctx.signal.addEventListener('abort', () => {
              reason = ctx.signal.reason;
              resolve();
            });
          }),
      },
      leaseMs: 300,
    });
    const job = await engine.enqueue('work', {});
    await waitFor('the job to start', async () => started);
    // Someone else takes the job away (a write with its token, as a stale owner's would be
    // refused): the next heartbeat finds the lease gone.
    const leased = await store.getJob(job.id);
    const ref = { id: job.id, token: leased?.lockToken as string };
    const error = { message: 'taken away', stack: null };
    expect(await store.fail([{ ...ref, error, deadletter: true, retryDelayMs: 0 }])).toEqual({
      lost: [],
    });
    await waitFor('the handler to be aborted', async () => reason !== undefined, h.timeoutMs / 3);
    expect(reason).toBeInstanceOf(LockLostError);
  });

  it('a handler cut off from the store is aborted by its local deadline before its lease ends there: no other owner takes the job first (16)', async () => {
    const store = await h.open();
    const peer = await h.peer(store);
    const network = behindSilentNetwork(store);
    const events: string[] = [];
    const engine = new JobEngine({
      store: network.store,
      leaseMs: 1_200,
      logger: silentLogger,
      handlers: {
        work: (_job: Job, ctx) =>
          new Promise<void>((resolve) => {
            // From here on no renewal (and no other call) of this engine is ever answered.
            network.silence();
            events.push('started');
            ctx.signal.addEventListener('abort', () => {
              const reason = ctx.signal.reason;
              events.push(
                reason instanceof LockLostError ? 'aborted: lease lost' : `aborted: ${reason}`,
              );
              resolve();
            });
          }),
      },
    });
    h.defer(() => engine.stop({ timeoutMs: 1_000 }));
    // Runs before the stop above (deferred calls run last first), so stop() finds a network again.
    h.defer(async () => network.restore());
    await engine.start();
    const job = await engine.enqueue('work', {});
    await waitFor('the handler to start', async () => events.length > 0, h.timeoutMs / 3);
    // Another owner tries all along; the store lets it in only once the lease ended there.
    await waitFor(
      'another owner to take the job after its lease ended on the store',
      async () => {
        // The other owner is another process in life; here it shares this event loop. After a
        // stall of the loop (a busy machine), let the engine's deadline timer, already due, run
        // before this check does — as it would in its own process.
        await new Promise((resolve) => setTimeout(resolve, 1));
        await peer.recoverExpiredLeases(10);
        const taken = await acquire(peer, { owner: 'other', leaseMs: 60_000 });
        if (taken.length === 0) return false;
        expect(taken.map((j) => j.id)).toEqual([job.id]);
        events.push('taken by another owner');
        return true;
      },
      h.timeoutMs / 2,
      5,
    );
    expect(events).toEqual(['started', 'aborted: lease lost', 'taken by another owner']);
  });

  it(
    'jobs held by a crashed process (SIGKILL), running or prefetched, run elsewhere once; a prefetched one as its first attempt (capabilities.startMarks)',
    async (ctx) => {
      const store = await h.open();
      const spec = h.processPeerOrSkip(store, ctx);
      const jobs = await enqueueJobs(
        store,
        Array.from({ length: 6 }, (_, i) => ({ payload: { i } })),
      );
      const child = spawnEnginePeer(spec, {
        type: 'work',
        concurrency: 2,
        prefetch: 4,
        leaseMs: 400,
      });
      h.defer(() => child.kill());
      await child.ready;
      await waitFor(
        'the child to hold every job',
        async () => {
          const running = await store.listJobs({ state: 'running', limit: 10, offset: 0 });
          return running.length === jobs.length && child.started().length === 2;
        },
        h.timeoutMs / 2,
      );
      const started = new Set(child.started());
      await child.kill();
      const attempts = new Map<string, number[]>();
      await startEngine(h, store, {
        handlers: {
          work: async (job: Job, c) => {
            attempts.set(job.id, [...(attempts.get(job.id) ?? []), c.attempt]);
          },
        },
        leaseMs: 300,
      });
      await waitFor(
        'every job to run',
        async () => attempts.size === jobs.length && isEmpty(store),
        h.timeoutMs / 2,
      );
      // A job whose handler started counts that attempt; a prefetched one never started, so
      // (where the store records starts) it runs as its first attempt.
      const marks = store.capabilities.startMarks === true;
      for (const job of jobs) {
        const first = started.has(job.id) || !marks ? 2 : 1;
        expect(attempts.get(job.id), job.id).toEqual([first]);
      }
    },
    h.timeout(2),
  );
}
