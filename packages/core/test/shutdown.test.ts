import { describe, expect, it } from 'vitest';
import { JobEngine } from '../src/engine/engine.js';
import { MemoryJobStore } from '../src/memory-store.js';
import type { JobStore } from '../src/store.js';
import { engine, newJob, sleep, waitFor } from './helpers.js';

function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

describe('stop()', () => {
  it('completes a handler that succeeds in the grace after the timeout: it is not run again', async () => {
    const store = new MemoryJobStore();
    let runs = 0;
    const e = engine({
      store,
      handlers: {
        slow: (_job, ctx) => {
          runs += 1;
          return new Promise<void>((resolve) => {
            // Finishes its work shortly after being told to stop.
            ctx.signal.addEventListener('abort', () => setTimeout(resolve, 50));
          });
        },
      },
    });
    await e.start();
    const job = await e.enqueue('slow', {});
    await waitFor(() => runs === 1, 'the handler started');
    await e.stop({ timeoutMs: 50 });
    expect(await store.getJob(job.id)).toBeNull();
  });

  it('a handler that reads ctx.signal only after stop() aborted it gets an aborted signal with the reason', async () => {
    const store = new MemoryJobStore();
    let started = false;
    let seen: { aborted: boolean; reason: unknown } | null = null;
    const e = engine({
      store,
      handlers: {
        late: async (_job, ctx) => {
          started = true;
          // The signal is made lazily: the abort comes before this first read.
          await sleep(150);
          seen = { aborted: ctx.signal.aborted, reason: ctx.signal.reason };
        },
      },
    });
    await e.start();
    await e.enqueue('late', {});
    await waitFor(() => started, 'the handler started');
    await e.stop({ timeoutMs: 30 });
    await waitFor(() => seen !== null, 'the handler read its signal');
    expect(seen).toMatchObject({ aborted: true, reason: { code: 'STOPPED' } });
  });

  it('never releases a job whose handler ignores its signal: the lease is renewed until it returns', async () => {
    const store = new MemoryJobStore();
    let finish = (): void => {};
    const done = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let started = false;
    const e = engine({
      store,
      leaseMs: 300,
      handlers: {
        stubborn: () => {
          started = true;
          return done;
        },
      },
    });
    await e.start();
    const first = await e.enqueue('stubborn', {}, { scope: 'acct', exclusive: true });
    const second = await e.enqueue('stubborn', {}, { scope: 'acct', exclusive: true });
    // The handler itself, not the row: an acquisition marks the row running (a start mark)
    // before the handler starts, and stop() gives back a job whose handler has not started.
    await waitFor(() => started, 'the handler to start');
    await e.stop({ timeoutMs: 50 });
    // stop() returned while the handler runs on: the job stays leased to the stopped engine,
    // its lease renewed past several lease lengths, so no one else can start it — nor the
    // second exclusive job of its scope.
    const peer = new JobEngine({ store, leaseMs: 300, handlers: { stubborn: async () => {} } });
    await peer.start();
    try {
      const leaseBefore = (await store.getJob(first.id))?.lockExpiresAt?.getTime() ?? 0;
      await sleep(1_000);
      const held = await store.getJob(first.id);
      expect(held?.state).toBe('running');
      expect(held?.lockExpiresAt?.getTime() ?? 0).toBeGreaterThan(leaseBefore);
      expect((await store.getJob(second.id))?.state).not.toBe('running');
      finish();
      await waitFor(async () => (await store.getJob(first.id)) === null, 'the job completed');
      // Then the scope frees up and the peer runs the second job.
      await waitFor(async () => (await store.getJob(second.id)) === null, 'the second job ran');
    } finally {
      await peer.stop({ timeoutMs: 1_000 });
    }
  });

  it('stop() during start() leaves the engine stopped; concurrent start() calls leak no timer', async () => {
    const store = new MemoryJobStore();
    const before = timers();
    const a = new JobEngine({ store, handlers: { t: async () => {} } });
    const starts = [a.start(), a.start()];
    const stopped = a.stop({ timeoutMs: 100 });
    await Promise.all([...starts, stopped]);
    await expect(a.start()).rejects.toThrow(/cannot be started again/);
    const b = new JobEngine({ store, handlers: { t: async () => {} } });
    await Promise.all([b.start(), b.start()]);
    await b.stop({ timeoutMs: 100 });
    await sleep(20);
    expect(timers()).toBe(before);
    await store.enqueue([newJob({ type: 't' })]);
    await sleep(100);
    expect((await store.listJobs({ limit: 10, offset: 0 }))[0]?.state).toBe('async');
  });

  it('returns although the store never answers again', async () => {
    const memory = new MemoryJobStore();
    let silent = false;
    const hang = new Promise<never>(() => {});
    const store = new Proxy(memory, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => (silent ? hang : value.apply(target, args));
      },
    }) as JobStore;
    let started = false;
    const e = engine({
      store,
      leaseMs: 1_000,
      handlers: {
        work: (_job, ctx) =>
          new Promise<void>((resolve) => {
            started = true;
            ctx.signal.addEventListener('abort', () => resolve());
          }),
      },
    });
    await e.start();
    await e.enqueue('work', {});
    await waitFor(() => started, 'the handler started');
    silent = true;
    await e.stop({ timeoutMs: 100 });
    expect(e.snapshot().state).toBe('stopped');
  }, 20_000);

  it('a stopped engine retries a write the store refused only while the lease may be live, without keeping the process alive', async () => {
    const store = new MemoryJobStore();
    let refusing = false;
    let completeCalls = 0;
    const complete = store.complete.bind(store);
    store.complete = async (jobs) => {
      completeCalls += 1;
      if (refusing) throw new Error('the database went away');
      return complete(jobs);
    };
    const leaseMs = 400;
    let finish = (): void => {};
    const e = engine({
      store,
      leaseMs,
      handlers: {
        work: () =>
          new Promise<void>((resolve) => {
            finish = resolve;
          }),
      },
    });
    await e.start();
    await e.enqueue('work', {});
    await waitFor(() => e.snapshot().executing === 1, 'the handler started');
    refusing = true;
    finish();
    await waitFor(() => completeCalls > 0, 'a completion was attempted');
    await e.stop({ timeoutMs: 50 });
    // Retries go on in the background for about one lease, then end: nothing keeps writing.
    await sleep(leaseMs * 3);
    const settled = completeCalls;
    await sleep(leaseMs * 2);
    expect(completeCalls).toBe(settled);
    expect(timers()).toBe(0);
  });
});
