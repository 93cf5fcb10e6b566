import { describe, expect, it } from 'vitest';
import { JobEngine, MemoryJobStore } from '../src/index.js';
import { sleep } from './helpers.js';

/**
 * A store whose first call of one of `methods` takes effect and then fails, as when the
 * connection drops after the commit; `getJob` can be slowed to widen races with `stop()`.
 */
function lostReply(store: MemoryJobStore, methods: string[], getJobDelayMs = 0) {
  const state = { armed: true };
  const proxy = new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (methods.includes(prop as string)) {
        return async (...args: unknown[]) => {
          const result = await value.apply(target, args);
          if (state.armed) {
            state.armed = false;
            throw new Error(`connection reset after ${String(prop)} committed`);
          }
          return result;
        };
      }
      if (prop === 'getJob' && getJobDelayMs > 0) {
        return async (id: string) => {
          await sleep(getJobDelayMs);
          return target.getJob(id);
        };
      }
      return value.bind(target);
    },
  });
  return { proxy, state };
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    if (check()) return;
    await sleep(2);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('a settle call that took effect but failed', () => {
  it('a completion is reported completed, and before stop() resolves', async () => {
    const store = new MemoryJobStore();
    const { proxy, state } = lostReply(store, ['complete', 'completeAndAcquire'], 20);
    const log: string[] = [];
    const engine = new JobEngine({ store: proxy, handlers: { t: async () => {} }, leaseMs: 2000 });
    for (const event of ['completed', 'lease-lost', 'error'] as const) {
      engine.on(event, () => log.push(event));
    }
    await engine.start();
    await engine.enqueue('t', {});
    await until(() => !state.armed, 'the faulty completion');
    await engine.stop();
    log.push('stop resolved');
    await store.close();
    await sleep(100);
    expect(log).toEqual(['error', 'completed', 'stop resolved']);
  });

  it('a failure is reported failed and retried, not lease-lost, even once the retry has run', async () => {
    const store = new MemoryJobStore();
    const { proxy, state } = lostReply(store, ['fail']);
    const log: string[] = [];
    let runs = 0;
    const engine = new JobEngine({
      store: proxy,
      handlers: {
        t: async () => {
          runs += 1;
          if (runs === 1) throw new Error('boom');
        },
        other: async () => {},
      },
      retry: { kind: 'fixed', delayMs: 0 },
      leaseMs: 2000,
    });
    for (const event of ['started', 'failed', 'retried', 'completed', 'lease-lost'] as const) {
      engine.on(event, ({ job }: { job: { type: string; attempts: number } }) => {
        if (job.type === 't') log.push(`${event}#${job.attempts}`);
      });
    }
    await engine.start();
    await engine.enqueue('t', {});
    await until(() => !state.armed, 'the faulty failure');
    // Other work wakes the loop, so the retry (due at once) can run before the failure is
    // written again and found gone.
    await engine.enqueue('other', {});
    await until(() => log.includes('completed#2') && log.includes('retried#1'), 'both attempts');
    await engine.stop();
    expect(runs).toBe(2);
    expect([...log].sort()).toEqual(
      ['completed#2', 'failed#1', 'retried#1', 'started#1', 'started#2'].sort(),
    );
  });
});

describe('a run whose completion did not land, and whose job the engine leased again', () => {
  // On a store with concurrentCalls, acquisitions go on while completions fail; with folded
  // completions a failing completeAndAcquire stops both, and the case cannot arise.
  it('is reported lease-lost once, and the new run completed once', async () => {
    const store = new MemoryJobStore();
    const capabilities = { ...store.capabilities, concurrentCalls: true };
    // While `down`, completions and lease renewals fail without taking effect (a cut
    // connection): the first run's lease lapses, recovery requeues the job, and this engine
    // leases it again. Both runs' completions then wait in one queue.
    const state = { down: true };
    const proxy = new Proxy(store, {
      get(target, prop) {
        if (prop === 'capabilities') return capabilities;
        const value = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        if (['complete', 'completeAndAcquire', 'renewLeases'].includes(prop as string)) {
          return async (...args: unknown[]) => {
            if (state.down) throw new Error(`connection reset before ${String(prop)}`);
            return value.apply(target, args);
          };
        }
        return value.bind(target);
      },
    });
    const log: string[] = [];
    let runs = 0;
    const engine = new JobEngine({
      store: proxy,
      handlers: {
        t: async () => {
          runs += 1;
        },
      },
      leaseMs: 300,
      concurrency: 1,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
    });
    for (const event of ['completed', 'lease-lost'] as const) {
      engine.on(event, ({ job }) => log.push(`${event} ${job.attempts}`));
    }
    await engine.start();
    const job = await engine.enqueue('t', {});
    await until(() => runs === 2, 'the second run');
    state.down = false;
    await until(() => log.includes('completed 2'), 'the second run to be completed');
    await engine.stop();
    expect(await store.getJob(job.id)).toBeNull();
    expect(log.filter((line) => line.startsWith('completed'))).toEqual(['completed 2']);
    expect(log).toContain('lease-lost 1');
    await store.close();
  });
});
